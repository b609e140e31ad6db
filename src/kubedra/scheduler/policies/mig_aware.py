"""`mig-aware`: place MIG instances (partitionable devices) where the mix loses least (a
kubedra extension).

Under dynamic MIG the NVIDIA driver publishes every profile at every legal placement, all
drawing on one counter set per GPU (drivers.md §1.4, §1.11); upstream's allocator takes the
first that fits, so a 1g lands at slice 0 of the first GPU with room, where it blocks the 4g
(which only starts there) and 3g/2g placements beside it. This policy prices the room left
on each GPU by the workload mix (`partitions`: the LP of packing the mix's profiles into the
fewest GPUs gives each profile's worth; the room's worth is the best priced set of
instances that still fits) and puts each instance where it destroys the least of that worth:

- devices: on a GPU already in use rather than a whole one, while one in use can take the
  instance (whole GPUs are where the 7g's go, and a stream always has some arriving); then
  the placement whose taking costs least (v(room) - v(room after)); among equals the GPU
  whose room is worth least (the fullest), then the placement the driver lists last on its
  GPU (the highest start: the large profiles only start at slice 0, so filling from the top
  keeps them placeable);
- nodes: by the best such placement on them (nodes without partitionable GPUs last);
- score: the same order for the devices the allocator took: whole GPUs broken, then their
  cost (per GPU), then fullness.

The LP's duals are degenerate on MIG mixes (the compute slices and the memory slices both
bind, so many price vectors certify the optimum, and the LP solver returns one vertex: with
compute-proportional prices a slice of memory that no instance can use costs nothing). A
profile's price is therefore (1 - SIZE_WEIGHT) of its dual plus SIZE_WEIGHT of its share of
the GPU's memory slices: both price vectors value every configuration at one GPU at most,
so the blend does too (it is a feasible dual), and slices left unusable now cost something.

The mix is the profiles of the pods the policy has seen (each pod once, the last `WINDOW`),
or one given to `prime`; until it has seen any, every profile a GPU offers counts alike.
Prices are solved per GPU model when the mix is drawn and kept while no profile's share has
moved by more than `REPRICE` (absolute) since. Pods that ask for no partitionable device are placed
as by `first-fit`. Everything is read from what drivers publish (counter sets, consumptions,
the `profile`/`type` attributes), so any KEP-4815 driver's partitions are handled alike.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Protocol

from kubedra.allocator import DeviceOrder, DeviceRef, Inventory, NodeInfo, RequestKey
from kubedra.api.core import Node, Pod
from kubedra.api.resource import (
    DeviceClass,
    DeviceSubRequest,
    ExactDeviceRequest,
    ResourceClaim,
)
from kubedra.cel import CelCompileError, CelEvalError
from kubedra.scheduler.policies.base import Candidate, Policy
from kubedra.scheduler.policies.partitions import Avail, Model, Worth, shape_prices, size
from kubedra.scheduler.view import ClusterView

REPRICE = 0.02  # re-solve the prices when a profile's share moved by more than this
WINDOW = 10_000  # pods the observed mix remembers
SIZE_WEIGHT = 0.1  # share of a profile's price that is its size (memory slices), not its dual
_DIGITS = 9  # costs and worths are compared rounded (sums of LP prices)
_TIE = 1e-6  # weight of the fullness tie-break in the score

# A device's place in the order: (class, whole, cost, worth of its GPU's room, -index on its
# GPU); class 0: a partition that fits now, 1: not a partition, 2: a partition that does not
# fit; whole: 1 where it would be the first instance on its GPU.
Key = tuple[int, int, float, float, int]


class _SchedulerState(Protocol):
    def inventory(self) -> Inventory: ...

    def nodes(self) -> Sequence[Node]: ...

    def classes(self) -> Mapping[str, DeviceClass]: ...


class MigAware(Policy):
    name = "mig-aware"
    candidates = 4

    def __init__(self) -> None:
        self._scheduler: _SchedulerState | None = None
        self._inventory: Inventory | None = None
        self._model: Model | None = None
        self._view: ClusterView | None = None
        self._mark = 0
        self._avail: dict[int, Avail] = {}  # gpu -> counters left
        self.prior: dict[str, float] = {}
        self._window: deque[str] = deque()
        self._counts: Counter[str] = Counter()
        self._seen: dict[str, None] = {}  # pods counted (insertion order: oldest first)
        self._priced_for: dict[str, float] | None = None
        self._worth: dict[int, Worth] = {}  # shape -> worth at the current prices
        self._configurations: dict[int, list[dict[str, int]]] = {}  # shape -> found so far
        self._wanted: dict[int, frozenset[int]] | None = None  # shape -> devices the pod may take
        self._keys: dict[tuple[int, Avail, frozenset[int]], Key | None] = {}
        # the devices a pod may take -> node -> its best key for them, while neither the
        # node nor the prices change
        self._node_keys: dict[tuple[object, ...], dict[str, Key | None]] = {}

    # --- inputs ---------------------------------------------------------------------------

    def attach(self, scheduler: _SchedulerState) -> None:
        self._scheduler = scheduler

    def prime(self, mix: Mapping[str, float]) -> None:
        """Use a known mix (profile -> count or weight) instead of the observed one."""
        self.prior = {k: float(v) for k, v in mix.items() if v > 0}
        self._reprice()

    def mix(self) -> dict[str, float]:
        """Profile -> share: the primed mix, else the profiles of the pods seen."""
        counts: Mapping[str, float] = self.prior or self._counts
        total = sum(counts.values())
        return {k: v / total for k, v in counts.items() if v > 0} if total else {}

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        self._wanted = None
        self.first_only(False)
        model = self._current_model()
        if model is None or not model.shapes:
            return
        requests: list[ExactDeviceRequest | DeviceSubRequest] = [
            exact
            for claim in claims
            if claim.status is None or claim.status.allocation is None
            for request in claim.spec.devices.requests
            for exact in ([request.exactly] if request.exactly else request.first_available)
        ]
        matched: dict[int, set[str]] = {}
        for exact in requests:
            for shape, kind in self._matching(model, exact):
                matched.setdefault(shape, set()).add(kind)
        if not matched:
            return
        self._wanted = {
            shape: frozenset(i for i, k in enumerate(model.shapes[shape].kinds) if k in kinds)
            for shape, kinds in matched.items()
        }
        self._count(pod, model, matched)
        # One device of known kinds: the ranking is the score, the first candidate is best.
        one = (
            len(requests) == 1
            and len(claims) == 1
            and not claims[0].spec.devices.constraints
            and (requests[0].allocation_mode in (None, "ExactCount"))
            and (requests[0].count or 1) == 1
        )
        self.first_only(one)

    def _matching(
        self, model: Model, exact: ExactDeviceRequest | DeviceSubRequest
    ) -> list[tuple[int, str]]:
        """The (shape, kind) pairs whose sample device passes the request's class and own
        selectors (a selector naming one GPU is judged on the sample: the order only)."""
        assert self._scheduler is not None and self._inventory is not None
        klass = self._scheduler.classes().get(exact.device_class_name or "")
        if klass is None:
            return []
        exprs = [s.cel.expression for s in klass.spec.selectors if s.cel is not None]
        exprs += [s.cel.expression for s in exact.selectors if s.cel is not None]
        out = []
        for (shape, kind), entry in model.samples.items():
            try:
                if all(self._inventory.matches(e, entry, strict=False) for e in exprs):
                    out.append((shape, kind))
            except (CelCompileError, CelEvalError):
                continue
        return out

    def _count(self, pod: Pod, model: Model, matched: Mapping[int, set[str]]) -> None:
        """Count the pod's profile in the observed mix, once per pod: where it could be
        several, the one taking the least of its GPU."""
        key = pod.metadata.uid or f"{pod.namespace}/{pod.name}"
        if key in self._seen:
            return

        options = [(size(model.shapes[s], k), k) for s, kinds in matched.items() for k in kinds]
        _, kind = min(options)
        self._seen[key] = None
        self._window.append(kind)
        self._counts[kind] += 1
        if len(self._window) > WINDOW:
            old = self._window.popleft()
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
            del self._seen[next(iter(self._seen))]
        if not self.prior:
            self._reprice()

    def _reprice(self) -> None:
        """Solve the prices again when a profile's share moved by more than REPRICE since
        they were solved; what was computed at the old prices stays if they did not change
        (LP duals move in steps: most small moves of the mix keep them)."""
        shares, was = self.mix(), self._priced_for
        if (
            was is not None
            and shares.keys() == was.keys()
            and all(abs(shares[k] - q) <= REPRICE for k, q in was.items())
        ):
            return
        self._priced_for = shares
        old, self._worth = self._worth, {}
        if self._model is None or any(
            self.worth(shape).price != worth.price for shape, worth in old.items()
        ):
            self._keys.clear()
            self._node_keys.clear()
        else:
            self._worth = old

    # --- the model and the state of each GPU ---------------------------------------------

    def _current_model(self) -> Model | None:
        if self._scheduler is None:
            return None
        inventory = self._scheduler.inventory()
        if inventory is not self._inventory or self._model is None:
            nodes = [NodeInfo(n.name, dict(n.metadata.labels)) for n in self._scheduler.nodes()]
            self._inventory, self._model = inventory, Model(inventory, nodes)
            self._view, self._avail = None, {}
            self._worth.clear()
            self._keys.clear()
            self._node_keys.clear()
            self._configurations.clear()
        return self._model

    def _sync(self, view: ClusterView) -> Model | None:
        """Bring the counters left of every GPU on nodes changed since the last call up to
        date (all of them for a new view or model)."""
        model = self._current_model()
        if model is None:
            return None
        if view is not self._view:
            self._view, self._mark = view, 0
            changed: Sequence[str] | None = None
            _, self._mark = view.changed_since(0)
        else:
            changed, self._mark = view.changed_since(self._mark)
        if changed is None:
            self._node_keys.clear()
        for node in model.by_node if changed is None else set(changed):
            for keys in self._node_keys.values():
                keys.pop(node, None)
            nd = view.nodes.get(node)
            for gpu in model.by_node.get(node, ()):
                g = model.gpus[gpu]
                used = [] if nd is None else [i for i, r in enumerate(g.refs) if r in nd.used]
                self._avail[gpu] = model.shapes[g.shape].after(used)
        return model

    def worth(self, shape: int) -> Worth:
        """What room on GPUs of `shape` is worth at the prices of the current mix."""
        got = self._worth.get(shape)
        if got is None:
            assert self._model is not None
            model_shape = self._model.shapes[shape]
            mix = self.mix()
            offered = set(model_shape.kinds)
            demand = {k: q for k, q in mix.items() if k in offered}
            if not demand:  # nothing seen that this GPU offers: every profile alike
                demand = dict.fromkeys(offered, 1.0 / len(offered))
            known = self._configurations.setdefault(shape, [])
            duals = shape_prices(model_shape, demand, known)
            price = {
                k: (1 - SIZE_WEIGHT) * y + SIZE_WEIGHT * size(model_shape, k)
                for k, y in duals.items()
            }
            got = self._worth[shape] = Worth(model_shape, price)
        return got

    def _device_key(self, gpu: int, device: int) -> Key:
        assert self._model is not None
        shape_no = self._model.gpus[gpu].shape
        shape, avail = self._model.shapes[shape_no], self._avail[gpu]
        if not shape.fits(device, avail):
            return (2, 0, 0.0, 0.0, 0)
        worth = self.worth(shape_no)
        return (
            0,
            int(avail == shape.totals),
            round(worth.cost(device, avail), _DIGITS),
            round(worth.value(avail), _DIGITS),
            -device,
        )

    def _gpu_key(self, gpu: int) -> Key | None:
        """The best place for the pod on one GPU (None: none of its devices fits)."""
        assert self._model is not None and self._wanted is not None
        shape = self._model.gpus[gpu].shape
        wanted = self._wanted.get(shape)
        if not wanted:
            return None
        memo = (shape, self._avail[gpu], wanted)
        if memo not in self._keys:
            keys = [self._device_key(gpu, d) for d in wanted]
            self._keys[memo] = min((k for k in keys if k[0] == 0), default=None)
        return self._keys[memo]

    # --- the policy -----------------------------------------------------------------------

    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        if self._wanted is None:
            return nodes
        model = self._sync(view)
        if model is None:
            return nodes
        if len(self._keys) > 100_000:
            self._keys.clear()
        if len(self._node_keys) > 64:
            self._node_keys.clear()
        known = self._node_keys.setdefault(tuple(sorted(self._wanted.items())), {})
        ranked: list[tuple[Key, str]] = []
        rest: list[str] = []
        for node in nodes:
            if node in skip:
                rest.append(node)
                continue
            if node in known:
                best = known[node]
            else:
                keys = [self._gpu_key(g) for g in model.by_node.get(node, ())]
                best = known[node] = min((k for k in keys if k is not None), default=None)
            if best is None:
                rest.append(node)
            else:
                ranked.append((best, node))
        ranked.sort(key=lambda kn: kn[0])  # stable: equal keys keep the given (name) order
        return [n for _, n in ranked] + rest

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        if self._wanted is None:
            return [None]
        model = self._sync(view)
        if model is None:
            return [None]

        def key(ref: DeviceRef) -> Key:
            where = model.where.get(ref)
            return (1, 0, 0.0, 0.0, 0) if where is None else self._device_key(*where)

        def order(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
            return sorted(refs, key=key)  # stable: ties keep upstream order

        return [order]

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        if self._wanted is None:
            return 0.0
        model = self._sync(view)
        if model is None:
            return 0.0
        taken: dict[int, list[int]] = {}
        for ref in candidate.refs:
            where = model.where.get(ref)
            if where is not None:
                taken.setdefault(where[0], []).append(where[1])
        cost = fullness = 0.0
        whole = 0
        for gpu, devices in taken.items():
            shape_no = model.gpus[gpu].shape
            shape, worth, avail = model.shapes[shape_no], self.worth(shape_no), self._avail[gpu]
            after = avail
            for d in devices:
                after = shape.left(d, after)
            before = worth.value(avail)
            cost += max(before - worth.value(after), 0.0)
            fullness += before
            whole += avail == shape.totals
        # whole GPUs broken first (each outweighs any cost: a room is worth one GPU at most)
        return -2.0 * whole - round(cost, _DIGITS) - _TIE * fullness
