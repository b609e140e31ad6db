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

A scheduler builds a new inventory each time a slice changes, so what is worked out of a
slice (its entries, its pool, the selector results on its devices) is kept for the
process by the slice object's identity (`SliceCache`, `SLICES`): the next inventory
reuses it for every slice that is the same object, and works out only the changed ones.
Claims prepared for a search are kept for the process too (`PREPARED`).
`clear_slice_cache()` forgets all of it (a truly cold start; compiled CEL programs stay).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache, partial
from itertools import chain, count, repeat
from operator import is_
from typing import Any

import msgspec

from kubedra.allocator.nodes import NodeSelectorError, node_matches
from kubedra.allocator.projection import (
    Projector,
    Tagged,
    pinned_driver,
    projector,
    reads,
    tagged,
)
from kubedra.allocator.types import DEFAULT_FEATURES, AllocationError, DeviceRef, Features, NodeInfo
from kubedra.api.core import NodeSelector
from kubedra.api.resource import (
    Device,
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
            if plain is not None and plain.known_plain():
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


_ONE_BY_ONE = 1  # devices of a slice checked alone before the whole slice is


class _PlainSlice(msgspec.Struct, gc=False):
    """Is every attribute of a slice's devices a string, int, bool or a version that
    parses (then no device of the slice fails the selectors)? Checked over the whole slice
    in one pass (each distinct version text parsed once), the first time a selector
    meets one of its devices."""

    devices: tuple[Device, ...]
    plain: bool | None = None
    asked: int = 0  # devices checked one by one so far

    def known_plain(self) -> bool:
        """Whether the slice is plain, checked whole once a few of its devices were asked
        about (False until then: the caller checks its device alone, which costs less
        when a search reads one or two devices of a large slice)."""
        plain = self.plain
        if plain is None:
            self.asked = asked = self.asked + 1
            return asked > _ONE_BY_ONE and self.check()
        return plain

    def check(self) -> bool:
        plain = self.plain
        if plain is None:
            # Attribute reads in a comprehension (specialized by the interpreter) beat
            # attrgetter maps; most attributes stop at their first field.
            others = [
                a
                for d in self.devices
                for a in d.attributes.values()
                if a.string is None and a.int_ is None and a.bool_ is None
            ]
            plain = all(map(_parses, {a.version for a in others}))  # each text once
            self.plain = plain
        return plain


class _SliceInfo(msgspec.Struct, gc=False):
    """What gathering pools needs of one slice, worked out once, with the slice's entries
    and pool once made."""

    slice: ResourceSlice  # the object this was made from (kept: identity is the key)
    names_list: tuple[str, ...]  # device names, in order
    duplicates: bool  # a device name twice in the slice
    multi: tuple[bool | None, ...] | None  # allowMultipleAllocations, None if none has it
    groups: bool  # a device consumes counters in compatibility groups
    consumes: bool  # a device consumes counters
    binding: bool  # a device has binding conditions
    entries: list[DeviceEntry] | None = None
    _names: set[str] | None = None
    # The slice's pool when it is the whole pool and needs no check (`_build_pool`'s
    # quick case), by the partitionable-devices switch: the same for every node.
    pools: dict[bool, Pool] = {}

    @property
    def names(self) -> set[str]:
        """The device names, as a set (made when a pool has more than one slice)."""
        names = self._names
        if names is None:
            names = self._names = set(self.names_list)
        return names


def _slice_info(sl: ResourceSlice) -> _SliceInfo:
    """What gathering needs of a slice's devices (the common case, none with multiple
    allocations, counters or binding conditions, in two passes)."""
    devices = sl.spec.devices
    # Column by column: attribute reads in comprehensions are the cheapest there are.
    names = tuple([d.name for d in devices])
    duplicates = len(set(names)) != len(names)
    if not [
        d
        for d in devices
        if d.allow_multiple_allocations is not None or d.consumes_counters or d.binding_conditions
    ]:
        return _SliceInfo(sl, names, duplicates, None, False, False, False)  # the common case
    multis = [d.allow_multiple_allocations for d in devices]
    consumes = [d.consumes_counters for d in devices]
    uses = any(consumes)
    return _SliceInfo(
        sl,
        names,
        duplicates,
        tuple(multis) if any(multis) else None,
        uses and any(c.compatibility_groups for cs in consumes for c in cs),
        uses,
        any([d.binding_conditions for d in devices]),
    )


class SliceCache:
    """Slices worked out once (their `_SliceInfo`: columns, device entries, pool), kept
    across `Inventory.build` calls by the slice object's identity.

    A scheduler builds a new inventory whenever any slice changes; the slices that did not
    change are the same objects (API objects are frozen: an update is a new object), so
    their entries carry over, and with them the selector results kept by entry number (see
    `Selector`); only the changed slices are worked out again. An info holds its slice, so
    an id is never reused while it is cached; a slice that is not the cached object under
    its id is a miss.

    Only inventories without DeviceTaintRules use it (a rule changes the entries' taints).
    Bounded: a slice added drops the one cached under its name (the version it replaces);
    past `max(limit, 2 x the slices of the inventory adding one)` entries, those of slices
    that inventory does not hold are dropped (amortized: at least as many adds happen
    between two sweeps as the sweep keeps). An inventory keeps the infos it used, so what
    the cache drops stays the same for it.
    """

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._by_id: dict[int, _SliceInfo] = {}
        self._by_name: dict[str, int] = {}  # the id cached under each slice name
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, sl: ResourceSlice) -> _SliceInfo | None:
        info = self._by_id.get(id(sl))
        return info if info is not None and info.slice is sl else None

    def add(self, info: _SliceInfo, current: Sequence[ResourceSlice]) -> _SliceInfo:
        """Keep `info` (unless another thread was first: its info is returned then);
        `current` is the adding inventory's slices, kept when the cache is swept."""
        sl = info.slice
        key = id(sl)
        with self.lock:
            by_id = self._by_id
            found = by_id.get(key)
            if found is not None and found.slice is sl:
                return found
            name = sl.metadata.name
            older = self._by_name.get(name) if name else None
            if older is not None:
                by_id.pop(older, None)  # the version this one replaces
            if len(by_id) >= max(self.limit, 2 * len(current)):
                live = {id(s) for s in current}
                self._by_id = by_id = {k: v for k, v in by_id.items() if k in live}
                self._by_name = {n: k for n, k in self._by_name.items() if k in by_id}
            by_id[key] = info
            if name:
                self._by_name[name] = key
        return info

    def clear(self) -> None:
        """Forget every slice (the next inventories start truly cold)."""
        with self.lock:
            self._by_id = {}
            self._by_name = {}


