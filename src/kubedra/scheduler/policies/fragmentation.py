"""`fragmentation`: Fragmentation Gradient Descent (FGD; Weng et al., USENIX ATC 2023).

FGD's measure: for a node n and a task type m of the workload (CPU, device count, milli per
device, accepted device models), F_n(m) is the node's free device capacity that m cannot
use: all of it when m cannot run on n at all (too little CPU left, no device model that m
accepts, fewer than m's count of devices with m's milli free; a task that asks for no device
leaves all of it idle), otherwise the free milli of the devices with less than m's milli
free. A node's fragmentation is F_n = sum_m p_m F_n(m), p_m the share of type m in the
workload mix. A pod goes where F grows least: its node score is FGD's integer score
100·σ(−ΔF/1000), rounded down. Among equal scores it follows FGD's simulator: the
first node of one node order fixed for the run, here a hash of the seed (`reseed`; the
simulator passes its run seed, the scheduler keeps 0) and the node name, so a run repeats
exactly. The paper's simulator renames the nodes by a seeded random permutation and takes
the smallest name. `fragmentation-pack` breaks those ties by packing instead; under FGD's
typical pods it leaves more capacity unallocated (docs/decisions.md).

Speed: a node's score depends only on its free milli, its models and which of the mix's
CPU requests its free CPU covers before and after the pod (its band). Nodes are filed by
that state (`NodeIndex`, re-filed only when the view logs them changed) and each state is
rated once per pod shape, so ranking costs the number of distinct node states, not of nodes.

Devices: a device used exclusively has 0 milli free, an unused one 1000. A shared device
(consumable capacity `<driver>/milli`, 1000 per device) has what the allocator state of the
attached scheduler says is not consumed. CPU: what the scheduler says is left of the
node's allocatable. Models: the `productName` attribute of the node's devices (nodes are
taken as holding one model each, as in the trace). The mix is primed with the target
workload's task types (`prime`, what FGD calls typical pods) or observed from placed pods.
"""

from __future__ import annotations

import bisect
import math
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Protocol

from kubedra.allocator import AllocatedState, DeviceOrder, DeviceRef, RequestKey
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.nodes import pod_requests
from kubedra.scheduler.policies.base import Candidate, Policy, fixed_device_count, grouped_order
from kubedra.scheduler.policies.ranking import NodeIndex
from kubedra.scheduler.view import ClusterView

MILLI = 1000
MILLI_CAPACITY = "milli"  # capacity name on the device; fully qualified: "<driver>/milli"
_NANO = 10**9
_UNLIMITED = 1 << 62  # the CPU left on a node that declares none: more than any request


@dataclass(frozen=True, slots=True)
class TaskShape:
    """One task type of the workload mix (FGD's typical pod)."""

    devices: int = 0  # devices asked for; 0: a task without devices
    milli: int = MILLI  # milli of each device (1000: the whole device)
    cpu_milli: int = 0
    models: frozenset[str] = frozenset()  # device models it accepts; empty: any

    def accepts(self, models: frozenset[str]) -> bool:
        return not self.models or not self.models.isdisjoint(models)

    @property
    def shares_a_device(self) -> bool:
        """A part of one device (FGD's GPU-sharing task), which may go on any device."""
        return self.devices == 1 and self.milli < MILLI


Mix = Sequence[tuple[TaskShape, float]]


def node_fragmentation(
    free: Sequence[int], mix: Mix, cpu_free: int | None = None, models: frozenset[str] = frozenset()
) -> float:
    """FGD's F_n = sum_m p_m F_n(m) in milli, for a node whose devices have `free` milli
    each, `cpu_free` CPU milli left (None: not limited) and devices of `models`."""
    total = sum(free)
    if total <= 0:
        return 0.0
    frag = 0.0
    for shape, p in mix:
        runs = (
            shape.devices > 0
            and shape.accepts(models)
            and (cpu_free is None or cpu_free >= shape.cpu_milli)
            and sum(f >= shape.milli for f in free) >= shape.devices
        )
        frag += p * (sum(f for f in free if f < shape.milli) if runs else total)
    return frag


def fgd_score(delta: float, scale: float = MILLI) -> int:
    """FGD's node score for a fragmentation change of `delta` milli: 0..100, 50 for none
    (`scale`: the change that moves it from 50 to 26; FGD's is one device)."""
    x = max(min(delta / scale, 700.0), -700.0)  # math.exp overflows past ~709
    return int(100.0 / (1.0 + math.exp(x)))


