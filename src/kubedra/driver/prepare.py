"""NodePrepareResources / NodeUnprepareResources, independent of the gRPC version.

Per claim (drivers.md §5.2): check the reference the kubelet sent (UID, namespace and name in
the formats the API server makes; anything else gets a per-claim error before any path is
built); GET the ResourceClaim by namespace/name, require the same UID ("claim got replaced"
otherwise) and a `status.allocation` whose node selector admits this node; take the results
of this driver, which must all be in this node's pool and name published devices; apply
this driver's opaque config from class and claim (`kubedra.driver.config`); commit the entry
to the checkpoint, then write the claim's CDI spec; answer with the CDI ids per device, and
hand the claim to the status writer (`status.devices`, in the background). Already
prepared claims are answered from the checkpoint, without the API server (the kubelet
retries, also across restarts of either side). Unprepare commits the removal, then deletes
the CDI spec and host dirs; a claim that is not prepared is not an error. One claim's
failure never fails the others: every claim of the call gets its own entry. The
commit-first order is what makes a kill -9 at any point recoverable (`recovery`).

MIG placements (with an `Nvml` to make instances, `kubedra.driver.mig`): prepare checks that
the GPU is not held whole by a prepared claim and that no instance uses the placement's
memory slices, commits a pending record of each instance, makes the instances (GPU instance
at the placement, its full compute instance), then commits the entry with the instances'
IDs and MIG UUIDs (dropping the pending records in the same save), then writes the CDI spec.
A whole GPU in MIG mode is not handed out while instances exist on it. Unprepare commits the
removal together with pending records of the claim's instances, deletes the files, destroys
each compute instance then its GPU instance, and commits the records away. At start (and
before each publication) pending instances are destroyed; at start a prepared claim whose
instance is gone (a reboot, a GPU reset) gets it made again at the same placement, its CDI
spec rewritten for the new instance. Instances no record names are never touched; the
published slice leaves them out (`DeviceState.publishable`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.core import Node
from kubedra.api.resource import (
    AllocationResult,
    Device,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from kubedra.api.selection import NodeSelectorError, node_selector_matches
from kubedra.catalog.inventory import DriverInventory
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import Store, T
from kubedra.driver import files
from kubedra.driver.backends.nvml import Nvml
from kubedra.driver.cdi import (
    SIMULATED,
    AllocatedDevice,
    CdiHost,
    MigAccess,
    build_spec,
    retarget_mig,
)
from kubedra.driver.checkpoint import (
    Checkpoint,
    MigInstance,
    PreparedClaim,
    PreparedDevice,
    claim_problem,
)
from kubedra.driver.claimfiles import ClaimFiles, embed, uses_mps
from kubedra.driver.config import ConfigError, config_for, describe
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.metrics import DriverMetrics
from kubedra.driver.mig import Instance, MigError, MigManager, Placement, holds, may_name
from kubedra.driver.recovery import recover
from kubedra.driver.status import StatusWriter, device_data
from kubedra.errors import KubedraError, NotFound

log = get_logger("prepare")
LOCK_NAME = "driver.lock"


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass
class PrepareResult:
    devices: list[PreparedDevice] = field(default_factory=list)
    error: str = ""


class PrepareError(Exception):
    """A claim that cannot be prepared; the message goes into its `error` entry."""


class DeviceState:
    """Prepared claims of one driver on one node, backed by the checkpoint file.

    Holds the plugin directory's lock for its lifetime (`close` releases it), so a second
    instance on the same node waits instead of overwriting this one's checkpoint. With
    `nvml`, MIG placements get their instances made at prepare (see the module doc)."""

    def __init__(
        self,
        store: Store,
        driver: str,
        node: str,
        plugin_dir: Path,
        cdi_dir: Path,
        metrics: DriverMetrics | None = None,
        *,
        statuses: StatusWriter | None = None,
        lock_timeout: float = 60.0,
        cdi_host: CdiHost = SIMULATED,
        nvml: Nvml | None = None,
    ) -> None:
        self.store, self.driver, self.node = store, driver, node
        self.statuses, self.cdi_host = statuses, cdi_host
        self.mig = MigManager(nvml) if nvml is not None else None
        self._foreign: tuple[str, ...] = ()  # instances made outside the driver, last seen
        self.plugin_dir = files.ensure_dir(plugin_dir, files.PLUGIN_DIR_MODE)
        self.metrics = metrics or DriverMetrics(driver, node)
        self._lock = threading.Lock()
        self._devices: dict[str, Device] = {}
        # Claim UID -> the pods its status.reservedFor named at prepare (the device metrics'
        # labels; replaced whole on change, so readers need no lock; empty after a restart).
        self.consumers: dict[str, tuple[str, ...]] = {}
        self._lock_file = files.hold_lock(files.child(plugin_dir, LOCK_NAME), lock_timeout)
        try:
            self.files = ClaimFiles(plugin_dir, cdi_dir, driver)
            self.checkpoint = Checkpoint(plugin_dir, driver, node)
            snapshot = recover(self.checkpoint, self.files, store, self.metrics)
        except BaseException:
            self.close()
            raise
        self._prepared, self._generation = dict(snapshot.claims), snapshot.generation
        self._pending: tuple[MigInstance, ...] = snapshot.pending
        self.metrics.set_prepared(len(self._prepared))
        if self._prepared:
            log_event(log, "checkpoint loaded", prepared=len(self._prepared))
        if self.mig is not None:
            with self._lock:
                self._start_mig()

    def close(self) -> None:
        """Release the plugin directory (another instance may take over)."""
        self._lock_file.close()

    def set_devices(self, devices: Iterable[Device]) -> None:
        """The devices currently published for this node (what prepare can hand out)."""
        with self._lock:
            self._devices = {d.name: d for d in devices}

    @property
    def prepared(self) -> Mapping[str, PreparedClaim]:
        return dict(self._prepared)

    @property
    def pending(self) -> tuple[MigInstance, ...]:
        """MIG instances being made or destroyed that no prepared claim holds."""
        return self._pending

    def _commit(
        self, claims: dict[str, PreparedClaim], pending: Iterable[MigInstance] | None = None
    ) -> None:
        """Save `claims` (and the pending MIG instances, unchanged unless given) as the next
        generation; memory follows only a successful save."""
        generation = self._generation + 1
        pending = self._pending if pending is None else tuple(pending)
        self.checkpoint.save(claims, generation, pending)
        self._prepared, self._generation, self._pending = claims, generation, pending

    # --- prepare ----------------------------------------------------------------------

    def prepare(self, claims: Iterable[ClaimRef]) -> dict[str, PrepareResult]:
        results: dict[str, PrepareResult] = {}
        claims = list(claims)
        if not claims:  # the health probe: answered without waiting for a prepare in flight
            return results
        with self._lock:
            for ref in claims:
                start = time.perf_counter()
                try:
                    results[ref.uid] = PrepareResult(devices=self._prepare_one(ref))
                except (PrepareError, files.UnsafePath) as err:
                    results[ref.uid] = PrepareResult(error=str(err))
                except Exception as err:  # never let one claim fail the call
                    log.exception("prepare failed unexpectedly")
                    results[ref.uid] = PrepareResult(error=f"internal error: {err}")
                failed = bool(results[ref.uid].error)
                self.metrics.observe_claim("prepare", time.perf_counter() - start, failed)
                log_event(
                    log,
                    "claim prepare failed" if failed else "claim prepared",
                    logging.WARNING if failed else logging.INFO,
                    claim=f"{ref.namespace[:63]}/{ref.name[:253]}",
                    uid=ref.uid[:36],
                    devices=[d.device_name for d in results[ref.uid].devices],
                    error=results[ref.uid].error or None,
                )
            self.metrics.set_prepared(len(self._prepared))
        return results

    def _prepare_one(self, ref: ClaimRef) -> list[PreparedDevice]:
        problem = claim_problem(ref.uid, ref.namespace, ref.name)
        if problem:
            raise PrepareError(f"invalid claim reference: {problem}")
        entry = self._prepared.get(ref.uid)
        if entry is not None:
            self.files.materialize(entry)  # e.g. /var/run/cdi is a tmpfs: reboot
        else:
            entry = self._prepare_new(ref)
            try:
                self.files.materialize(entry)
            except Exception:
                self._roll_back(ref.uid)
                raise
        if self.statuses is not None:
            self.statuses.enqueue(entry)
        return entry.devices

    def _prepare_new(self, ref: ClaimRef) -> PreparedClaim:
        """Commit the entry of a claim not yet prepared, after making its MIG instances."""
        self.files.spec_path(ref.uid)  # refuses a planted link before anything is committed
        claim, mine, allocated = self._allocation(ref)
        made = self._make_mig(ref, mine, allocated)
        try:
            entry = self._new_entry(ref, claim, mine, allocated, made)
            rest = [p for p in self._pending if p.claim_uid != ref.uid]
            self._commit({**self._prepared, ref.uid: entry}, pending=rest)
        except Exception:
            self._unmake(ref.uid, made)
            raise
        return entry

    def _allocation(
        self, ref: ClaimRef
    ) -> tuple[ResourceClaim, list[DeviceRequestAllocationResult], list[AllocatedDevice]]:
        """The claim, this driver's results in its allocation, and their devices as published
        with their config; PrepareError when the claim cannot be prepared here."""
        claim = self._get_claim(ref)
        allocation = claim.status.allocation if claim.status else None
        if allocation is None:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} is not allocated")
        self._check_node(ref, allocation)
        mine = [r for r in allocation.devices.results if r.driver == self.driver]
        if not mine:
            raise PrepareError(
                f"ResourceClaim {ref.namespace}/{ref.name} has no devices of driver {self.driver}"
            )
        allocated: list[AllocatedDevice] = []
        for result in mine:
            if result.pool != self.node:
                raise PrepareError(
                    f"device {result.pool}/{result.device} is allocated from pool "
                    f"{result.pool!r}, not from this node's pool {self.node!r}"
                )
            device = self._devices.get(result.device)
            if device is None:
                raise PrepareError(f"device {result.device!r} is not published on node {self.node}")
            device_type = device.attributes.get("type")
            type_name = str(device_type.value) if device_type is not None else ""
            try:
                config = config_for(
                    self.driver, result.request, type_name, allocation.devices.config
                )
            except ConfigError as err:
                raise PrepareError(f"request {result.request!r}: {err}") from None
            allocated.append(AllocatedDevice(result.request, device, describe(config)))
        return claim, mine, allocated

    def _new_entry(
        self,
        ref: ClaimRef,
        claim: ResourceClaim,
        mine: list[DeviceRequestAllocationResult],
        allocated: list[AllocatedDevice],
        made: list[MigInstance],
    ) -> PreparedClaim:
        """The checkpoint entry of a claim not yet prepared, its CDI spec included."""
        sharing = {a.device.name: a.sharing for a in allocated}
        mps_dir = self.files.host_dir(ref.uid) if uses_mps(sharing) else None
        spec, ids = build_spec(self.driver, ref.uid, allocated, mps_dir, self.cdi_host)
        data = {a.device.name: _with_mig(device_data(a.device), a) for a in allocated}
        entry = PreparedClaim(
            uid=ref.uid,
            namespace=ref.namespace,
            name=ref.name,
            devices=[
                PreparedDevice(
                    request_names=[result.request.split("/", 1)[0]],
                    pool_name=result.pool,
                    device_name=result.device,
                    cdi_device_ids=[cdi_id],
                    share_id=result.share_id,
                )
                for result, cdi_id in zip(mine, ids, strict=True)
            ],
            sharing=sharing,
            device_data={name: d for name, d in data.items() if d},
            prepared_at=now_rfc3339(),
            generation=self._generation + 1,
            mig=made,
        )
        spec["annotations"].update(embed(entry))
        self.consumers = {**self.consumers, ref.uid: _pods(claim)}
        return msgspec.structs.replace(entry, cdi_spec=spec)

    def _roll_back(self, uid: str) -> None:
        """Undo a committed prepare whose files could not be written (the kubelet retries)."""
        try:
            self._forget(uid)
            self.files.remove(uid)
            self._release(uid)
        except Exception:  # the entry stays committed: the next prepare answers from it
            log.exception("rolling back a failed prepare failed")

    def _forget(self, uid: str) -> None:
        """Commit a claim's removal; its MIG instances become pending (to be destroyed)."""
        entry = self._prepared.get(uid)
        if entry is not None:
            claims = {u: c for u, c in self._prepared.items() if u != uid}
            self._commit(claims, pending=(*self._pending, *entry.mig))

    # --- MIG instances ----------------------------------------------------------------

    def _make_mig(
        self,
        ref: ClaimRef,
        mine: list[DeviceRequestAllocationResult],
        allocated: list[AllocatedDevice],
    ) -> list[MigInstance]:
        """Make the MIG instances of the claim's placements (their records, completed), and
        set each placement's `AllocatedDevice.mig`; PrepareError saying why not."""
        if self.mig is None:
            return []
        try:
            wanted = [
                (a, p, bool(r.admin_access))
                for r, a in zip(mine, allocated, strict=True)
                if (p := self.mig.placement(a.device)) is not None
            ]
            held = [a for r, a in zip(mine, allocated, strict=True) if not r.admin_access]
            self._check_partitioning(ref, held, [p for _, p, admin in wanted if not admin])
        except MigError as err:
            raise PrepareError(str(err)) from None
        for a, p, admin in wanted:
            if admin:  # admin access: the instance of the claim that holds the placement
                a.mig = self._admin_access(p)
        intents = [p.record(ref.uid) for _, p, admin in wanted if not admin]
        if not intents:
            return []
        self._commit(self._prepared, pending=(*self._pending, *intents))
        made: list[MigInstance] = []
        try:
            for intent in intents:
                made.append(self.mig.create(intent))
            own = [(a, p) for a, p, admin in wanted if not admin]
            for (a, _), record in zip(own, made, strict=True):
                a.mig = self.mig.access(record)
        except MigError as err:
            self._unmake(ref.uid, made)
            raise PrepareError(str(err)) from None
        except Exception:
            self._unmake(ref.uid, made)
            raise
        log_event(
            log,
            "MIG instances created",
            claim=f"{ref.namespace}/{ref.name}",
            instances=[f"{m.device_name} gi={m.gpu_instance_id} {m.mig_uuid}" for m in made],
        )
        return made

    def _unmake(self, uid: str, made: list[MigInstance]) -> None:
        """Destroy the instances a failed prepare made (`made`, and whatever stands at the
        placement of one of its pending records: a GPU instance whose compute instance
        failed and could not be undone), and drop its pending records; what cannot be
        destroyed now stays pending, for the next start or publication."""
        if self.mig is None:
            return
        pending = [p for p in self._pending if p.claim_uid != uid]
        done = {(m.gpu_uuid, m.profile_id, m.start) for m in made}
        rest = [
            p for p in self._pending
            if p.claim_uid == uid and (p.gpu_uuid, p.profile_id, p.start) not in done
        ]  # fmt: skip
        if not made and len(pending) == len(self._pending):
            return  # nothing made, nothing pending: nothing to commit
        for record in [*made, *rest]:
            try:
                self._destroy(record)
            except MigError as err:
                log_event(log, "MIG instance left pending", logging.WARNING, error=str(err))
                pending.append(record)
        try:
            self._commit(self._prepared, pending=pending)
        except Exception:
            log.exception("dropping the pending records of a failed prepare failed")

    def _destroy(self, record: MigInstance) -> None:
        """Destroy the instance a record names, unless a prepared claim holds it."""
        assert self.mig is not None
        owned = [r for c in self._prepared.values() for r in c.mig]
        for instance in self.mig.instances(record.gpu_uuid):
            if may_name(record, instance) and not any(holds(o, instance) for o in owned):
                self.mig.destroy(instance)
                log_event(log, "MIG instance destroyed", instance=instance.describe(),
                          device=record.device_name, claim_uid=record.claim_uid)  # fmt: skip

    def _release(self, uid: str | None = None) -> list[str]:
        """Destroy the pending instances (of claim `uid`, or all) and commit their records
        away; the errors of those that stay pending."""
        if self.mig is None:
            return []
        errors: list[str] = []
        kept: list[MigInstance] = []
        for record in self._pending:
            if uid is not None and record.claim_uid != uid:
                kept.append(record)
                continue
            try:
                self._destroy(record)
            except MigError as err:
                errors.append(str(err))
                kept.append(record)
        if len(kept) != len(self._pending):
            self._commit(self._prepared, pending=kept)
        return errors

    def _check_partitioning(
        self, ref: ClaimRef, allocated: list[AllocatedDevice], placements: list[Placement]
    ) -> None:
        """A GPU is whole or partitioned: no MIG instance on a GPU a prepared claim holds
        whole, no whole GPU with instances on it, no placement whose slices are taken."""
        assert self.mig is not None
        mig_gpus = self.mig.gpus()
        whole: dict[str, str] = {}  # GPU uuid -> the claim holding it whole
        for claim in self._prepared.values():
            for device in claim.devices:
                data = claim.device_data.get(device.device_name, {})
                if "parentUUID" not in data and data.get("uuid") in mig_gpus:
                    whole[str(data["uuid"])] = f"{claim.namespace}/{claim.name}"
        for a in allocated:
            uuid = a.attribute("uuid")
            if a.attribute("type") == "gpu" and uuid in mig_gpus:
                whole[str(uuid)] = f"{ref.namespace}/{ref.name}"
        instances = self.mig.instances() if placements or whole else []
        for p in placements:
            if p.gpu_uuid in whole:
                raise PrepareError(
                    f"device {p.device}: gpu-{p.gpu_minor} is in use as a whole GPU by claim "
                    f"{whole[p.gpu_uuid]}; a GPU held whole is never partitioned"
                )
            for instance in instances:
                if instance.gpu_uuid == p.gpu_uuid and set(instance.slices) & set(
                    range(p.start, p.start + p.size)
                ):
                    raise PrepareError(
                        f"device {p.device}: its memory slices {p.start}-{p.start + p.size - 1} "
                        f"are taken by {self._owner(instance)}"
                    )
        for a in allocated:
            uuid = a.attribute("uuid")
            if a.attribute("type") != "gpu" or uuid not in mig_gpus:
                continue
            there = [i for i in instances if i.gpu_uuid == uuid]
            if there:
                raise PrepareError(
                    f"device {a.device.name}: the GPU is partitioned ({len(there)} MIG "
                    f"instance(s): {'; '.join(self._owner(i) for i in there)}); a whole-GPU "
                    "claim needs it without MIG instances"
                )

    def _owner(self, instance: Instance) -> str:
        for claim in self._prepared.values():
            if any(holds(r, instance) for r in claim.mig):
                return f"{instance.describe()} of claim {claim.namespace}/{claim.name}"
        if any(may_name(r, instance) for r in self._pending):
            return f"{instance.describe()}, being destroyed"
        return f"{instance.describe()}, made outside kubedra (never destroyed by it)"

    def _admin_access(self, placement: Placement) -> MigAccess:
        """Admin access to a MIG placement: the instance of the claim holding it."""
        assert self.mig is not None
        for claim in self._prepared.values():
            for record in claim.mig:
                if record.device_name == placement.device:
                    try:
                        return self.mig.access(record)
                    except MigError as err:
                        raise PrepareError(str(err)) from None
        raise PrepareError(
            f"device {placement.device}: admin access to a MIG placement needs its instance, "
            "and no prepared claim holds one"
        )

    def _start_mig(self) -> None:
        """At start: destroy the pending instances (a prepare or unprepare cut short), and
        make again the instances of prepared claims that are gone."""
        try:
            errors = self._release()
            if errors:
                log_event(log, "MIG instances left pending", logging.WARNING, errors=errors)
            self._restore()
        except MigError as err:  # NVML unusable now: the next publication retries the rest
            log_event(log, "MIG instances not reconciled", logging.ERROR, error=str(err))

    def _restore(self) -> None:
        assert self.mig is not None
        instances = self.mig.instances()
        for uid, entry in list(self._prepared.items()):
            for record in entry.mig:
                if any(holds(record, i) for i in instances):
                    continue
                claim = f"{entry.namespace}/{entry.name}"
                try:
                    self._remake(uid, record)
                except (MigError, PrepareError) as err:
                    log_event(log, "MIG instance of a prepared claim is gone and cannot be "
                              "made again", logging.ERROR, claim=claim, device=record.device_name,
                              error=str(err))  # fmt: skip
                else:
                    log_event(log, "MIG instance of a prepared claim made again",
                              logging.WARNING, claim=claim, device=record.device_name)  # fmt: skip

    def _remake(self, uid: str, record: MigInstance) -> None:
        """Make a prepared claim's vanished instance again at its placement, and move the
        claim's entry and CDI spec to the new one."""
        assert self.mig is not None
        for instance in self.mig.instances(record.gpu_uuid):
            if set(instance.slices) & set(record.slices):
                raise PrepareError(f"its memory slices are taken by {self._owner(instance)}")
        intent = msgspec.structs.replace(
            record, gpu_instance_id=None, compute_instance_id=None, mig_uuid=""
        )
        self._commit(self._prepared, pending=(*self._pending, intent))
        made: MigInstance | None = None
        try:
            made = self.mig.create(intent)
            access = self.mig.access(made)
        except MigError:
            self._unmake(uid, [made] if made is not None else [])
            raise
        entry = self._prepared[uid]
        spec = retarget_mig(
            entry.cdi_spec, f"{uid}-{record.device_name}", record.mig_uuid, access, self.cdi_host
        )
        data = dict(entry.device_data)
        data[record.device_name] = {**data.get(record.device_name, {}), "uuid": made.mig_uuid}
        moved = msgspec.structs.replace(
            entry,
            mig=[made if r == record else r for r in entry.mig],
            device_data=data,
            generation=self._generation + 1,
        )
        spec["annotations"].update(embed(moved))
        moved = msgspec.structs.replace(moved, cdi_spec=spec)
        rest = [p for p in self._pending if p != intent]
        self._commit({**self._prepared, uid: moved}, pending=rest)
        self.files.materialize(moved)

    def publishable(self, inventory: DriverInventory) -> DriverInventory:
        """`inventory` as it may be published: without the placements MIG instances made
        outside the driver take (their amounts off the counters); pending instances are
        destroyed first. Unchanged when NVML cannot tell (logged)."""
        if self.mig is None or inventory.driver != self.driver:
            return inventory
        with self._lock:
            try:
                errors = self._release()
                owned = [r for c in self._prepared.values() for r in c.mig]
                adjusted, foreign = self.mig.publishable(inventory, owned)
            except MigError as err:
                log_event(log, "MIG instances unknown; published unchanged", logging.WARNING,
                          error=str(err))  # fmt: skip
                return inventory
        if errors:
            log_event(log, "MIG instances left pending", logging.WARNING, errors=errors)
        seen = tuple(sorted(i.describe() for i in foreign))
        if seen != self._foreign:
            self._foreign = seen
            log_event(log, "MIG instances made outside the driver: published around them",
                      logging.WARNING if seen else logging.INFO, instances=list(seen))  # fmt: skip
        return adjusted

    def _check_node(self, ref: ClaimRef, allocation: AllocationResult) -> None:
        """The allocation is for this node: its node selector (set by the allocator for
        node-local devices, `metadata.name In [node]`) selects this node."""
        selector = allocation.node_selector
        if selector is None:
            return
        labels: dict[str, str] = {}
        if any(term.match_expressions for term in selector.node_selector_terms):
            labels = self._read(Node, self.node, "").metadata.labels
        try:
            admitted = node_selector_matches(selector, self.node, labels)
        except NodeSelectorError as err:
            admitted, why = False, f" ({err})"
        else:
            why = ""
        if not admitted:
            raise PrepareError(
                f"ResourceClaim {ref.namespace}/{ref.name} is allocated for other nodes: "
                f"status.allocation.nodeSelector does not select node {self.node}{why}"
            )

    def _read(self, cls: type[T], name: str, namespace: str) -> T:
        """An object from the API, or a PrepareError saying why it cannot be read."""
        what = f"{cls.KIND} {namespace}/{name}" if namespace else f"{cls.KIND} {name}"
        try:
            return self.store.get(cls, name, namespace) if namespace else self.store.get(cls, name)
        except NotFound:
            raise PrepareError(f"{what} not found") from None
        except KubedraError as err:  # unreachable, forbidden: the kubelet retries
            raise PrepareError(f"cannot read {what}: {err}") from None

    def _get_claim(self, ref: ClaimRef) -> ResourceClaim:
        claim = self._read(ResourceClaim, ref.name, ref.namespace)
        if claim.metadata.uid != ref.uid:
            raise PrepareError(
                f"ResourceClaim {ref.namespace}/{ref.name} got replaced: UID is "
                f"{claim.metadata.uid}, the kubelet asked for {ref.uid}"
            )
        return claim

    # --- unprepare --------------------------------------------------------------------

    def unprepare(self, claims: Iterable[ClaimRef]) -> dict[str, str]:
        """Claim UID -> error ("" on success, also for claims that were not prepared)."""
        errors: dict[str, str] = {}
        with self._lock:
            for ref in claims:
                start = time.perf_counter()
                try:
                    self._unprepare_one(ref)
                    errors[ref.uid] = ""
                except (PrepareError, files.UnsafePath) as err:
                    errors[ref.uid] = str(err)
                except Exception as err:
                    log.exception("unprepare failed")
                    errors[ref.uid] = f"unprepare failed: {err}"
                self.metrics.observe_claim(
                    "unprepare", time.perf_counter() - start, bool(errors[ref.uid])
                )
                log_event(
                    log,
                    "claim unprepared",
                    claim=f"{ref.namespace[:63]}/{ref.name[:253]}",
                    uid=ref.uid[:36],
                    error=errors[ref.uid] or None,
                )
            self.metrics.set_prepared(len(self._prepared))
        return errors

    def _unprepare_one(self, ref: ClaimRef) -> None:
        problem = claim_problem(ref.uid, ref.namespace, ref.name)
        if problem:
            raise PrepareError(f"invalid claim reference: {problem}")
        if self.statuses is not None:
            self.statuses.cancel(ref.uid)
        self._forget(ref.uid)
        if ref.uid in self.consumers:
            self.consumers = {u: p for u, p in self.consumers.items() if u != ref.uid}
        self.files.remove(ref.uid)
        errors = self._release(ref.uid)
        if errors:  # the kubelet retries the unprepare; the records stay pending meanwhile
            raise PrepareError("; ".join(errors))


def _pods(claim: ResourceClaim) -> tuple[str, ...]:
    """The pods a claim is reserved for (status.reservedFor), by name."""
    reserved = claim.status.reserved_for if claim.status else ()
    return tuple(sorted({r.name for r in reserved if r.resource == "pods" and not r.api_group}))


def _with_mig(data: dict[str, Any], device: AllocatedDevice) -> dict[str, Any]:
    """A device's status data; a MIG placement's names the instance made for it."""
    return {**data, "uuid": device.mig.uuid} if device.mig is not None else data
