"""How many of a gang's pending members one domain's nodes take, packed node by node
(`topology.py` says why and how the domain is then chosen): a member counts on a node when
its pod requests fit in what the node has left, all its device requests find free matching
devices there, and the node admits it; members packed earlier count against the node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from kubedra.allocator import NodeInfo
from kubedra.allocator.inventory import DeviceEntry, Inventory
from kubedra.api.core import Node, Pod
from kubedra.api.quantity import Quantity
from kubedra.api.resource import DeviceClass
from kubedra.scheduler.claims import extended_resource_classes
from kubedra.scheduler.framework.interfaces import Handle
from kubedra.scheduler.nodes import (
    Left,
    Wanted,
    add_requests,
    asks_node_resources,
    filter_node,
    is_extended_resource,
    node_constraints,
    pod_requests,
    resources_left,
    shortfall,
    wanted,
)
from kubedra.scheduler.plugins.gang.need import Demand, Need


@dataclass
class DomainFit:
    """How much of a gang one domain (or the whole cluster) takes."""

    value: str
    members: int = 0  # pending members that fit, node by node
    shared: bool = True  # the shared claims fit too
    free: Counter[str] = field(default_factory=Counter)  # free matching devices per class
    nodes: int = 0
    # why members whose nodes admit them were refused there on their pod requests
    # ("Insufficient cpu": how many (member, node) tries)
    short: Counter[str] = field(default_factory=Counter)
    # the members that fit counting devices only (CPU and memory left out); set by
    # `choose` when no domain fits, to tell a device shortfall from a CPU/memory one
    device_members: int | None = None

    @property
    def spare(self) -> int:
        return sum(self.free.values())


@dataclass(slots=True)
class _Devices:
    """A node's free devices while a gang is packed: one bit mask per free device (the
    demand keys it matches), and for each key an `allocationMode: All` demand uses, how
    many matching devices the node has in all (free or not; -1: none can be taken)."""

    masks: list[int]
    whole: dict[int, int]


@dataclass(frozen=True, slots=True)
class _Asks:
    """A member's pod requests, as NodeResourcesFit checks them."""

    requests: dict[str, Quantity]
    wants: Wanted  # CPU and memory, as `shortfall` reads them
    extended: bool  # extended resources too: checked by `filter_node`, node by node
    key: tuple[tuple[str, Quantity], ...]  # the same requests, the same verdicts

    @property
    def asks(self) -> bool:
        return asks_node_resources(self.requests)


@dataclass(frozen=True, slots=True)
class _Member:
    """A pending member as the packing tries it."""

    pod: Pod
    demands: tuple[Demand, ...]
    asks: _Asks | None  # None: no requests a node's allocatable limits
    shape: int  # members alike (devices, requests, node constraints) share it
    bare_shape: int  # the same, requests left out


def _asks(pod: Pod) -> _Asks:
    requests = pod_requests(pod)
    return _Asks(
        requests,
        wanted(requests),
        any(is_extended_resource(name) for name in requests),
        tuple(sorted(requests.items())),
    )