def placements(free: Sequence[int], shape: TaskShape) -> list[tuple[int, ...]]:
    """The free-milli tuples (sorted) a node can be left with after placing `shape` as FGD
    places it: one option per distinct device for a task sharing one device, else the least
    sufficient devices; empty when it does not fit."""
    before = sorted(free)
    if shape.devices <= 0:
        return [tuple(before)]
    fits = [i for i, f in enumerate(before) if f >= shape.milli]
    if len(fits) < shape.devices:
        return []
    if shape.shares_a_device:
        return [share_from(before, f, shape.milli) for f in sorted({before[i] for i in fits})]
    after = list(before)
    for i in fits[: shape.devices]:
        after[i] -= shape.milli
    return [tuple(sorted(after))]


def share_from(free: Sequence[int], device_free: int, milli: int) -> tuple[int, ...]:
    """The free milli (sorted) left when `milli` is taken from one device that has
    `device_free` of the node's `free`."""
    after = list(free)
    after[after.index(device_free)] -= milli
    return tuple(sorted(after))


def taken_from(before: Sequence[int], after: Sequence[int]) -> int:
    """The free milli the device had that a share went to (`share_from`'s `device_free`):
    the value `before` holds once more than `after`."""
    (device_free,) = Counter(before) - Counter(after)
    return device_free


class _SchedulerState(Protocol):
    def allocated(self) -> AllocatedState: ...

    def cpu_free(self, node: str) -> int | None: ...


# A node as the score sees it: the number of its devices' state (sorted free milli and
# models, numbered in order of appearance) and its free CPU milli. Nodes alike rate alike.
NodeState = tuple[int, int]


