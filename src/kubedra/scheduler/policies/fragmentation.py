"""`fragmentation`: choose the placement that least increases expected GPU fragmentation.

In the spirit of "Beware of Fragmentation" (Weng et al., USENIX ATC 2023, FGD): for a task
type m (m_n devices of m_milli each) a node's free GPU capacity is *fragmented* when m cannot
run there at all (fewer than m_n devices with m_milli free: all of it) and otherwise on the
devices whose free milli is below m_milli. The expected fragmentation of a node is the sum
over the workload mix (probability p_m of type m) of what type m could not use; among the
feasible placements the one whose fragmentation grows least (or shrinks most) wins, and
binpacking breaks ties.

Whole-device pods on exclusive devices see every device as 1000 milli free or none, which
makes this the earlier whole-device rule (free devices fragmented for tasks needing more
devices than are free). For shared GPUs (consumable capacity `gpu.nvidia.com/milli`, 1000
per GPU) a device's free milli is read from the allocator state of the scheduler the policy
is attached to (`attach(scheduler)`); the mix is the (device count, milli per device) shape
of every placed pod, taken from the allocation results it was scored with, optionally
primed with a known workload mix (`prime`). Unattached, shared devices count as used.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from kubedra.allocator import AllocatedState, DeviceOrder, DeviceRef, RequestKey
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.policies.base import Candidate, Policy, grouped_order
from kubedra.scheduler.view import ClusterView

MILLI = 1000
MILLI_CAPACITY = "milli"  # capacity name on the device; fully qualified: "<driver>/milli"
_NANO = 10**9
Shape = tuple[int, int]  # (devices, milli per device)


class _HasAllocated(Protocol):
    def allocated(self) -> AllocatedState: ...


class Fragmentation(Policy):
    name = "fragmentation"
    candidates = 16

    def __init__(self) -> None:
        self.mix: Counter[int] = Counter()  # devices per placed pod (whole-device view)
        self.shapes: Counter[Shape] = Counter()  # (devices, milli per device) per placed pod
        self.prior: dict[Shape, float] = {}
        self._state: Callable[[], AllocatedState] | None = None
        self._last: Shape | None = None
        self._expect: Shape | None = None
        self._memo: dict[tuple[int, ...], float] = {}

    # --- inputs ---------------------------------------------------------------------------

    def attach(self, scheduler: _HasAllocated) -> None:
        """Read per-device consumed capacity from this scheduler's allocator state."""
        self._state = scheduler.allocated

    def prime(self, shapes: Mapping[Shape, float]) -> None:
        """Use a known mix of (devices, milli per device) shapes (counts or weights) instead
        of the observed one, as FGD uses the trace's typical pods."""
        self.prior = {k: float(v) for k, v in shapes.items() if k[0] > 0}
        self._memo.clear()

    def expect(self, devices: int, milli: int) -> None:
        """The shape of the pod about to be scheduled (a hint: nodes are then ranked by the
        exact fragmentation increase, so the first candidates are FGD's best)."""
        self._expect = (devices, milli) if devices > 0 else None

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        """The pod's shape from its unallocated claims: devices asked for, and the milli
        per device when a request asks for a `milli` capacity (else whole devices)."""
        devices, milli = 0, MILLI
        for claim in claims:
            if claim.status is not None and claim.status.allocation is not None:
                continue
            for request in claim.spec.devices.requests:
                exact = request.exactly or (
                    request.first_available[0] if request.first_available else None
                )
                if exact is None:
                    continue
                devices += exact.count or 1
                asked = exact.capacity.requests if exact.capacity else {}
                milli = next(
                    (q.value() for k, q in asked.items() if k.endswith(MILLI_CAPACITY)), milli
                )
        self.expect(devices, milli)

    def observe(self, devices: int) -> None:
        if devices > 0:
            self.mix[devices] += 1
            shape = self._last if self._last is not None and self._last[0] == devices else None
            self.shapes[shape or (devices, MILLI)] += 1
            if not self.prior:
                self._memo.clear()
        self._last = None
        self._expect = None

    # --- the measure ----------------------------------------------------------------------

    def expected_fragmentation(self, free: int) -> float:
        """Free whole devices that a task drawn from the mix could not use."""
        return self.expected_fragmentation_milli([MILLI] * max(free, 0)) / MILLI

    def weights(self) -> list[tuple[Shape, float]]:
        """The mix: the primed one if any, else the shapes placed so far."""
        counts: dict[Shape, float] = dict(self.prior) if self.prior else dict(self.shapes)
        total = sum(counts.values())
        return [(s, n / total) for s, n in counts.items()] if total else []

    def expected_fragmentation_milli(
        self, free: Sequence[int], weights: Sequence[tuple[Shape, float]] | None = None
    ) -> float:
        """FGD's F_n(M) for a node whose devices have `free` milli each (GPU part only)."""
        total = sum(free)
        if total <= 0:
            return 0.0
        frag = 0.0
        for (count, milli), p in self.weights() if weights is None else weights:
            if sum(f >= milli for f in free) >= count:
                frag += p * sum(f for f in free if f < milli)
            else:
                frag += p * total
        return frag

    def free_milli(self, view: ClusterView, node: str) -> dict[DeviceRef, int]:
        """Free milli of each device of a node (1000 or 0 for exclusive use)."""
        nd = view.nodes[node]
        state = self._state() if self._state is not None else None
        out: dict[DeviceRef, int] = {}
        for refs in nd.devices.values():
            for ref in refs:
                if state is None:
                    out[ref] = 0 if ref in nd.used else MILLI
                elif ref in state.devices:
                    out[ref] = 0
                elif ref in state.shared:
                    used = state.consumed(ref).get(f"{ref.driver}/{MILLI_CAPACITY}")
                    out[ref] = max(MILLI - used // _NANO, 0) if used is not None else 0
                else:
                    out[ref] = MILLI
        return out

    # --- the policy -----------------------------------------------------------------------

    def _frag(self, free: tuple[int, ...]) -> float:
        """Memoised fragmentation of a sorted free-milli tuple under the current mix."""
        got = self._memo.get(free)
        if got is None:
            got = self._memo[free] = self.expected_fragmentation_milli(free)
        return got

    def best_delta(self, free: Sequence[int], shape: Shape) -> tuple[float, int] | None:
        """The least fragmentation increase of placing `shape` on a node with `free` milli
        per device (choosing the devices as FGD does), and the milli left; None: no fit."""
        count, milli = shape
        before = tuple(sorted(free))
        fits = [i for i, f in enumerate(before) if f >= milli]
        if len(fits) < count:
            return None
        options = [fits[:count]] if count > 1 or milli >= MILLI else [[i] for i in fits]
        best: float | None = None
        for chosen in options:
            after = list(before)
            for i in chosen:
                after[i] -= milli
            frag = self._frag(tuple(sorted(after)))
            best = frag if best is None else min(best, frag)
        assert best is not None
        return best - self._frag(before), sum(before) - count * milli

    def rank_nodes(self, view: ClusterView, nodes: Sequence[str]) -> Sequence[str]:
        if self._state is None:
            return sorted(nodes, key=lambda n: view.nodes[n].free())
        shape = self._expect
        if shape is not None and self.weights():
            keyed: list[tuple[tuple[int, float, int], str]] = []
            for n in nodes:
                found = self.best_delta(list(self.free_milli(view, n).values()), shape)
                keyed.append(((0, found[0], found[1]) if found else (1, 0.0, 0), n))
            keyed.sort(key=lambda kn: kn[0])  # stable: names break ties
            return [n for _, n in keyed]
        # Fullest first by free milli; nodes with nothing free last (they rarely fit).
        totals = {n: sum(self.free_milli(view, n).values()) for n in nodes}
        return sorted(
            nodes, key=lambda n: (totals[n] == 0 and view.nodes[n].total() > 0, totals[n])
        )

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return grouped_order(view, node, fullest_first=True)

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        if self._state is None:
            return [self.device_order(view, node)]
        free = self.free_milli(view, node)
        if all(f in (0, MILLI) for f in free.values()):
            return [self.device_order(view, node)]

        def best_fit(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
            return sorted(refs, key=lambda r: free.get(r, MILLI))  # least free that fits first

        def whole_first(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
            return sorted(refs, key=lambda r: -free.get(r, 0))

        return [best_fit, whole_first]

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        free = self.free_milli(view, candidate.node)
        before = list(free.values())
        after = dict(free)
        milli_each = MILLI
        for result in candidate.results:
            for r in result.devices.results:
                ref = DeviceRef(r.driver, r.pool, r.device)
                if ref not in after:
                    continue
                if r.share_id is None:
                    after[ref] = 0
                    continue
                q = r.consumed_capacity.get(MILLI_CAPACITY) or r.consumed_capacity.get(
                    f"{r.driver}/{MILLI_CAPACITY}"
                )
                taken = q.nanos // _NANO if q is not None else MILLI
                after[ref] = max(after[ref] - taken, 0)
                milli_each = taken
        if candidate.refs:
            self._last = (len(candidate.refs), milli_each)
        weights = self.weights()
        delta = self.expected_fragmentation_milli(
            list(after.values()), weights
        ) - self.expected_fragmentation_milli(before, weights)
        return (-delta - sum(after.values()) / MILLI / 1000.0) / MILLI