# The process's cache (see SliceCache); `clear_slice_cache()` empties it.
SLICES = SliceCache()
# Entry numbers: unique in the process (entries outlive inventories, and selector results
# are kept by entry number), a slice's block of 2**32 numbers at a time (a slice holds far
# fewer devices).
_slice_numbers = count()
# Claims prepared for a search, by claim and class objects (see Search.prepare): they
# depend on neither the node nor the inventory, as selectors are the process's.
PREPARED: dict[tuple[object, ...], Any] = {}


def clear_slice_cache() -> None:
    """Forget everything kept across inventories but the compiled CEL programs (the slices
    worked out, selector results, prepared claims): the next inventory starts truly cold."""
    global _stored
    SLICES.clear()
    with _SELECTORS_LOCK:
        _SELECTORS.clear()
    PREPARED.clear()
    _stored = 0


class Gathered:
    """A node's pools (upstream GatherPools), with what searches on the node derive from
    them when first asked: the pools by key, the devices of the usable ones in search
    order, and those a pinned driver's selector can admit."""

    __slots__ = ("_by_driver", "_by_key", "_devices", "pools")

    def __init__(self, pools: list[Pool]) -> None:
        self.pools = pools
        self._by_key: dict[PoolKey, Pool] | None = None
        self._devices: list[tuple[DeviceEntry, bool]] | None = None
        self._by_driver: dict[str, list[tuple[DeviceEntry, bool]]] = {}

    @property
    def by_key(self) -> dict[PoolKey, Pool]:
        by_key = self._by_key
        if by_key is None:
            by_key = self._by_key = {p.key: p for p in self.pools}
        return by_key

    @property
    def devices(self) -> list[tuple[DeviceEntry, bool]]:
        devices = self._devices
        if devices is None:
            pools = self.pools
            devices = self._devices = (
                list(pools[0].devices)
                if len(pools) == 1 and pools[0].usable
                else list(chain.from_iterable([p.devices for p in pools if p.usable]))
            )
        return devices

    def for_driver(self, driver: str) -> list[tuple[DeviceEntry, bool]]:
        """The devices a selector pinned to `driver` (`pinned_driver`) can admit, in search
        order (made once per node): the driver's own; before the last of them, any other
        that fails every selector, so that its error still ends the search where upstream's
        ends; after it, every device, as a search reaches them only when the driver's own
        did not do (the selector is then evaluated on them, as before)."""
        found = self._by_driver.get(driver)
        if found is None:
            usable = [p for p in self.pools if p.usable]
            last = max((i for i, p in enumerate(usable) if p.driver == driver), default=-1)
            found = []
            for pool in usable[: last + 1]:
                if pool.driver == driver:
                    found += pool.devices
                elif not _all_convert(pool.devices):
                    found += [item for item in pool.devices if item[0].fault()]
            for pool in usable[last + 1 :]:
                found += pool.devices
            self._by_driver[driver] = found
        return found