class Fragmentation(Policy):
    name = "fragmentation"
    candidates = 4
    free_weight: float = 0.0  # > 0: equal scores go to the node left with less free capacity
    scale: float = MILLI  # of FGD's score (`fgd_score`)

    def __init__(self) -> None:
        self.observed: Counter[TaskShape] = Counter()
        self.prior: dict[TaskShape, float] = {}
        self._scheduler: _SchedulerState | None = None
        self._pod: TaskShape | None = None  # the pod being placed (from `prepare`)
        self._mix: list[tuple[TaskShape, float]] | None = None
        self._cpu_steps: list[int] = []  # the mix's distinct CPU requests, ascending
        self._memo: dict[tuple[tuple[int, ...], int, frozenset[str]], float] = {}
        self._nodes = NodeIndex(self._node_state, self.tie_break)
        self._numbers: dict[tuple[tuple[int, ...], frozenset[str]], int] = {}
        self._devices: list[tuple[tuple[int, ...], frozenset[str]]] = []  # by number
        # pod shape -> (devices' state number, CPU level before and after) -> best rating
        self._ratings: dict[TaskShape, dict[tuple[int, int, int], float | None]] = {}
        self._known: dict[TaskShape, dict[NodeState, float | None]] = {}  # the same, by state
        self._salt: bytes
        self.reseed(0)  # the node order for equal scores: seed 0 unless a simulation reseeds

    # --- inputs ---------------------------------------------------------------------------

    def attach(self, scheduler: _SchedulerState) -> None:
        """Read consumed device capacity and free CPU from this scheduler."""
        self._scheduler = scheduler

    def reseed(self, seed: int) -> None:
        """Draw the node order for equal scores from `seed` (the simulator's run seed)."""
        self._salt = f"{seed}/".encode()
        self._nodes.forget()  # filed in the old order

    def prime(self, mix: Mapping[TaskShape, float]) -> None:
        """Use a known workload mix (counts or weights) instead of the observed one, as FGD
        uses the target workload's typical pods."""
        self.prior = {k: float(v) for k, v in mix.items() if v > 0}
        self._forget()

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        """The pod's shape: devices its unallocated claims ask for, the milli per device
        where a request asks for a `milli` capacity (else whole devices), its CPU."""
        unallocated = [c for c in claims if c.status is None or c.status.allocation is None]
        self._pod, whole = task_shape(pod, unallocated)
        # Whole devices (or none) leave a node in the one state its rank was computed for,
        # whichever devices the allocator takes: the first candidate scores its node's rank,
        # and no node ranked after it can score higher.
        self.first_only(whole and fixed_device_count(claims) is not None)

    @property
    def shape(self) -> TaskShape | None:
        """The shape of the pod being placed (set by `prepare`)."""
        return self._pod

    def observe(self, devices: int) -> None:
        pod = self._pod if self._pod is not None and self._pod.devices == devices else None
        self.observed[pod or TaskShape(devices)] += 1
        if not self.prior:
            self._forget()
        self._pod = None

    def _forget(self) -> None:
        """Draw the mix again; what was computed under it only goes if it changed (the
        shares of one observed shape, say, stay 1)."""
        before, self._mix = self._mix, None
        if self.mix() != before:
            for computed in self._computed():
                computed.clear()

    def _computed(self) -> list[dict[Any, Any]]:
        """What was computed under the mix (dropped when it changes)."""
        return [self._memo, self._ratings, self._known]

    # --- the measure ----------------------------------------------------------------------

    def mix(self) -> list[tuple[TaskShape, float]]:
        """The mix as shares: the primed one if any, else the shapes placed so far."""
        if self._mix is None:
            counts: Mapping[TaskShape, float] = self.prior or self.observed
            total = sum(counts.values())
            self._mix = [(s, n / total) for s, n in counts.items()] if total else []
            self._cpu_steps = sorted({s.cpu_milli for s, _ in self._mix})
        return self._mix

    def fragmentation(
        self, free: tuple[int, ...], cpu_free: int | None, models: frozenset[str]
    ) -> float:
        """F_n under the current mix, memoised: only the band of `cpu_free` between two of
        the mix's CPU requests can change it."""
        self.mix()
        return self._banded(free, self._band(cpu_free), models)

    def measure(self, free: tuple[int, ...], cpu_free: int | None, models: frozenset[str]) -> float:
        """What the node score compares before and after a pod (F_n here; a subclass may
        refine it), memoised like `fragmentation`."""
        self.mix()
        return self._measure(free, self._cpu_level(cpu_free), models)

    def _banded(self, free: tuple[int, ...], band: int, models: frozenset[str]) -> float:
        """F_n for free CPU anywhere in `band` (it only compares CPU with the steps)."""
        key = (free, band, models)
        got = self._memo.get(key)
        if got is None:
            steps = self._cpu_steps
            cpu = steps[band - 1] if band else (steps[0] - 1 if steps else 0)
            got = self._memo[key] = node_fragmentation(free, self.mix(), cpu, models)
        return got

    def _band(self, cpu_free: int | None) -> int:
        """How many of the mix's CPU requests `cpu_free` covers (all: None, not limited)."""
        if cpu_free is None:
            return len(self._cpu_steps)
        return bisect.bisect_right(self._cpu_steps, cpu_free)

    def _cpu_level(self, cpu_free: int | None) -> int:
        """What `_measure` needs to know of a node's free CPU: for F_n, its band. Nodes of
        one level rate alike."""
        return self._band(cpu_free)

    def free_milli(self, view: ClusterView, node: str) -> dict[DeviceRef, int]:
        """Free milli of each device of a node (1000 or 0 for exclusive use)."""
        nd = view.nodes[node]
        state = self._scheduler.allocated() if self._scheduler is not None else None
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

    def _cpu_free(self, node: str) -> int | None:
        return self._scheduler.cpu_free(node) if self._scheduler is not None else None

    def _rate(
        self,
        before: tuple[int, ...],
        options: list[tuple[int, ...]],
        levels: tuple[int, int],
        models: frozenset[str],
    ) -> float | None:
        """The best of FGD's scores for leaving a node's devices at one of `options` instead
        of `before` (its CPU level before and after the pod), less a tie-break on the capacity
        left; None: no option."""
        base = self._measure(before, levels[0], models)
        return max(
            (
                fgd_score(self._measure(after, levels[1], models) - base, self.scale)
                - self.free_weight * sum(after)
                - self._penalty(before, after)
                for after in options
            ),
            default=None,
        )

    def _penalty(self, before: tuple[int, ...], after: tuple[int, ...]) -> float:
        """What a refinement takes off the rating of leaving a node's devices at `after`
        instead of `before` (FGD: nothing)."""
        return 0.0

    def _measure(self, free: tuple[int, ...], level: int, models: frozenset[str]) -> float:
        """What the score compares before and after the pod: FGD's F_n here (a CPU level
        is a band)."""
        return self._banded(free, level, models)

    def _cpu_levels(self, node: str) -> tuple[int, int]:
        """The node's CPU level before and after the pod being placed."""
        cpu = self._cpu_free(node)
        if cpu is None:
            return self._cpu_level(None), self._cpu_level(None)
        pod_cpu = self._pod.cpu_milli if self._pod is not None else 0
        return self._cpu_level(cpu), self._cpu_level(cpu - pod_cpu)

    # --- the policy -----------------------------------------------------------------------

    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        if self._pod is None or not self.mix():  # nothing known yet: fullest first
            return sorted(nodes, key=lambda n: view.nodes[n].free())
        self._nodes.sync(view)
        return self._nodes.ranking(nodes, self._ranks(self._pod), skip)  # best rating first

    def _node_state(self, view: ClusterView, node: str) -> NodeState:
        devices = tuple(sorted(self.free_milli(view, node).values())), view.nodes[node].models
        number = self._numbers.get(devices)
        if number is None:
            number = self._numbers[devices] = len(self._devices)
            self._devices.append(devices)
        cpu = self._cpu_free(node)
        return number, _UNLIMITED if cpu is None else cpu

    def _ranks(self, pod: TaskShape) -> list[tuple[float, NodeState]]:
        """`pod`'s best rating on each node state, negated (best first); the states where it
        does not fit are left out."""
        known = self._known.setdefault(pod, {})
        if len(known) > 4 * len(self._nodes.groups) + 4096:  # mostly states no node is in
            known.clear()
        ranks = []
        for state in self._nodes.groups:
            if state not in known:
                known[state] = self._rating(pod, state)
            rated = known[state]
            if rated is not None:
                ranks.append((-rated, state))
        return ranks

    def _rating(self, pod: TaskShape, state: NodeState) -> float | None:
        """The best rating of `pod` on a node in `state`; None: it does not fit there. Only
        the CPU levels matter of its free CPU: nodes of different states share ratings."""
        number, cpu = state
        ratings = self._ratings.setdefault(pod, {})
        key = number, self._cpu_level(cpu), self._cpu_level(cpu - pod.cpu_milli)
        if key not in ratings:
            free, models = self._devices[number]
            ratings[key] = self._rate(free, placements(free, pod), key[1:], models)
        return ratings[key]

    def tie_break(self, node: str) -> int:
        """Order among nodes with equal ratings (before their names): FGD's one node order
        per run."""
        return zlib.crc32(self._salt + node.encode())

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return grouped_order(view, node, fullest_first=True)

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        free = self.free_milli(view, node)
        if all(f in (0, MILLI) for f in free.values()):
            return [self.device_order(view, node)]
        pod = self._pod
        if pod is not None and pod.shares_a_device:
            return [self._fgd_choice(view, node, free, pod)]

        def best_fit(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
            return sorted(refs, key=lambda r: free.get(r, MILLI))  # least free that fits first

        def whole_first(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
            return sorted(refs, key=lambda r: -free.get(r, 0))

        return [best_fit, whole_first]

    def _fgd_choice(
        self, view: ClusterView, node: str, free: dict[DeviceRef, int], pod: TaskShape
    ) -> DeviceOrder:
        """FGD's device for a pod sharing one: the one whose share leaves the best score
        (as `best_rating` rates the node), the least free first among equals."""
        levels, models = self._cpu_levels(node), view.nodes[node].models
        before = tuple(sorted(free.values()))
        rating = {  # devices with the same free milli rate the same: one rating per value
            f: self._rate(before, [share_from(before, f, pod.milli)], levels, models)
            for f in set(free.values())
            if f >= pod.milli
        }

        def key(ref: DeviceRef) -> tuple[float, int]:
            f = free.get(ref, MILLI)
            rated = rating.get(f) if ref in free else None
            return (-rated if rated is not None else math.inf, f)

        def order(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
            return sorted(refs, key=key)

        return order

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        free = self.free_milli(view, candidate.node)
        after = dict(free)
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
                after[ref] = max(after[ref] - (q.nanos // _NANO if q is not None else MILLI), 0)
        node = candidate.node
        rating = self._rate(
            tuple(sorted(free.values())),
            [tuple(sorted(after.values()))],
            self._cpu_levels(node),
            view.nodes[node].models,
        )
        assert rating is not None
        return rating


def task_shape(pod: Pod, claims: Sequence[ResourceClaim]) -> tuple[TaskShape, bool]:
    """FGD's task type of a pod: the devices `claims` ask for, the milli per device where a
    request asks for a `milli` capacity (else whole devices), its CPU; and whether it asks
    whole devices only."""
    devices, milli, whole = 0, MILLI, True
    for claim in claims:
        for request in claim.spec.devices.requests:
            exact = request.exactly or (
                request.first_available[0] if request.first_available else None
            )
            if exact is None:
                continue
            devices += exact.count or 1
            asked = exact.capacity.requests if exact.capacity else {}
            own = next((q.value() for k, q in asked.items() if k.endswith(MILLI_CAPACITY)), None)
            milli = milli if own is None else own
            whole = whole and own in (None, MILLI)
    cpu = pod_requests(pod).get("cpu")
    return TaskShape(devices, milli, cpu.milli_value() if cpu is not None else 0), whole
