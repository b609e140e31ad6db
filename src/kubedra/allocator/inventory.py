"""The device inventory: the cluster's slices, gathered into pools per node when asked.

`Inventory.build` is as cheap as upstream's NewAllocator: it keeps the slices. Everything
else is made when a search first needs it and then kept, for the scheduler calls
`allocate` for many pods and nodes against the same inventory:

- `pools_for(node)` runs upstream's GatherPools for one node (the node's slices found by
  one scan of all slices, then by an index built when a second node is asked), making an
  entry per device of those pools only (taints from DeviceTaintRules applied);
- an entry's CEL view and counter amounts are made when first read;
- selector results are kept per (selector, device), and a selector that reads only some
  of a device (`projection`) is evaluated once per distinct projection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache, partial
from itertools import chain, compress, count, repeat
from operator import attrgetter, is_
from typing import Any

import msgspec

from kubedra.allocator.nodes import NodeSelectorError, node_matches
from kubedra.allocator.projection import Projector, Tagged, projector, reads, tagged
from kubedra.allocator.types import DEFAULT_FEATURES, AllocationError, DeviceRef, Features, NodeInfo
from kubedra.api.core import NodeSelector
from kubedra.api.resource import (
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    DeviceTaintRule,
    ResourceSlice,
)
from kubedra.api.semver import Semver, SemverError
from kubedra.cel import (
    CelCompileError,
    CelEvalError,
    CompiledSelector,
    DeviceView,
    compile_selector,
)

PoolKey = tuple[str, str]  # (driver, pool name)


class DeviceEntry(msgspec.Struct, gc=False, eq=False):
    """One device of one slice, with what the search needs; made when a node's pool is
    first gathered, the costlier parts (CEL view, counter amounts) on first use.

    A Struct (C-made, untracked by the cycle collector; identity equality) because a cold
    allocation makes one per device of the node: the cheapest object there is to make.
    """

    index: int
    # (driver, pool, device) as a plain tuple: equal to the DeviceRef, and what the search
    # looks up in the allocated sets (a DeviceRef costs more to make; `ref` makes it once).
    key: tuple[str, str, str]
    device: Device
    slice: ResourceSlice
    per_device: bool  # slice uses perDeviceNodeSelection
    multi: bool  # allowMultipleAllocations
    # Whether no device of the slice fails the selectors (every attribute a string, int,
    # bool or version that parses), shared by the slice's entries, checked once.
    _plain: _PlainSlice | None = None
    _taints: tuple[DeviceTaint, ...] | None = None  # with DeviceTaintRules' (else the device's)
    _ref: DeviceRef | None = None
    _consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] | None = None
    _policies: bool | None = None
    _view: DeviceView | None = None
    _checked: bool = False  # `_fault` known
    _fault: str | None = None  # why every selector fails on the device

    @property
    def taints(self) -> tuple[DeviceTaint, ...]:
        """The device's taints and those DeviceTaintRules add."""
        taints = self._taints
        return self.device.taints if taints is None else taints

    @property
    def capacity(self) -> dict[str, DeviceCapacity]:
        """Capacity by name as published: upstream matches requests, consumed capacity and
        policies on the literal key (a request for "driver/bw" does not find "bw")."""
        return self.device.capacity

    @property
    def binding(self) -> bool:
        """The device has binding conditions."""
        return bool(self.device.binding_conditions)

    @property
    def ref(self) -> DeviceRef:
        """Identity of the device (upstream DeviceID)."""
        ref = self._ref
        if ref is None:
            ref = self._ref = _ref(DeviceRef, self.key)
        return ref

    @property
    def consumes(self) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
        """consumesCounters as (counter set, [(counter, nanos)])."""
        consumes = self._consumes
        if consumes is None:
            consumes = self._consumes = tuple(
                (c.counter_set, tuple((n, q.value.nanos) for n, q in c.counters.items()))
                for c in self.device.consumes_counters
            )
        return consumes

    @property
    def policies(self) -> bool:
        """Some capacity has a request policy."""
        policies = self._policies
        if policies is None:
            policies = self._policies = any(
                c.request_policy is not None for c in self.capacity.values()
            )
        return policies

    @property
    def view(self) -> DeviceView:
        """The device as CEL selectors see it (lazy: converts what a selector reads; a
        device that fails every selector says so when a selector runs)."""
        view = self._view
        if view is None:
            view = self._view = DeviceView.of(self.key[0], self.device)
        return view

    def fault(self) -> str | None:
        """Why every selector fails on this device (checked once), or None."""
        if not self._checked:
            plain = self._plain
            if plain is not None and plain.check():
                self._fault = None
            else:
                self._fault = device_fault(self.device)
            self._checked = True
        return self._fault

    def attribute(self, name: str) -> Tagged | bool | None:
        """Constraint lookup: `domain/id` literally, else the bare id in the driver's domain.

        Returns False when the device lacks the attribute, None for an unusable value.
        """
        attrs = self.device.attributes
        attr = attrs.get(name)
        if attr is None:
            domain, _, ident = name.partition("/")
            if domain != self.key[0] or (attr := attrs.get(ident)) is None:
                return False
        return tagged(attr)

    @property
    def node_local(self) -> bool:
        return bool(self.slice.spec.node_name or self.device.node_name)

    @property
    def node_selector(self) -> NodeSelector | None:
        if self.per_device:
            return self.device.node_selector
        return self.slice.spec.node_selector

    def __repr__(self) -> str:
        return f"DeviceEntry({self.index}, {self.ref})"


