"""The device inventory: slices gathered into pools per node, built once, reused many times.

`Inventory.build` indexes every slice and device once (CEL device views, taints from
DeviceTaintRules, counter consumption). `pools_for(node)` then runs upstream's GatherPools
for one node and caches the outcome, and CEL results are cached per (selector, device):
the scheduler calls `allocate` for many pods and nodes against the same inventory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kubedra.allocator.nodes import NodeSelectorError, node_matches
from kubedra.allocator.types import DEFAULT_FEATURES, AllocationError, DeviceRef, Features, NodeInfo
from kubedra.api.core import NodeSelector
from kubedra.api.resource import (
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceTaint,
    DeviceTaintRule,
    ResourceSlice,
)
from kubedra.api.semver import Semver, SemverError
from kubedra.cel import (
    AttributeValue,
    CelCompileError,
    CelEvalError,
    CompiledSelector,
    DeviceView,
    compile_selector,
)

PoolKey = tuple[str, str]  # (driver, pool name)
# A constraint-comparable attribute: (type, values, is_list); None when the value is unusable.
Tagged = tuple[str, tuple[object, ...], bool]


def _tagged(attr: DeviceAttribute) -> Tagged | None:
    if attr.int_ is not None:
        return ("int", (attr.int_,), False)
    if attr.bool_ is not None:
        return ("bool", (attr.bool_,), False)
    if attr.string is not None:
        return ("string", (attr.string,), False)
    if attr.version is not None:
        # Versions compare by exact string: semver 2.0.0 strings are minimal (upstream rule).
        return ("version", (attr.version,), False)
    for kind, values in (
        ("int", attr.ints),
        ("bool", attr.bools),
        ("string", attr.strings),
        ("version", attr.versions),
    ):
        if values:
            return (kind, tuple(values), True)
    return None


@dataclass(eq=False, slots=True)
class DeviceEntry:
    """One device of one slice, with everything the search needs precomputed."""

    index: int
    ref: DeviceRef
    device: Device
    slice: ResourceSlice
    view: DeviceView | None
    view_error: str | None  # every selector on this device fails with this (upstream rule)
    taints: tuple[DeviceTaint, ...]
    # Capacity by name as published: upstream matches requests, consumed capacity and
    # policies on the literal key (a request for "driver/bw" does not find "bw").
    capacity: dict[str, DeviceCapacity]
    policies: bool  # some capacity has a request policy
    # consumesCounters as (counter set, [(counter, nanos)]).
    consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    multi: bool  # allowMultipleAllocations
    binding: bool  # has bindingConditions
    per_device: bool  # slice uses perDeviceNodeSelection

    def attribute(self, name: str) -> Tagged | bool | None:
        """Constraint lookup: `domain/id` literally, else the bare id in the driver's domain.

        Returns False when the device lacks the attribute, None for an unusable value.
        """
        attrs = self.device.attributes
        attr = attrs.get(name)
        if attr is None:
            domain, _, ident = name.partition("/")
            if domain != self.ref.driver or (attr := attrs.get(ident)) is None:
                return False
        return _tagged(attr)

    @property
    def node_local(self) -> bool:
        return bool(self.slice.spec.node_name or self.device.node_name)

    @property
    def node_selector(self) -> NodeSelector | None:
        if self.per_device:
            return self.device.node_selector
        return self.slice.spec.node_selector


@dataclass(eq=False, slots=True)
class Pool:
    """A resource pool as seen from one node (upstream Pool)."""

    driver: str
    name: str
    generation: int
    incomplete: bool = False
    invalid: str | None = None
    # Devices of the slices targeting the node, in search order, with whether each one is
    # available on this node (False only for per-device node selection that doesn't match).
    devices: list[tuple[DeviceEntry, bool]] = field(default_factory=list)
    # A per-device node selector that cannot be parsed, by entry index: the search fails
    # with it when it gets that far (upstream checks the node after the selectors).
    node_errors: dict[int, str] = field(default_factory=dict)
    counter_sets: dict[str, dict[str, int]] = field(default_factory=dict)
    # Devices of the pool's generation in slices that do not target the node: consulted
    # only for the counters allocated devices consume (upstream DeviceSlicesNotTargetingNode).
    other_devices: list[DeviceEntry] = field(default_factory=list)
    binding: bool = False

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.name)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"

    @property
    def usable(self) -> bool:
        return not self.incomplete and self.invalid is None


def device_view(driver: str, device: Device) -> tuple[DeviceView | None, str | None]:
    """The device as CEL selectors see it, or why every selector fails on it."""
    attrs: dict[str, AttributeValue] = {}
    for name, attr in device.attributes.items():
        tagged = _tagged(attr)
        if tagged is None:
            return None, f"attribute {name}: unsupported attribute value"
        kind, values, is_list = tagged
        if kind == "version":
            try:
                parsed = tuple(Semver.parse(str(v)) for v in values)
            except SemverError as exc:
                return None, f"parse semantic version: {exc}"
            attrs[name] = parsed if is_list else parsed[0]
        else:
            attrs[name] = values if is_list else values[0]  # type: ignore[assignment]
    capacity = {name: cap.value for name, cap in device.capacity.items()}
    return DeviceView(driver, attrs, capacity, bool(device.allow_multiple_allocations)), None


def _uses_compatibility_groups(sl: ResourceSlice) -> bool:
    """A slice with a device that consumes counters in compatibility groups (alpha):
    upstream ignores it while DRADeviceCompatibilityGroups is off, as kubedra always does."""
    return any(c.compatibility_groups for d in sl.spec.devices for c in d.consumes_counters)


def rule_matches(rule: DeviceTaintRule, ref: DeviceRef) -> bool:
    sel = rule.spec.device_selector
    if sel is None:  # nil selector: no devices (an empty one selects all)
        return False
    return (
        (sel.driver is None or sel.driver == ref.driver)
        and (sel.pool is None or sel.pool == ref.pool)
        and (sel.device is None or sel.device == ref.device)
    )


class Inventory:
    """All slices of the cluster, indexed; immutable after `build` (caches aside)."""

    def __init__(self, slices: Sequence[ResourceSlice], entries: dict[int, list[DeviceEntry]]):
        self.slices = tuple(slices)
        self._entries = entries  # id(slice) -> entries in device order
        self._on_node: dict[str, list[ResourceSlice]] = {}
        self._shared: list[ResourceSlice] = []
        self._by_pool: dict[PoolKey, list[ResourceSlice]] = {}
        for sl in self.slices:
            spec = sl.spec
            if spec.node_name:
                self._on_node.setdefault(spec.node_name, []).append(sl)
            else:
                self._shared.append(sl)
            self._by_pool.setdefault((spec.driver, spec.pool.name), []).append(sl)
        self._pools: dict[tuple[object, ...], list[Pool]] = {}
        self._compiled: dict[tuple[str, bool], CompiledSelector | CelCompileError] = {}
        self._matches: dict[tuple[str, bool], dict[int, bool | CelEvalError]] = {}
        self._lock = threading.Lock()

    @classmethod
    def build(
        cls,
        slices: Sequence[ResourceSlice],
        taint_rules: Sequence[DeviceTaintRule] = (),
        *,
        features: Features = DEFAULT_FEATURES,
    ) -> Inventory:
        rules = list(taint_rules) if features.device_taint_rules else []
        entries: dict[int, list[DeviceEntry]] = {}
        index = 0
        for sl in slices:
            spec = sl.spec
            out = []
            for device in spec.devices:
                ref = DeviceRef(spec.driver, spec.pool.name, device.name)
                view, error = device_view(spec.driver, device)
                taints = device.taints + tuple(r.spec.taint for r in rules if rule_matches(r, ref))
                consumes = tuple(
                    (c.counter_set, tuple((n, q.value.nanos) for n, q in c.counters.items()))
                    for c in device.consumes_counters
                )
                out.append(
                    DeviceEntry(
                        index=index,
                        ref=ref,
                        device=device,
                        slice=sl,
                        view=view,
                        view_error=error,
                        taints=taints,
                        capacity=device.capacity,
                        policies=any(c.request_policy for c in device.capacity.values()),
                        consumes=consumes,
                        multi=bool(device.allow_multiple_allocations),
                        binding=bool(device.binding_conditions),
                        per_device=bool(spec.per_device_node_selection),
                    )
                )
                index += 1
            entries[id(sl)] = out
        return cls(slices, entries)

    def entries(self) -> Iterator[DeviceEntry]:
        """Every device of every slice, in slice and device order."""
        for sl in self.slices:
            yield from self._entries[id(sl)]

    # --- pools --------------------------------------------------------------------------

    def pools_for(self, node: NodeInfo, features: Features = DEFAULT_FEATURES) -> list[Pool]:
        """Upstream GatherPools for `node`, in search order (cached per node and labels)."""
        key = (node.name, frozenset(node.labels.items()), features.partitionable_devices)
        pools = self._pools.get(key)
        if pools is None:
            pools = self._gather(node, features.partitionable_devices)
            with self._lock:
                if len(self._pools) > 4096:
                    self._pools.clear()
                self._pools[key] = pools
        return pools

    def _relevant(self, sl: ResourceSlice, node: NodeInfo) -> bool | None:
        """Does the slice serve the node? None when it uses no known node selection mode."""
        spec = sl.spec
        if spec.node_name or spec.all_nodes or spec.node_selector is not None:
            try:
                return node_matches(node, spec.node_name, spec.all_nodes, spec.node_selector)
            except NodeSelectorError as exc:
                raise AllocationError(
                    f"failed to perform node selection for slice {sl.name}: {exc}"
                ) from None
        if spec.per_device_node_selection:
            for d in spec.devices:
                try:
                    if node_matches(node, d.node_name, d.all_nodes, d.node_selector):
                        return True
                except NodeSelectorError as exc:
                    raise AllocationError(
                        f"failed to perform node selection for device {d.name} in slice "
                        f"{sl.name}: {exc}"
                    ) from None
            return False
        return None  # a future node selection mode: skipped, as upstream does

    def _gather(self, node: NodeInfo, partitionable: bool) -> list[Pool]:
        """Upstream GatherPools: the newest generation of every pool with a slice for the
        node; a pool is complete when it has all `resourceSliceCount` slices (counting the
        ones for other nodes when those for this node alone fall short)."""
        collected: dict[PoolKey, list[ResourceSlice]] = {}
        for sl in [*self._on_node.get(node.name, ()), *self._shared]:
            spec = sl.spec
            if not partitionable and (
                spec.per_device_node_selection is not None or spec.shared_counters
            ):
                continue
            if _uses_compatibility_groups(sl):
                continue  # DRADeviceCompatibilityGroups is off: the pool is incomplete
            if not self._relevant(sl, node):
                continue
            pkey = (spec.driver, spec.pool.name)
            have = collected.get(pkey)
            gen = spec.pool.generation
            if have is None or gen > have[0].spec.pool.generation:
                collected[pkey] = [sl]  # a newer generation replaces what was collected
            elif gen == have[0].spec.pool.generation:
                have.append(sl)
        pools: list[Pool] = []
        for pkey, targeting in collected.items():
            gen = targeting[0].spec.pool.generation
            wanted = targeting[0].spec.pool.resource_slice_count
            if len(targeting) == wanted:
                pools.append(self._build_pool(pkey, gen, targeting, [], node, partitionable))
                continue
            pool_slices = self._by_pool[pkey]
            if any(s.spec.pool.generation > gen for s in pool_slices):
                continue  # obsolete for this node: a newer generation exists elsewhere
            same = [
                s
                for s in pool_slices
                if s.spec.pool.generation == gen and not _uses_compatibility_groups(s)
            ]
            if len(same) != wanted:
                pools.append(Pool(pkey[0], pkey[1], gen, incomplete=True))
                continue
            pools.append(self._build_pool(pkey, gen, targeting, same, node, partitionable))
        pools.sort(key=lambda p: (p.binding, p.driver, p.name))
        return pools

    def _build_pool(
        self,
        pkey: PoolKey,
        gen: int,
        targeting: list[ResourceSlice],
        whole: list[ResourceSlice],
        node: NodeInfo,
        partitionable: bool,
    ) -> Pool:
        """Upstream buildPool. `whole` is every slice of the generation when the slices for
        the node alone do not make the pool complete, else empty."""
        pool = Pool(pkey[0], pkey[1], gen)
        targeting = sorted(targeting, key=lambda s: s.name)
        names = {id(s) for s in targeting}
        counter_slices = [s for s in targeting if partitionable and s.spec.shared_counters]
        device_slices = [s for s in targeting if not (partitionable and s.spec.shared_counters)]
        other_slices: list[ResourceSlice] = []
        for sl in whole:
            if id(sl) in names:
                continue
            (counter_slices if partitionable and sl.spec.shared_counters else other_slices).append(
                sl
            )
        seen: set[str] = set()
        for sl in device_slices:
            for entry in self._entries[id(sl)]:
                if entry.ref.device in seen:
                    return Pool(*pkey, gen, invalid=f"duplicate device name {entry.ref.device}")
                seen.add(entry.ref.device)
                on_node = True
                if entry.per_device:
                    d = entry.device
                    try:
                        on_node = node_matches(node, d.node_name, d.all_nodes, d.node_selector)
                    except NodeSelectorError as exc:
                        on_node = False
                        pool.node_errors[entry.index] = str(exc)
                pool.devices.append((entry, on_node))
                pool.binding = pool.binding or entry.binding
        if not partitionable:
            return pool
        for sl in counter_slices:
            for cs in sl.spec.shared_counters:
                if cs.name in pool.counter_sets:
                    return Pool(*pkey, gen, invalid=f"duplicate counter set name {cs.name}")
                pool.counter_sets[cs.name] = {n: c.value.nanos for n, c in cs.counters.items()}
        pool.other_devices = [e for sl in other_slices for e in self._entries[id(sl)]]
        for entry in [*(e for e, _ in pool.devices), *pool.other_devices]:
            problem = self._counter_problem(pool, entry)
            if problem is not None:
                return Pool(*pkey, gen, invalid=problem)
        return pool

    @staticmethod
    def _counter_problem(pool: Pool, entry: DeviceEntry) -> str | None:
        for set_name, counters in entry.consumes:
            have = pool.counter_sets.get(set_name)
            if have is None:
                return f"counter set {set_name} not found"
            for counter, _ in counters:
                if counter not in have:
                    return f"counter {counter} not found in counter set {set_name}"
        return None

    # --- CEL ----------------------------------------------------------------------------

    def matches(self, expression: str, entry: DeviceEntry, *, strict: bool) -> bool:
        """Selector result for one device, cached; raises CelCompileError / CelEvalError.

        Compiled as upstream's allocator compiles (a "stored expression"): in the newest
        environment whatever the feature switches, so `device.allowMultipleAllocations`,
        `includes()` and list attributes work; the switches only gate new expressions the
        API server admits.
        """
        key = (expression, strict)
        results = self._matches.get(key)
        if results is None:
            results = self._matches.setdefault(key, {})
        hit = results.get(entry.index)
        if hit is None:
            hit = self._evaluate(key, entry)
            results[entry.index] = hit
        if isinstance(hit, CelEvalError):
            raise hit
        return hit

    def _evaluate(self, key: tuple[str, bool], entry: DeviceEntry) -> bool | CelEvalError:
        compiled = self._compiled.get(key)
        if compiled is None:
            try:
                compiled = compile_selector(
                    key[0],
                    strict=key[1],
                    consumable_capacity=True,
                    list_attributes=True,
                    enforce_cost_limit=False,
                )
            except CelCompileError as exc:
                compiled = exc
            self._compiled[key] = compiled
        if isinstance(compiled, CelCompileError):
            raise compiled
        if entry.view is None:
            return CelEvalError(entry.view_error or "unsupported device")
        try:
            return compiled.evaluate(entry.view)
        except CelEvalError as exc:
            return exc
