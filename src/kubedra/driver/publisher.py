"""Publishing a driver's inventory of one node as ResourceSlices in the Store.

What upstream's resourceslice controller (k8s.io/dynamic-resource-allocation) does for a
node-local driver, drivers.md §5.5:

- one pool per node and driver, pool name = node name, `spec.nodeName` set;
- the driver splits: devices in slices of at most 128 (64 when any device consumes counters,
  has taints or list attributes), shared counter sets in slices of their own (v1 forbids
  devices and sharedCounters in one slice), at most 8 counter sets per slice, counter slices
  first; an empty inventory is still one empty slice ("driver alive, no devices");
- `resourceSliceCount` = number of slices, written into every slice;
- slices are named `<node>-<driver>-<index>` and owned by the Node (ownerReference with
  controller=true), so deleting the Node removes them through the store's cascade;
- the generation goes up by one when (and only when) the published content changes;
  republishing an unchanged inventory writes nothing. Obsolete slices are deleted first, then
  the others updated or created, all in one store transaction when the store offers one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from kubedra.api.core import Node
from kubedra.api.meta import ObjectMeta, OwnerReference
from kubedra.api.resource import (
    CounterSet,
    Device,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from kubedra.api.validation.limits import (
    SLICE_MAX_COUNTER_SETS,
    SLICE_MAX_DEVICES,
    SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES,
)
from kubedra.catalog.inventory import DriverInventory
from kubedra.cluster.store import Store
from kubedra.driver.logs import get_logger, log_event
from kubedra.errors import AlreadyExists, Conflict, NotFound

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubedra-driver"
_RETRIES = 5

log = get_logger("publisher")


@dataclass(frozen=True)
class PublishResult:
    generation: int
    slices: tuple[str, ...]
    devices: int
    created: int = 0
    updated: int = 0
    deleted: int = 0

    @property
    def wrote(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def _uses_advanced_features(device: Device) -> bool:
    lists = any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in device.attributes.values()
    )
    return bool(device.consumes_counters or device.taints or lists)


def max_devices_per_slice(devices: Sequence[Device]) -> int:
    """The upstream per-slice device limit that applies to this inventory."""
    if any(_uses_advanced_features(d) for d in devices):
        return SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES
    return SLICE_MAX_DEVICES


def _chunks(items: Sequence[Any], size: int) -> Iterator[tuple[Any, ...]]:
    for start in range(0, len(items), size):
        yield tuple(items[start : start + size])


def slice_name(node: str, driver: str, index: int) -> str:
    return f"{node}-{driver}-{index}"


def slice_specs(
    inventory: DriverInventory, node: str, generation: int = 0
) -> list[ResourceSliceSpec]:
    """The slices of one node's pool, in order: counter-set slices, then device slices."""
    counter_chunks: list[tuple[CounterSet, ...]] = list(
        _chunks(inventory.shared_counters, SLICE_MAX_COUNTER_SETS)
    )
    device_chunks: list[tuple[Device, ...]] = list(
        _chunks(inventory.devices, max_devices_per_slice(inventory.devices))
    )
    parts: list[tuple[tuple[Device, ...], tuple[CounterSet, ...]]] = [
        ((), c) for c in counter_chunks
    ] + [(d, ()) for d in device_chunks]
    if not parts:
        parts = [((), ())]
    pool = ResourcePool(name=node, generation=generation, resource_slice_count=len(parts))
    return [
        ResourceSliceSpec(
            driver=inventory.driver,
            pool=pool,
            node_name=node,
            devices=devices,
            shared_counters=counters,
        )
        for devices, counters in parts
    ]


def list_slices(store: Store, driver: str, node: str) -> list[ResourceSlice]:
    """This driver's slices on this node (all pools, so foreign-pool leftovers are seen too)."""
    return [
        s
        for s in store.list(ResourceSlice, field_selector=f"spec.nodeName={node}")
        if s.spec.driver == driver
    ]


def node_owner(store: Store, node: str) -> OwnerReference | None:
    try:
        obj = store.get(Node, node)
    except NotFound:
        return None
    if not obj.metadata.uid:
        return None
    return node_owner_ref(node, obj.metadata.uid)


def node_owner_ref(node: str, uid: str) -> OwnerReference:
    """The Node as its slices' controlling owner (they go when it goes)."""
    return OwnerReference(api_version="v1", kind="Node", name=node, uid=uid, controller=True)