class Pool(msgspec.Struct, eq=False):
    """A resource pool as seen from one node (upstream Pool)."""

    driver: str
    name: str
    generation: int
    incomplete: bool = False
    invalid: str | None = None
    # Devices of the slices targeting the node, in search order, with whether each one is
    # available on this node (False only for per-device node selection that doesn't match).
    devices: list[tuple[DeviceEntry, bool]] = []
    # A per-device node selector that cannot be parsed, by entry index: the search fails
    # with it when it gets that far (upstream checks the node after the selectors).
    node_errors: dict[int, str] = {}
    counter_sets: dict[str, dict[str, int]] = {}
    # Devices of the pool's generation in slices that do not target the node: consulted
    # only for the counters allocated devices consume (upstream DeviceSlicesNotTargetingNode).
    other_devices: list[DeviceEntry] = []
    binding: bool = False

    def __repr__(self) -> str:
        state = "incomplete" if self.incomplete else f"invalid: {self.invalid}" * bool(self.invalid)
        return f"Pool({self.id}, generation {self.generation}, {len(self.devices)} devices {state})"

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.name)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"

    @property
    def usable(self) -> bool:
        return not self.incomplete and self.invalid is None


class _PlainSlice(msgspec.Struct, gc=False):
    """Is every attribute of a slice's devices a string, int, bool or a version that
    parses (then no device of the slice fails the selectors)? Checked over the whole slice
    in C-level passes (each distinct version text parsed once), the first time a selector
    meets one of its devices."""

    devices: tuple[Device, ...]
    plain: bool | None = None

    def check(self) -> bool:
        plain = self.plain
        if plain is None:
            values = list(chain.from_iterable(map(_attribute_values, self.devices)))
            others = list(map(_NO_SCALAR.__eq__, _scalars(values)))
            if not any(others):
                plain = True
            else:
                versions = set(map(_version, compress(values, others)))
                plain = None not in versions and all(map(_parses, versions))
            self.plain = plain
        return plain


class _SliceInfo(msgspec.Struct, gc=False):
    """What gathering pools needs of one slice, worked out once."""

    names_list: tuple[str, ...]  # device names, in order
    names: set[str]
    duplicates: bool  # a device name twice in the slice
    multi: tuple[bool | None, ...] | None  # allowMultipleAllocations, None if none has it
    groups: bool  # a device consumes counters in compatibility groups
    consumes: bool  # a device consumes counters
    binding: bool  # a device has binding conditions
    entries: list[DeviceEntry] | None = None


class Gathered:
    """A node's pools (upstream GatherPools), with the pools by key and the devices of the
    usable ones in search order."""

    __slots__ = ("by_key", "devices", "pools")

    def __init__(self, pools: list[Pool]) -> None:
        self.pools = pools
        self.by_key: dict[PoolKey, Pool] = {p.key: p for p in pools}
        self.devices: list[tuple[DeviceEntry, bool]] = (
            list(pools[0].devices)
            if len(pools) == 1 and pools[0].usable
            else list(chain.from_iterable([p.devices for p in pools if p.usable]))
        )