def _all_convert(devices: list[tuple[DeviceEntry, bool]]) -> bool:
    """No device fails every selector: each slice checked whole, once (a slice's entries
    are contiguous and share its check; entries with taint rules have none)."""
    seen = None
    for entry, _ in devices:
        plain = entry._plain
        if plain is not seen:
            if plain is None or not plain.check():
                return False
            seen = plain
    return True


@lru_cache(maxsize=4096)
def _semver(text: str) -> Semver:
    """A version attribute, parsed once per distinct text (a Semver is immutable)."""
    return Semver.parse(text)


def _uses_compatibility_groups(sl: ResourceSlice) -> bool:
    """A slice with a device that consumes counters in compatibility groups (alpha):
    upstream ignores it while DRADeviceCompatibilityGroups is off, as kubedra always does."""
    return any(c.compatibility_groups for d in sl.spec.devices for c in d.consumes_counters)


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
        # By id(slice): those this inventory used (from the process's SLICES, unless the
        # inventory has taint rules).
        self._slices_info: dict[int, _SliceInfo] = {}
        self._on_node: dict[str, list[ResourceSlice]] | None = None
        self._shared: list[ResourceSlice] | None = None
        self._by_pool: dict[PoolKey, list[ResourceSlice]] | None = None
        self._pools: dict[tuple[object, ...], Gathered] = {}
        # Claims prepared for a search (see Search.prepare): the process's PREPARED.
        self._prepared = PREPARED
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
            entries = self._entries(sl, info)
        return entries

    def _entries(self, sl: ResourceSlice, info: _SliceInfo) -> list[DeviceEntry]:
        made = self._make_entries(sl, info)
        with SLICES.lock if not self._rules else self._lock:
            entries = info.entries
            if entries is None:
                entries = info.entries = made
        return entries

    def _info(self, sl: ResourceSlice) -> _SliceInfo:
        info = self._slices_info.get(id(sl))
        if info is None:
            if self._rules:
                info = _slice_info(sl)  # its entries get this inventory's taints
            else:
                info = SLICES.get(sl)
                if info is None:
                    info = SLICES.add(_slice_info(sl), self.slices)
            # Kept here too: the inventory's entries stay the same whatever SLICES drops.
            info = self._slices_info.setdefault(id(sl), info)
        return info

    def _make_entries(self, sl: ResourceSlice, info: _SliceInfo) -> list[DeviceEntry]:
        spec = sl.spec
        driver, pool = spec.driver, spec.pool.name
        per_device = bool(spec.per_device_node_selection)
        base = next(_slice_numbers) << 32
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
        shared = self._shared
        if shared is None:
            found = None  # the first node: nothing gathered yet (its scan finds `shared`)
        else:
            key = (node.name, frozenset(node.labels.items()), part) if shared else (node.name, part)
            found = self._pools.get(key)
        if found is None:
            found = Gathered(self._gather(node, part))
            if self._shared:
                key = (node.name, frozenset(node.labels.items()), part)
            else:
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
        firsts: dict[PoolKey, _SliceInfo] = {}  # the info of each pool's first slice
        mine, shared = self._node_slices(node.name)
        for sl in [*mine, *shared] if shared else mine:
            spec = sl.spec
            if not partitionable and (
                spec.per_device_node_selection is not None or spec.shared_counters
            ):
                continue
            info = self._info(sl)
            if info.groups:
                continue  # DRADeviceCompatibilityGroups is off: the pool is incomplete
            # A slice published for the node by name serves it; the others are asked.
            if spec.node_name != node.name and not self._relevant(sl, node):
                continue
            pool = spec.pool
            pkey = (spec.driver, pool.name)
            have = collected.get(pkey)
            if have is None:
                collected[pkey] = [sl]
                firsts[pkey] = info
                continue
            gen, known = pool.generation, have[0].spec.pool.generation
            if gen > known:
                collected[pkey] = [sl]  # a newer generation replaces what was collected
                firsts[pkey] = info
            elif gen == known:
                have.append(sl)
        pools: list[Pool] = []
        for pkey, targeting in collected.items():
            first = targeting[0].spec.pool
            gen, wanted = first.generation, first.resource_slice_count
            if len(targeting) == wanted:
                pools.append(
                    self._build_pool(pkey, gen, targeting, [], node, partitionable, firsts[pkey])
                )
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
        first: _SliceInfo | None = None,
    ) -> Pool:
        """Upstream buildPool. `whole` is every slice of the generation when the slices for
        the node alone do not make the pool complete, else empty; `first`, the info of
        `targeting[0]` when the caller has it."""
        if len(targeting) == 1 and not whole:
            # The common case, quickly: one slice of devices for the node, nothing to check.
            sl = targeting[0]
            spec = sl.spec
            info = first if first is not None else self._info(sl)
            if not (
                info.duplicates
                or spec.per_device_node_selection
                or (partitionable and (spec.shared_counters or info.consumes))
            ):
                # Made of the slice alone: kept with it for every node and inventory.
                pool = info.pools.get(partitionable)
                if pool is None:
                    entries = info.entries or self._entries(sl, info)
                    pool = Pool(
                        pkey[0],
                        pkey[1],
                        gen,
                        devices=list(zip(entries, repeat(True))),
                        binding=info.binding,
                    )
                    pool = info.pools.setdefault(partitionable, pool)
                return pool
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
        """One selector's state: its results so far, by entry number (the process's, as
        entry numbers are unique in it)."""
        found = _SELECTORS.get((expression, strict))
        if found is None:
            found = _selector(expression, strict)
        return found