class Packer:
    """Packs a gang's members onto nodes: per node the free devices (node-local, usable,
    not in use), each with the set of the gang's demand keys it matches, and what is left
    of the node's allocatable for pod requests."""

    def __init__(self, handle: Handle, need: Need) -> None:
        self.handle = handle
        self.need = need
        keys = sorted({d.key for d in need.demands})
        self.bit = {k: 1 << i for i, k in enumerate(keys)}
        self.class_bits: dict[str, int] = {}
        for (klass, _), b in self.bit.items():
            self.class_bits[klass] = self.class_bits.get(klass, 0) | b
        self.all_bits = 0
        for d in need.demands:
            if d.all:
                self.all_bits |= self.bit[d.key]
        self.classes = handle.classes()
        self.view = handle.view()
        self.inventory = handle.inventory()
        self.usage = handle.node_usage()
        self.served = extended_resource_classes(self.classes.values())
        # the members, the most devices first; members alike share a shape (the same
        # demands, requests and node constraints: a node that refused one refuses all)
        shapes: dict[object, int] = {}
        self.members: list[_Member] = []
        for pod, demands in need.pods:
            asks = _asks(pod)
            constraints = node_constraints(pod)
            shape = (demands, asks.key, constraints)
            bare = (demands, None, constraints)
            self.members.append(
                _Member(
                    pod,
                    demands,
                    asks if asks.asks else None,
                    shapes.setdefault(shape, len(shapes)),
                    shapes.setdefault(bare, len(shapes)),
                )
            )
        self.members.sort(key=lambda m: -sum(d.count for d in m.demands))
        self.extended = any(m.asks is not None and m.asks.extended for m in self.members)
        self._eligible: dict[bytes, set[str]] = {}
        self._devices: dict[str, tuple[tuple[int, ...], tuple[tuple[int, int], ...]]] = {}

    def devices(self, node: Node) -> _Devices:
        """The node's free devices, afresh for one packing (read once per node)."""
        found = self._devices.get(node.name)
        if found is None:
            found = self._devices[node.name] = self._read(node)
        return _Devices(list(found[0]), dict(found[1]))

    def _read(self, node: Node) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        """One bit mask per free device of the node: the demand keys it matches (devices
        matching none are left out); and the devices per `All` key, free or not."""
        devices = self.view.nodes.get(node.name)
        if devices is None or not self.bit:
            return (), tuple((b, 0) for b in self._all_keys())
        out = []
        alls = self.all_bits
        whole = dict.fromkeys(self._all_keys(), 0)
        info = NodeInfo(node.name, node.metadata.labels)
        strict = self.handle.strict_cel
        for pool in self.inventory.pools_for(info, self.handle.features):
            if whole and (pool.incomplete or pool.invalid is not None):
                # upstream: "All" cannot be allocated on a node one of whose pools is being
                # updated or invalid (how many devices "all" is cannot be known)
                whole = dict.fromkeys(whole, -1)
            for entry, usable in pool.devices:
                if not usable or not entry.node_local:
                    continue
                used = entry.ref in devices.used
                if used and not alls:
                    continue
                mask = 0
                for (klass, selectors), b in self.bit.items():
                    if used and not b & alls:
                        continue  # a device in use counts only towards the "All" sets
                    dc = self.classes.get(klass)
                    if dc is not None and _passes(self.inventory, dc, selectors, entry, strict):
                        mask |= b
                if mask & alls:
                    for b, n in whole.items():
                        if mask & b and n >= 0:
                            whole[b] = n + 1
                if mask and not used:
                    out.append(mask)
        return tuple(out), tuple(whole.items())

    def _all_keys(self) -> list[int]:
        return [b for b in self.bit.values() if b & self.all_bits]

    def eligible(self, pod: Pod) -> set[str]:
        """The nodes the pod's node selector, required affinity and tolerations admit."""
        key = node_constraints(pod)
        found = self._eligible.get(key)
        if found is None:
            bare = msgspec.structs.replace(
                pod, spec=msgspec.structs.replace(pod.spec, containers=(), init_containers=())
            )
            found = {n.name for n in self.handle.nodes() if filter_node(bare, n, {}).fits}
            self._eligible[key] = found
        return found

    def fit(self, value: str, nodes: Sequence[Node], resources: bool = True) -> DomainFit:
        """How many of the gang's members `nodes` take, node by node (`resources`: with
        their pod requests; False: their devices only)."""
        result = DomainFit(value, nodes=len(nodes))
        free: dict[str, _Devices] = {}
        for node in nodes:
            devices = free[node.name] = self.devices(node)
            for klass, bits in self.class_bits.items():
                result.free[klass] += sum(1 for m in devices.masks if m & bits)
        for klass in self.class_bits:
            result.free.setdefault(klass, 0)
        if self.need.shared:
            result.shared = any(_take(free[n.name], self.need.shared, self.bit) for n in nodes)
        room = _Room(self)
        names = [n.name for n in nodes]
        refused: dict[int, set[str]] = {}  # shape -> the nodes that did not take it
        for m in self.members:
            asks = m.asks if resources else None
            tried = refused.setdefault(m.shape if resources else m.bare_shape, set())
            admits = self.eligible(m.pod)
            for node, name in zip(nodes, names, strict=True):
                if name not in admits or name in tried:
                    continue
                # the node only loses devices and room: no use trying it again
                if asks is not None and (reason := room.short(m.pod, asks, node)):
                    result.short[reason] += 1
                    tried.add(name)
                    continue
                if _take(free[name], m.demands, self.bit):
                    if asks is not None:
                        room.add(m.pod, asks, node)
                    result.members += 1
                    break
                tried.add(name)
        return result