@lru_cache(maxsize=4096)
def _semver(text: str) -> Semver:
    """A version attribute, parsed once per distinct text (a Semver is immutable)."""
    return Semver.parse(text)


def _uses_compatibility_groups(sl: ResourceSlice) -> bool:
    """A slice with a device that consumes counters in compatibility groups (alpha):
    upstream ignores it while DRADeviceCompatibilityGroups is off, as kubedra always does."""
    return any(c.compatibility_groups for d in sl.spec.devices for c in d.consumes_counters)


_consumes_counters = attrgetter("consumes_counters")
_binding_conditions = attrgetter("binding_conditions")
_device_name = attrgetter("name")
_slice_fields = attrgetter(
    "name", "allow_multiple_allocations", "consumes_counters", "binding_conditions"
)


def _attribute_values(device: Device) -> Iterable[DeviceAttribute]:
    return device.attributes.values()


_allows_multiple = attrgetter("allow_multiple_allocations")
_is_true = partial(is_, True)

# A DeviceRef from a (driver, pool, device) tuple, without NamedTuple's Python-level __new__.
_ref = tuple.__new__


def _pool_order(pool: Pool) -> tuple[bool, str, str]:
    return (pool.binding, pool.driver, pool.name)


def _slice_name(sl: ResourceSlice) -> str:
    return sl.name


