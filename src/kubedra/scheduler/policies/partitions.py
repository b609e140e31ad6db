"""Partitionable devices (KEP-4815) as placement sees them, and what their free room is worth.

A partitionable GPU is one counter set and the devices that draw on it alone: under dynamic
MIG the full GPU and every profile at every legal placement (drivers.md §1.4, §1.11). Which
devices still fit is what the counters left say, nothing else, so the model reads only what
a driver publishes: counter sets, each device's consumption, and its kind (the `profile`
attribute a MIG device carries, else its `type`). GPUs of one model have the same `Shape`
(counters, devices' kinds and consumptions, in the driver's order) and share everything
computed for it.

Worth. A workload mix (kind -> share of the requests) is priced by the LP of packing it into
the fewest GPUs of a shape (the cutting-stock relaxation, as `pricing` does for device
shares): its duals y_k say what one instance of kind k is worth, in GPUs, in an optimal
packing. The free room of a GPU (its counters left, `avail`) is worth v(avail), the best
priced set of devices that still fit together (`Worth.value`, an exact search over the
shape's devices of priced kinds, memoised on the counters left). A placement that takes
device d destroys v(avail) - v(avail - uses(d)) of it: at least d's own price, more when d
sits where the room was worth more to the mix (a 1g at slice 0 of an empty H100 blocks the
4g that only starts there). `mig-aware` steers by that cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from kubedra.allocator import DeviceRef, Inventory, NodeInfo
from kubedra.allocator.inventory import DeviceEntry
from kubedra.scheduler.policies.dual_lp import DualLP

Avail = tuple[int, ...]  # counters left, in `Shape.counters` order (nano units, as published)
KIND_ATTRIBUTES = ("profile", "type")  # in the driver's own domain: a MIG profile, else type
_EPS = 1e-9
SLICE_PREFIX = "memory-slice-"  # the NVIDIA driver's per-slice counters (drivers.md §1.4)
_MAX_ROUNDS = 1000  # configurations the column generation adds at most


@dataclass(frozen=True)
class Shape:
    """The devices drawing on one counter set, as placement sees them."""

    counters: tuple[str, ...]  # counter names, sorted
    totals: Avail
    kinds: tuple[str, ...]  # per device, in the driver's order
    uses: tuple[Avail, ...]  # per device: what it consumes of each counter

    @cached_property
    def needs(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per device, the counters it consumes: (counter index, amount) where not 0."""
        return tuple(tuple((i, u) for i, u in enumerate(uses) if u) for uses in self.uses)

    def fits(self, device: int, avail: Avail) -> bool:
        return all(avail[i] >= u for i, u in self.needs[device])

    def left(self, device: int, avail: Avail) -> Avail:
        out = list(avail)
        for i, u in self.needs[device]:
            out[i] -= u
        return tuple(out)

    def after(self, used: Iterable[int]) -> Avail:
        """The counters left once the devices `used` are allocated."""
        out = list(self.totals)
        for d in used:
            for i, u in self.needs[d]:
                out[i] -= u
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Gpu:
    """One partitionable device's counter set on a node: its shape and its devices' refs
    (in the shape's device order)."""

    node: str
    shape: int
    refs: tuple[DeviceRef, ...]


def device_kind(entry: DeviceEntry) -> str:
    """What a device is, for the mix: its `profile` (MIG), else its `type`, else "device"."""
    for name in KIND_ATTRIBUTES:
        attr = entry.device.attributes.get(name)
        if attr is not None and attr.string is not None:
            return attr.string
    return "device"


class Model:
    """Every partitionable GPU of the given nodes, grouped by shape."""

    def __init__(self, inventory: Inventory, nodes: Sequence[NodeInfo]) -> None:
        self.shapes: list[Shape] = []
        self.gpus: list[Gpu] = []
        self.by_node: dict[str, list[int]] = {}
        self.where: dict[DeviceRef, tuple[int, int]] = {}  # ref -> (gpu, device index)
        # (shape, kind) -> one device entry of that kind (to match selectors against)
        self.samples: dict[tuple[int, str], DeviceEntry] = {}
        numbers: dict[Shape, int] = {}
        for node in nodes:
            for pool in inventory.pools_for(node):
                if not pool.counter_sets:
                    continue
                members: dict[str, list[DeviceEntry]] = {}
                for entry, usable in pool.devices:
                    # A device drawing on one counter set belongs to it; one drawing on
                    # several is left to the allocator alone (no KEP-4815 driver does it).
                    if usable and entry.node_local and len(entry.consumes) == 1:
                        members.setdefault(entry.consumes[0][0], []).append(entry)
                for set_name, entries in members.items():
                    totals = pool.counter_sets.get(set_name)
                    if totals is None:
                        continue
                    names = tuple(sorted(totals))
                    shape = Shape(
                        names,
                        tuple(totals[n] for n in names),
                        tuple(device_kind(e) for e in entries),
                        tuple(_uses(e, names) for e in entries),
                    )
                    number = numbers.get(shape)
                    if number is None:
                        number = numbers[shape] = len(self.shapes)
                        self.shapes.append(shape)
                        for e, kind in zip(entries, shape.kinds, strict=True):
                            self.samples.setdefault((number, kind), e)
                    gpu = len(self.gpus)
                    self.gpus.append(Gpu(node.name, number, tuple(e.ref for e in entries)))
                    self.by_node.setdefault(node.name, []).append(gpu)
                    for i, e in enumerate(entries):
                        self.where[e.ref] = (gpu, i)