class _Room:
    """What each node has left for pod requests during one packing: its allocatable less
    the requests of the pods bound or assumed there (`Handle.node_usage`, as
    NodeResourcesFit reads it) and of the members packed there so far."""

    def __init__(self, packer: Packer) -> None:
        self.packer = packer
        # nodes members were packed onto: what is requested there (kept only when some
        # member asks for extended resources, which `filter_node` checks from it)
        self.used: dict[str, dict[str, Quantity]] = {}
        self.left: dict[str, Left] = {}  # CPU and memory left, as `resources_left` says

    def _used(self, node: str) -> Mapping[str, Quantity]:
        found = self.used.get(node)
        return found if found is not None else self.packer.usage.get(node, {})

    def _left(self, node: Node) -> Left:
        left = self.left.get(node.name)
        if left is None:
            left = self.left[node.name] = resources_left(node, self._used(node.name))
        return left

    def short(self, pod: Pod, asks: _Asks, node: Node) -> str:
        """Why `pod`'s requests do not fit on `node` now ("" when they do): NodeResourcesFit's
        verdict, from the same helpers (CPU and memory: `resources_left` and `shortfall`,
        as its kept room; extended resources too: `filter_node`, as it does then)."""
        if asks.extended:
            return filter_node(pod, node, self._used(node.name), self.packer.served).reason
        return shortfall(asks.wants, self._left(node))

    def add(self, pod: Pod, asks: _Asks, node: Node) -> None:
        """A member packed onto `node`: its requests count there from now on."""
        name = node.name
        if self.packer.extended:
            used = self.used.get(name)
            if used is None:
                used = self.used[name] = dict(self.packer.usage.get(name, {}))
            add_requests(used, pod)
            self.left.pop(name, None)
            return
        left = list(self._left(node))
        for i, nanos, _ in asks.wants:
            room = left[i]
            if room is not None:
                left[i] = room - nanos
        self.left[name] = tuple(left)


def _take(
    devices: _Devices,
    demands: Sequence[Demand],
    bit: Mapping[tuple[str, tuple[str, ...]], int],
) -> bool:
    """Take devices for all `demands` from the node's free `devices` (removed when all fit;
    else untouched). `allocationMode: All` first: upstream's allocator takes for such a
    request every device of the node's pools that passes its class and selectors, and
    fails when there is none or when any of them is allocated already; here, when the
    node's free matching devices are fewer than all it has (in use elsewhere, or taken
    by a member packed before). Then the counted demands, the scarcest first, each taking
    the devices that match fewest other demands."""
    if not demands:
        return True
    masks = devices.masks
    taken: set[int] = set()
    for d in demands:
        if d.all:
            b = bit[d.key]
            matching = [i for i, m in enumerate(masks) if m & b and i not in taken]
            if not matching or len(matching) != devices.whole.get(b, -1):
                return False
            taken.update(matching)
    counted = [d for d in demands if not d.all]
    order = sorted(counted, key=lambda d: sum(1 for m in masks if m & bit[d.key]))
    for d in order:
        b = bit[d.key]
        candidates = sorted(
            (i for i, m in enumerate(masks) if m & b and i not in taken),
            key=lambda i: bin(masks[i]).count("1"),
        )
        if len(candidates) < d.count:
            return False
        taken.update(candidates[: d.count])
    for i in sorted(taken, reverse=True):
        del masks[i]
    return True


def _passes(
    inventory: Inventory,
    klass: DeviceClass,
    selectors: tuple[str, ...],
    entry: DeviceEntry,
    strict: bool,
) -> bool:
    try:
        return all(
            inventory.matches(s.cel.expression, entry, strict=strict)
            for s in klass.spec.selectors
            if s.cel is not None
        ) and all(inventory.matches(e, entry, strict=strict) for e in selectors)
    except Exception:  # a selector that fails on a device does not select it
        return False