_SELECTORS: dict[tuple[str, bool], Selector] = {}
_SELECTORS_LOCK = threading.Lock()
# Results all selectors keep, and distinct projections one remembers, before they start
# over (entries of slices no longer cached leave results nobody asks for again).
_MAX_RESULTS = 1 << 20  # ~50 MB at most: a dict item per result (the int key is the entry's own)
_MAX_SHARED = 1 << 14
_stored = 0  # results stored since the last start over (about: threads may race on it)


def _forget_results() -> None:
    """Every selector starts its results over (compiled programs and projections stay)."""
    global _stored
    _stored = 0
    with _SELECTORS_LOCK:
        selectors = list(_SELECTORS.values())
    for selector in selectors:
        selector.results.clear()


def _selector(expression: str, strict: bool) -> Selector:
    with _SELECTORS_LOCK:
        found = _SELECTORS.get((expression, strict))
        if found is None:
            if len(_SELECTORS) >= 4096:
                _SELECTORS.clear()
            found = _SELECTORS[(expression, strict)] = Selector(expression, strict)
    return found


class Selector:
    """A CEL selector as the allocator evaluates it against devices, one per expression
    and strictness in the process (`Inventory.selector`).

    Compiled on first use (a compile error is raised at the first device, as upstream
    reports it), results cached by entry number; a selector that reads only parts of a
    device (see `projection`) is evaluated once per distinct projection, devices alike in
    what it reads sharing the result. A result depends on the device alone, and an entry
    lives as long as its slice is cached (`SliceCache`), so the results of the slices
    that did not change carry over to the next inventory.
    """

    __slots__ = (
        "_compiled",
        "_driver",
        "_project",
        "_shared",
        "expression",
        "results",
        "strict",
    )

    def __init__(self, expression: str, strict: bool) -> None:
        self.expression = expression
        self.strict = strict
        self.results: dict[int, bool | CelEvalError] = {}
        self._compiled: CompiledSelector | CelCompileError | None = None
        self._project: Projector | None = None
        self._driver: str | None = None
        # By projection: the result and the device it was evaluated on. The device is kept
        # so that the ids a projection holds (capacity values) stay its own.
        self._shared: dict[tuple[object, ...], tuple[bool, Device]] = {}

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
                    shared = self._shared
                    if len(shared) >= _MAX_SHARED:
                        shared.clear()
                    shared[key] = (result, entry.device)  # an error stays with its device
                    entry._fault, entry._checked = None, True
            else:
                # Alike in what the selector reads; its own faults are still its own.
                fault = entry._fault if entry._checked else entry.fault()
                result = hit[0] if fault is None else CelEvalError(fault)
        self.results[entry.index] = result
        global _stored
        _stored += 1
        if _stored > _MAX_RESULTS:
            _forget_results()
        return result

    def pinned(self) -> str | None:
        """The driver every device the selector admits has (`pinned_driver`), None when it
        pins none or does not compile (its error is raised at the first device then)."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compile()
        return None if isinstance(compiled, CelCompileError) else self._driver

    def _compile(self) -> CompiledSelector | CelCompileError:
        compiled, self._project, self._driver = _program(self.expression, self.strict)
        self._compiled = compiled
        return compiled


Program = tuple[CompiledSelector | CelCompileError, Projector | None, str | None]
# Compiled selectors and their projectors by (expression, strict): the compiled-CEL cache,
# kept for the process (`clear_slice_cache` leaves it, as a scheduler keeps its own).
_PROGRAMS: dict[tuple[str, bool], Program] = {}


def _program(expression: str, strict: bool) -> Program:
    """The selector compiled as upstream's allocator compiles it (a compile error kept, to
    be raised at its first device), its projector (None: not projectable) and the driver it
    pins (None: none)."""
    found = _PROGRAMS.get((expression, strict))
    if found is None:
        compiled: CompiledSelector | CelCompileError
        try:
            compiled = compile_selector(
                expression,
                strict=strict,
                consumable_capacity=True,
                list_attributes=True,
                enforce_cost_limit=False,
            )
        except CelCompileError as exc:
            compiled = exc
        plan = reads(expression)
        found = (
            compiled,
            projector(plan) if plan is not None else None,
            pinned_driver(expression),
        )
        if len(_PROGRAMS) >= 4096:
            _PROGRAMS.clear()
        _PROGRAMS[(expression, strict)] = found
    return found


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
    others = [
        name
        for name, a in attributes.items()
        if a.string is None and a.int_ is None and a.bool_ is None
    ]
    for name in others:  # none: every attribute a string, int or bool, the common case
        value = tagged(attributes[name])
        if value is None:
            return f"attribute {name}: unsupported attribute value"
        if value[0] == "version":
            try:
                for text in value[1]:
                    _semver(str(text))
            except SemverError as exc:
                return f"parse semantic version: {exc}"
    return None


def _parses(text: str | None) -> bool:
    """A version attribute that parses (None: not a version, no usable value)."""
    if text is None:
        return False
    try:
        _semver(text)
    except SemverError:
        return False
    return True