def _uses(entry: DeviceEntry, names: tuple[str, ...]) -> Avail:
    (_, counters) = entry.consumes[0]
    amounts = dict(counters)
    return tuple(amounts.get(n, 0) for n in names)


def size(shape: Shape, kind: str) -> float:
    """The share of a GPU one instance of `kind` takes: of its memory slices (the NVIDIA
    driver's `memory-slice-N` counters: the slices it covers, of 8), else, for a driver
    without them, of its most used counter."""
    uses = shape.uses[shape.kinds.index(kind)]
    slices = [i for i, name in enumerate(shape.counters) if name.startswith(SLICE_PREFIX)]
    if slices:
        return sum(1 for i in slices if uses[i]) / len(slices)
    return max((u / t for u, t in zip(uses, shape.totals, strict=True) if t), default=0.0)


class Worth:
    """What the free room of GPUs of one shape is worth at given kind prices (in GPUs).

    `value(avail)`: the best total price of a set of the shape's devices that fit together
    in `avail`; found by a depth-first search over the priced devices (take or leave each,
    in the shape's order), memoised on (device, counters left), so a shape is searched once
    per room it is asked about."""

    def __init__(self, shape: Shape, price: Mapping[str, float]) -> None:
        self.shape = shape
        self.price = dict(price)
        self._items = [
            (i, self.price[k], shape.needs[i])
            for i, k in enumerate(shape.kinds)
            if self.price.get(k, 0.0) > _EPS
        ]
        self._memo: dict[tuple[int, Avail], tuple[float, tuple[int, ...]]] = {}
        self._values: dict[Avail, float] = {}

    def value(self, avail: Avail) -> float:
        got = self._values.get(avail)
        if got is None:
            got = self._values[avail] = self.best(avail)[0]
        return got

    def best(self, avail: Avail, start: int = 0) -> tuple[float, tuple[int, ...]]:
        """The best fill of `avail` from the priced devices from `start` on: its worth and
        the devices (shape indices) it takes."""
        items = self._items
        if start >= len(items):
            return 0.0, ()
        key = (start, avail)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = self.best(avail, start + 1)
        device, price, needs = items[start]
        if all(avail[i] >= u for i, u in needs):
            left = list(avail)
            for i, u in needs:
                left[i] -= u
            worth, taken = self.best(tuple(left), start + 1)
            if worth + price > out[0] + _EPS:
                out = (worth + price, (device, *taken))
        self._memo[key] = out
        return out

    def cost(self, device: int, avail: Avail) -> float:
        """What taking `device` destroys of the room `avail` (>= 0; in GPUs)."""
        return max(self.value(avail) - self.value(self.shape.left(device, avail)), 0.0)


def shape_prices(
    shape: Shape, demand: Mapping[str, float], known: list[dict[str, int]] | None = None
) -> dict[str, float]:
    """The LP duals of packing `demand` (kind -> share, kinds the shape offers) into the
    fewest GPUs of `shape`: what one instance of each kind is worth in an optimal packing,
    in GPUs (a GPU holding an optimal configuration is worth exactly 1). Column generation
    as in `pricing`: HiGHS over the configurations so far, the best configuration at the
    current prices (`Worth.best` on an empty GPU) added while it is worth more than one GPU.

    `known`: configurations found for this shape before (kind -> count), which start the
    search (any mix's LP can use them); the ones found here are added to it."""
    offered = set(shape.kinds)
    alone = {  # each kind alone: as many as fit on one GPU (the first configurations)
        k: round(Worth(shape, {k: 1.0}).value(shape.totals))
        for k in sorted(k for k, q in demand.items() if q > 0 and k in offered)
    }
    kinds = [k for k, n in alone.items() if n > 0]
    if not kinds:
        return {}
    columns = [[float(alone[k] if k == kind else 0) for k in kinds] for kind in kinds]
    known = [] if known is None else known
    for config in known:
        column = [float(config.get(k, 0)) for k in kinds]
        if sum(column) > 1 and column not in columns:
            columns.append(column)
    lp = DualLP([demand[k] for k in kinds])
    for column in columns:
        lp.add(column)
    for _ in range(_MAX_ROUNDS):
        y = lp.solve()
        price = {k: max(p, 0.0) for k, p in zip(kinds, y, strict=True)}
        worth, taken = Worth(shape, price).best(shape.totals)
        if worth <= 1 + 1e-7:
            return price
        counts = Counter(shape.kinds[d] for d in taken)
        known.append(dict(counts))
        lp.add([float(counts[k]) for k in kinds])
    raise ArithmeticError(f"partition prices: no optimum after {_MAX_ROUNDS} configurations")