def _counter_problem(have: dict[str, int] | None, consumption: DeviceCounterConsumption) -> str:
    """Why a device's consumption does not fit its pool's counter sets."""
    set_name = consumption.counter_set
    if have is None:
        return f"counter set {set_name} not found"
    missing = next(c for c in consumption.counters if c not in have)
    return f"counter {missing} not found in counter set {set_name}"


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
    """All slices of the cluster; immutable after `build` (caches aside).

    Building is cheap, as upstream's NewAllocator is: it keeps the slices and nothing more.
    What a node needs is made when the node is first asked about (`pools_for`): its slices
    found (by a scan of all slices the first time, by an index built on the second node),
    their devices turned into entries, and each entry's CEL view and counter amounts when
    the search first reads them.
    """

    def __init__(
        self, slices: Sequence[ResourceSlice], taint_rules: Sequence[DeviceTaintRule] = ()
    ) -> None:
        self.slices = tuple(slices)
        self._rules = tuple(taint_rules)
        self._slices_info: dict[int, _SliceInfo] = {}  # by id(slice)
        self._slice_numbers = count()  # for entry numbers, in the order entries are made
        self._on_node: dict[str, list[ResourceSlice]] | None = None
        self._shared: list[ResourceSlice] | None = None
        self._by_pool: dict[PoolKey, list[ResourceSlice]] | None = None
        self._pools: dict[tuple[object, ...], Gathered] = {}
        self._selectors: dict[tuple[str, bool], Selector] = {}
        # Claims prepared for a search, by claim and class objects (see Search.prepare).
        self._prepared: dict[tuple[object, ...], Any] = {}
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
        return cls(slices, taint_rules if features.device_taint_rules else ())

    def entries(self) -> Iterator[DeviceEntry]:
        """Every device of every slice, in slice and device order."""
        for sl in self.slices:
            yield from self.slice_entries(sl)

    def slice_entries(self, sl: ResourceSlice) -> list[DeviceEntry]:
        """The entries of one slice's devices (made once; a racing thread's copy is
        dropped, so every caller sees the same entries)."""
        info = self._info(sl)
        entries = info.entries
        if entries is None:
            made = self._make_entries(sl, info)
            with self._lock:
                entries = info.entries
                if entries is None:
                    entries = info.entries = made
        return entries

    def _info(self, sl: ResourceSlice) -> _SliceInfo:
        info = self._slices_info.get(id(sl))
        if info is None:
            devices = sl.spec.devices
            # One pass over the devices for the four fields, then columns.
            names, multis, consumes, bindings = (
                zip(*map(_slice_fields, devices), strict=True) if devices else ((), (), (), ())
            )
            unique = set(names)
            uses = any(consumes)
            info = _SliceInfo(
                names,
                unique,
                len(unique) != len(devices),
                multis if any(multis) else None,
                uses and any(c.compatibility_groups for cs in consumes for c in cs),
                uses,
                any(bindings),
            )
            info = self._slices_info.setdefault(id(sl), info)
        return info

    def _make_entries(self, sl: ResourceSlice, info: _SliceInfo) -> list[DeviceEntry]:
        spec = sl.spec
        driver, pool = spec.driver, spec.pool.name
        per_device = bool(spec.per_device_node_selection)
        # Entry numbers: unique per inventory (a slice holds far fewer than 2**32 devices).
        base = next(self._slice_numbers) << 32
        devices = spec.devices
        names, multi = info.names_list, info.multi
        if not self._rules:
            # Made by C-level iteration alone: this runs for every device a node has.
            return list(
                map(
                    DeviceEntry,
                    range(base, base + len(devices)),
                    zip(repeat(driver), repeat(pool), names),
                    devices,
                    repeat(sl),
                    repeat(per_device),
                    map(_is_true, multi) if multi is not None else repeat(False),
                    repeat(_PlainSlice(devices)),
                )
            )
        out = []
        for i, d in enumerate(devices):
            ref = DeviceRef(driver, pool, d.name)
            taints = d.taints + tuple(r.spec.taint for r in self._rules if rule_matches(r, ref))
            multiple = d.allow_multiple_allocations is True
            out.append(DeviceEntry(base + i, ref, d, sl, per_device, multiple, None, taints, ref))
        return out

    def _node_slices(self, node: str) -> tuple[list[ResourceSlice], list[ResourceSlice]]:
        """The slices published for `node` by name, and those without a node name."""
        on_node, shared = self._on_node, self._shared
        if on_node is None or shared is None:
            if shared is None:
                # The first node: one pass that keeps its slices and the shared ones, no
                # index (a single Allocate on a large cluster needs nothing more).
                mine, others = [], []
                for sl in self.slices:
                    name = sl.spec.node_name
                    if not name:
                        others.append(sl)
                    elif name == node:
                        mine.append(sl)
                self._shared = others
                return mine, others
            on_node = {}
            for sl in self.slices:
                name = sl.spec.node_name
                if name:
                    group = on_node.get(name)
                    if group is None:
                        on_node[name] = [sl]
                    else:
                        group.append(sl)
            self._on_node = on_node
        return on_node.get(node, []), shared

    def _pool_slices(self, pkey: PoolKey) -> list[ResourceSlice]:
        by_pool = self._by_pool
        if by_pool is None:
            by_pool = {}
            for sl in self.slices:
                spec = sl.spec
                by_pool.setdefault((spec.driver, spec.pool.name), []).append(sl)
            self._by_pool = by_pool
        return by_pool.get(pkey, [])

    # --- pools --------------------------------------------------------------------------

    def pools_for(self, node: NodeInfo, features: Features = DEFAULT_FEATURES) -> list[Pool]:
        """Upstream GatherPools for `node`, in search order (cached per node and labels)."""
        return self.gathered(node, features).pools

    def gathered(self, node: NodeInfo, features: Features = DEFAULT_FEATURES) -> Gathered:
        """`pools_for` with what every search on the node derives from the pools."""
        part = features.partitionable_devices
        # A node's labels matter only to slices without a node name (node selectors,
        # per-device selection): without any, the node's name says it all.
        labels = self._shared is None or bool(self._shared)
        key = (node.name, frozenset(node.labels.items()), part) if labels else (node.name, part)
        found = self._pools.get(key)
        if found is None:
            found = Gathered(self._gather(node, part))
            if labels and self._shared is not None and not self._shared:
                key = (node.name, part)
            with self._lock:
                if len(self._pools) > 4096:
                    self._pools.clear()
                self._pools[key] = found
        return found

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
        mine, shared = self._node_slices(node.name)
        for sl in [*mine, *shared] if shared else mine:
            spec = sl.spec
            if not partitionable and (
                spec.per_device_node_selection is not None or spec.shared_counters
            ):
                continue
            if self._info(sl).groups:
                continue  # DRADeviceCompatibilityGroups is off: the pool is incomplete
            # A slice published for the node by name serves it; the others are asked.
            if spec.node_name != node.name and not self._relevant(sl, node):
                continue
            pool = spec.pool
            pkey = (spec.driver, pool.name)
            have = collected.get(pkey)
            if have is None:
                collected[pkey] = [sl]
                continue
            gen, known = pool.generation, have[0].spec.pool.generation
            if gen > known:
                collected[pkey] = [sl]  # a newer generation replaces what was collected
            elif gen == known:
                have.append(sl)
        pools: list[Pool] = []
        for pkey, targeting in collected.items():
            first = targeting[0].spec.pool
            gen, wanted = first.generation, first.resource_slice_count
            if len(targeting) == wanted:
                pools.append(self._build_pool(pkey, gen, targeting, [], node, partitionable))
                continue
            pool_slices = self._pool_slices(pkey)
            if any(s.spec.pool.generation > gen for s in pool_slices):
                continue  # obsolete for this node: a newer generation exists elsewhere
            same = [
                s for s in pool_slices if s.spec.pool.generation == gen and not self._info(s).groups
            ]
            if len(same) != wanted:
                pools.append(Pool(pkey[0], pkey[1], gen, incomplete=True))
                continue
            pools.append(self._build_pool(pkey, gen, targeting, same, node, partitionable))
        if len(pools) > 1:
            pools.sort(key=_pool_order)
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
        if len(targeting) == 1 and not whole:
            # The common case, quickly: one slice of devices for the node, nothing to check.
            sl = targeting[0]
            spec = sl.spec
            info = self._info(sl)
            if not (
                info.duplicates
                or spec.per_device_node_selection
                or (partitionable and (spec.shared_counters or info.consumes))
            ):
                entries = info.entries or self.slice_entries(sl)
                return Pool(
                    pkey[0],
                    pkey[1],
                    gen,
                    devices=list(zip(entries, repeat(True))),
                    binding=info.binding,
                )
        pool = Pool(pkey[0], pkey[1], gen)
        if len(targeting) > 1:
            targeting = sorted(targeting, key=_slice_name)
        counter_slices: list[ResourceSlice] = []
        device_slices: list[ResourceSlice] = []
        for sl in targeting:
            (counter_slices if partitionable and sl.spec.shared_counters else device_slices).append(
                sl
            )
        other_slices: list[ResourceSlice] = []
        if whole:
            names = {id(s) for s in targeting}
            for sl in whole:
                if id(sl) in names:
                    continue
                (
                    counter_slices if partitionable and sl.spec.shared_counters else other_slices
                ).append(sl)
        seen: set[str] = set()
        devices = pool.devices
        consumes = False
        for sl in device_slices:
            entries = self.slice_entries(sl)
            info = self._info(sl)
            here = info.names
            if info.duplicates or (seen and not seen.isdisjoint(here)):
                for entry in entries:  # find the first duplicate, as upstream reports it
                    name = entry.device.name
                    if name in seen:
                        return Pool(*pkey, gen, invalid=f"duplicate device name {name}")
                    seen.add(name)
            seen |= here
            if not sl.spec.per_device_node_selection:
                devices.extend(zip(entries, repeat(True)))
            else:
                for entry in entries:
                    d = entry.device
                    try:
                        on_node = node_matches(node, d.node_name, d.all_nodes, d.node_selector)
                    except NodeSelectorError as exc:
                        on_node = False
                        pool.node_errors[entry.index] = str(exc)
                    devices.append((entry, on_node))
            consumes = consumes or info.consumes
            pool.binding = pool.binding or info.binding
        if not partitionable:
            return pool
        sets = pool.counter_sets
        for sl in counter_slices:
            for cs in sl.spec.shared_counters:
                if cs.name in sets:
                    return Pool(*pkey, gen, invalid=f"duplicate counter set name {cs.name}")
                sets[cs.name] = {n: c.value.nanos for n, c in cs.counters.items()}
        for sl in other_slices:
            pool.other_devices.extend(self.slice_entries(sl))
            consumes = consumes or self._info(sl).consumes
        if consumes:
            for entry in [*(e for e, _ in devices), *pool.other_devices]:
                for consumption in entry.device.consumes_counters:
                    have = sets.get(consumption.counter_set)
                    if have is None or not have.keys() >= consumption.counters.keys():
                        return Pool(*pkey, gen, invalid=_counter_problem(have, consumption))
        return pool

    # --- CEL ----------------------------------------------------------------------------

    def matches(self, expression: str, entry: DeviceEntry, *, strict: bool) -> bool:
        """Selector result for one device, cached; raises CelCompileError / CelEvalError.

        Compiled as upstream's allocator compiles (a "stored expression"): in the newest
        environment whatever the feature switches, so `device.allowMultipleAllocations`,
        `includes()` and list attributes work; the switches only gate new expressions the
        API server admits.
        """
        selector = self.selector(expression, strict)
        hit = selector.results.get(entry.index)
        if hit is None:
            hit = selector.evaluate(entry)
        if isinstance(hit, CelEvalError):
            raise hit
        return hit

    def selector(self, expression: str, strict: bool) -> Selector:
        """One selector's state in this inventory: its results so far, by entry index."""
        found = self._selectors.get((expression, strict))
        if found is None:
            found = self._selectors.setdefault((expression, strict), Selector(expression, strict))
        return found