def slice_object(
    node: str,
    driver: str,
    index: int,
    spec: ResourceSliceSpec,
    generation: int,
    owners: tuple[OwnerReference, ...],
) -> ResourceSlice:
    """The `index`th slice of the node's pool as the publisher creates it: its name, the
    managed-by label, the owners, the pool at `generation`."""
    meta = ObjectMeta(
        name=slice_name(node, driver, index),
        labels={MANAGED_BY_LABEL: MANAGED_BY},
        owner_references=owners,
    )
    pool = msgspec.structs.replace(spec.pool, generation=generation)
    return ResourceSlice(metadata=meta, spec=msgspec.structs.replace(spec, pool=pool))


def _without_generation(spec: ResourceSliceSpec) -> ResourceSliceSpec:
    return msgspec.structs.replace(spec, pool=msgspec.structs.replace(spec.pool, generation=0))


def _transaction(store: Store) -> contextlib.AbstractContextManager[Any]:
    transaction = getattr(store, "transaction", None)
    return transaction() if callable(transaction) else contextlib.nullcontext()


class Publisher:
    """Keeps one node's pool of one driver in the store equal to the latest inventory."""

    def __init__(self, store: Store, driver: str, node: str) -> None:
        self.store, self.driver, self.node = store, driver, node
        self.generation = 0  # highest generation this publisher has written or seen

    def publish(self, inventory: DriverInventory) -> PublishResult:
        if inventory.driver != self.driver:
            raise ValueError(
                f"inventory of driver {inventory.driver!r}, publisher of {self.driver!r}"
            )
        for attempt in range(_RETRIES):
            try:
                with _transaction(self.store):
                    return self._publish(inventory)
            except (Conflict, AlreadyExists, NotFound) as err:
                # Another writer moved the slices under us: read again and redo.
                log_event(
                    log, "publish raced another writer, retrying", attempt=attempt, error=str(err)
                )
        with _transaction(self.store):
            return self._publish(inventory)

    def _publish(self, inventory: DriverInventory) -> PublishResult:
        existing = {s.name: s for s in list_slices(self.store, self.driver, self.node)}
        desired = slice_specs(inventory, self.node)
        names = [slice_name(self.node, self.driver, i) for i in range(len(desired))]
        owner = node_owner(self.store, self.node)
        owners = (owner,) if owner else ()
        seen = max((s.spec.pool.generation for s in existing.values()), default=0)
        self.generation = max(self.generation, seen)

        unchanged = (
            set(existing) == set(names)
            and len({s.spec.pool.generation for s in existing.values()}) == 1
            and all(
                _without_generation(existing[n].spec) == spec
                for n, spec in zip(names, desired, strict=True)
            )
        )
        devices = len(inventory.devices)
        if unchanged:
            updated = 0
            for name in names:  # content as published; only the owner may need fixing
                current = existing[name]
                if current.metadata.owner_references != owners:
                    self.store.update(self._with_meta(current, owners))
                    updated += 1
            return PublishResult(self.generation, tuple(names), devices, updated=updated)

        generation = self.generation + 1
        deleted = created = updated = 0
        for name in sorted(set(existing) - set(names)):
            self.store.delete(ResourceSlice, name)
            deleted += 1
        for i, (name, spec) in enumerate(zip(names, desired, strict=True)):
            fresh = slice_object(self.node, self.driver, i, spec, generation, owners)
            old = existing.get(name)
            if old is None:
                self.store.create(fresh)
                created += 1
            else:
                current = self._with_meta(old, owners)
                self.store.update(msgspec.structs.replace(current, spec=fresh.spec))
                updated += 1
        self.generation = generation
        log_event(
            log,
            "pool published",
            driver=self.driver,
            node=self.node,
            generation=generation,
            slices=len(names),
            devices=devices,
            created=created,
            updated=updated,
            deleted=deleted,
        )
        return PublishResult(generation, tuple(names), devices, created, updated, deleted)

    @staticmethod
    def _with_meta(current: ResourceSlice, owners: tuple[OwnerReference, ...]) -> ResourceSlice:
        labels = {**current.metadata.labels, MANAGED_BY_LABEL: MANAGED_BY}
        meta = msgspec.structs.replace(current.metadata, owner_references=owners, labels=labels)
        return msgspec.structs.replace(current, metadata=meta)


def publish(store: Store, inventory: DriverInventory, node: str) -> PublishResult:
    """One-shot publication (a long-running agent keeps a `Publisher`)."""
    return Publisher(store, inventory.driver, node).publish(inventory)


def cleanup(store: Store, driver: str, node: str) -> int:
    """Delete every slice of `driver` on `node` (driver uninstall); returns how many."""
    deleted = 0
    with _transaction(store):
        for s in list_slices(store, driver, node):
            with contextlib.suppress(NotFound):
                store.delete(ResourceSlice, s.name)
                deleted += 1
    log_event(log, "slices removed", driver=driver, node=node, deleted=deleted)
    return deleted