class Selector:
    """A CEL selector as the allocator evaluates it against an inventory's devices.

    Compiled on first use (a compile error is raised at the first device, as upstream
    reports it), results cached by entry index; a selector that reads only parts of a device
    (see `projection`) is evaluated once per distinct projection, devices alike in what it
    reads sharing the result.
    """

    __slots__ = ("_compiled", "_project", "_shared", "expression", "results", "strict")

    def __init__(self, expression: str, strict: bool) -> None:
        self.expression = expression
        self.strict = strict
        self.results: dict[int, bool | CelEvalError] = {}
        self._compiled: CompiledSelector | CelCompileError | None = None
        self._project: Projector | None = None
        self._shared: dict[tuple[object, ...], bool] = {}

    def evaluate(self, entry: DeviceEntry) -> bool | CelEvalError:
        """The selector's result on one device (an evaluation error is a result), cached;
        raises CelCompileError."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compile()
        if isinstance(compiled, CelCompileError):
            raise compiled
        project = self._project
        result: bool | CelEvalError
        if project is None:
            result = _run(compiled, entry)
        else:
            key = project(entry.key[0], entry.multi, entry.device)
            hit = self._shared.get(key)
            if hit is None:
                # Evaluated for real: a device that fails every selector fails here too.
                result = _run(compiled, entry)
                if result is True or result is False:
                    self._shared[key] = result  # an error stays with its device
                    entry._fault, entry._checked = None, True
            else:
                # Alike in what the selector reads; its own faults are still its own.
                fault = entry._fault if entry._checked else entry.fault()
                result = hit if fault is None else CelEvalError(fault)
        self.results[entry.index] = result
        return result

    def _compile(self) -> CompiledSelector | CelCompileError:
        compiled: CompiledSelector | CelCompileError
        try:
            compiled = compile_selector(
                self.expression,
                strict=self.strict,
                consumable_capacity=True,
                list_attributes=True,
                enforce_cost_limit=False,
            )
        except CelCompileError as exc:
            compiled = exc
        plan = reads(self.expression)
        self._project = projector(plan) if plan is not None else None
        self._compiled = compiled
        return compiled


def _run(compiled: CompiledSelector, entry: DeviceEntry) -> bool | CelEvalError:
    try:
        return compiled.evaluate(entry.view)
    except CelEvalError as exc:
        return exc


def device_fault(device: Device) -> str | None:
    """Why every selector fails on a device (upstream converts all attributes before it
    runs a selector): an attribute without a usable value, a version that does not parse;
    the first in published order. None when there is none."""
    attributes = device.attributes
    values = attributes.values()
    if _NO_SCALAR not in _scalars(values):
        return None  # every attribute a string, int or bool: the common case, in C
    others = map(_NO_SCALAR.__eq__, _scalars(values))
    for name, attr in compress(attributes.items(), others):
        value = tagged(attr)
        if value is None:
            return f"attribute {name}: unsupported attribute value"
        if value[0] == "version":
            try:
                for text in value[1]:
                    _semver(str(text))
            except SemverError as exc:
                return f"parse semantic version: {exc}"
    return None


def _scalars(values: Iterable[DeviceAttribute]) -> Iterator[tuple[object, object, object]]:
    """(string, int, bool) of each attribute, lazily, in C."""
    values = list(values)
    return zip(map(_string, values), map(_int, values), map(_bool, values), strict=True)


def _parses(text: str) -> bool:
    try:
        _semver(text)
    except SemverError:
        return False
    return True


_version = attrgetter("version")
_NO_SCALAR = (None, None, None)
_string = attrgetter("string")
_int = attrgetter("int_")
_bool = attrgetter("bool_")
