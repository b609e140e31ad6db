"""Experiments past FGD: `fragmentation` with one rule changed, over seeds of the default trace.

    python -m bench.fgd_variants POLICY SEEDS [JOBS [POD_LIST]]   e.g. x-look 42,43,44,45 2
    python -m bench.fgd_variants --leftovers POLICY SEED            where the free capacity sits,
                                                                    and the least any packing
                                                                    of the placed shares leaves

prints one JSON line per seed (unallocated GPU % at 100 and 130 % arrived, CPU seconds)
and the mean ± sd. The variants register under `x-` names when this module is imported;
they are experiments for docs/results.md ("Past FGD"), not policies of the tree.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from kubedra.allocator import DeviceOrder, DeviceRef, RequestKey
from kubedra.scheduler.policies.base import Candidate
from kubedra.scheduler.policies.fragmentation import (
    MILLI,
    Fragmentation,
    NodeState,
    TaskShape,
    placements,
    share_from,
    taken_from,
)
from kubedra.scheduler.policies.fragmentation_lookahead import FragmentationLookahead
from kubedra.scheduler.policies.fragmentation_priced import FragmentationPriced
from kubedra.scheduler.policies.pricing import share_prices
from kubedra.scheduler.view import ClusterView
from kubedra.sim import engine
from kubedra.sim.cli import Job, _execute, _prepare
from kubedra.sim.trace import OPENB_DIR, TaskSpec

Free = tuple[int, ...]


class ExactChange(Fragmentation):
    """Rank by the exact fragmentation change, not FGD's integer score."""

    name = "x-exact"

    def _rate(
        self, before: Free, options: list[Free], levels: tuple[int, int], models: frozenset[str]
    ) -> float | None:
        base = self._banded(before, levels[0], models)
        return max((base - self._banded(a, levels[1], models) for a in options), default=None)


class LowestIndex(Fragmentation):
    """Among a node's equally rated GPUs, the lowest index (FGD's own choice), not the
    least free."""

    name = "x-lowidx"

    def _fgd_choice(
        self, view: ClusterView, node: str, free: dict[DeviceRef, int], pod: TaskShape
    ) -> DeviceOrder:
        levels, models = self._cpu_levels(node), view.nodes[node].models
        before = tuple(sorted(free.values()))
        rating = {
            f: self._rate(before, [share_from(before, f, pod.milli)], levels, models)
            for f in set(free.values())
            if f >= pod.milli
        }

        def key(ref: DeviceRef) -> float:
            rated = rating.get(free.get(ref, MILLI)) if ref in free else None
            return -rated if rated is not None else math.inf

        def order(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
            return sorted(refs, key=key)  # stable: upstream (index) order among equals

        return order


class Softer(Fragmentation):
    """FGD's score on a coarser scale: 100·σ(−ΔF/2000), more changes score alike."""

    name = "x-t2000"
    scale = 2000.0


class _Look(FragmentationLookahead):
    """`fragmentation-lookahead` with its knobs: `depth` arrivals ahead, V_k(s) = V_k-1(s)
    + weight · E[gain of the next task under V_k-1]; `cpu` False: the next task's CPU is
    not counted (the node keeps its CPU). Rated at the exact free CPU (deeper looks tell
    more CPU values apart than the policy's levels)."""

    weight, depth, cpu = 1.0, 1, True

    def __init__(self) -> None:
        super().__init__()
        self._deep: dict[tuple[Free, int, frozenset[str], int], float] = {}

    def _computed(self) -> list[dict[Any, Any]]:
        return [*super()._computed(), self._deep]

    def _cpu_level(self, cpu_free: int | None) -> int:
        return 1 << 62 if cpu_free is None else cpu_free

    def _level_cpu(self, level: int) -> int:
        return level

    def _measure(self, free: Free, level: int, models: frozenset[str]) -> float:
        return self._v(free, level, models, self.depth)

    def _v(self, free: Free, cpu: int, models: frozenset[str], depth: int) -> float:
        if depth == 0:
            return self._f_at(free, cpu, models)
        key = (free, cpu, models, depth)
        got = self._deep.get(key)
        if got is None:

            def inner(f: Free, c: int, m: frozenset[str]) -> float:
                return self._v(f, c, m, depth - 1)

            gain = self._expected_gain(free, cpu, models, inner)
            got = self._deep[key] = inner(free, cpu, models) + self.weight * gain
        return got

    def _cpu_after(self, cpu: int, task_cpu: int) -> int | None:
        return super()._cpu_after(cpu, task_cpu) if self.cpu else cpu


class LookAhead(_Look):
    """The first look-ahead: the next task's CPU not counted."""

    name, cpu = "x-look", False


class LookAheadWeighted(_Look):
    name, cpu, weight = "x-look-l2", False, 2.0


class LookAheadDeep(_Look):
    name, cpu, depth = "x-look-d2", False, 2


class LookCpuD2(_Look):
    name, depth = "x-lc-d2", 2


class LookCpuL05(_Look):
    name, weight = "x-lc-l05", 0.5


class LookCpuT500(_Look):
    name, scale = "x-lc-t500", 500.0


class LookCpuT2000(_Look):
    name, scale = "x-lc-t2000", 2000.0


class LookBandCpu(_Look):
    """The look-ahead as first committed: the next task's CPU taken off the least CPU of
    the node's band (so nodes of one band rate alike), not off its own free CPU."""

    name = "x-lc-band"

    def _v(self, free: Free, cpu: int, models: frozenset[str], depth: int) -> float:
        steps = self._cpu_steps
        band = self._band(cpu)
        least = 1 << 62 if band == len(steps) else (steps[band - 1] if band else 0)
        return super()._v(free, least, models, depth)


class LookUnclipped(FragmentationLookahead):
    """The look-ahead without the clip at 0: V(s) = F(s) + sum_m p_m (min_a F(a) - F(s)),
    the expected F after the next task's best placement (a next task that would raise F
    counts against the state too)."""

    name = "x-lc-noclip"

    def _taken_back(self, best: float) -> float:
        return best


class SumOfSquares(FragmentationLookahead):
    """The look-ahead, its ratings of a pod sharing a GPU less `ss_weight` times the change
    of the cluster's sum of squared gap counts (Csirik et al.'s Sum-of-Squares bin packing:
    N(g) partly used GPUs with g milli free; a share that makes a gap common is marked down,
    one that fills a common gap up). Distribution-free: it keeps complements available."""

    name = "x-ss"
    ss_weight = 1e-4  # below one score point for any count: breaks ties only

    def __init__(self) -> None:
        super().__init__()
        self._gaps: Counter[int] = Counter()

    def _ranks(self, pod: TaskShape) -> list[tuple[float, NodeState]]:
        if pod.shares_a_device:  # the gap counts change with every pod: rate afresh
            self._gaps = self._gap_counts()
            self._known.pop(pod, None)
            self._ratings.pop(pod, None)
        return super()._ranks(pod)

    def _gap_counts(self) -> Counter[int]:
        gaps: Counter[int] = Counter()
        for (number, _), entries in self._nodes.groups.items():
            for f in self._devices[number][0]:
                if 0 < f < MILLI:
                    gaps[f] += len(entries)
        return gaps

    def _penalty(self, before: tuple[int, ...], after: tuple[int, ...]) -> float:
        pod = self._pod
        if pod is None or not pod.shares_a_device:
            return 0.0
        gap = taken_from(before, after)
        return self.ss_weight * self._ss(gap, gap - pod.milli)

    def _ss(self, g1: int, g2: int) -> float:
        """The change of sum N(g)^2 when one GPU goes from a gap of g1 milli to g2."""
        n = self._gaps
        return (2 * n[g2] + 1 if 0 < g2 < MILLI else 0) - (2 * n[g1] - 1 if 0 < g1 < MILLI else 0)


class SumOfSquaresW(SumOfSquares):
    name, ss_weight = "x-ss-w01", 0.01


class SumOfSquaresW1(SumOfSquares):
    name, ss_weight = "x-ss-w1", 0.1


class PricedWeak(FragmentationPriced):
    """The priced policy, the loss at a twentieth of a score point per milli (mixed with
    the look-ahead's score instead of deciding)."""

    name, loss_weight = "x-priced-w005", 0.05


class PricedFgd(FragmentationPriced):
    """The prices on FGD's own measure (no look-ahead)."""

    name = "x-priced-fgd"

    def _measure(self, free: Free, level: int, models: frozenset[str]) -> float:
        return Fragmentation._measure(self, free, level, models)

    def _cpu_level(self, cpu_free: int | None) -> int:
        return Fragmentation._cpu_level(self, cpu_free)


class _CpuTie(Fragmentation):
    """FGD's score, then a CPU rule among equal scores (before the node order)."""

    eps = 1e-6

    def tie_term(self, cpu_after: int, free_after: int) -> float:
        raise NotImplementedError

    def _rating(self, pod: TaskShape, state: NodeState) -> float | None:
        rated = super()._rating(pod, state)
        if rated is None:
            return None
        number, cpu = state
        free, _ = self._devices[number]
        after = placements(free, pod)
        left = sum(after[0]) if after else 0
        return rated - self.eps * self.tie_term(cpu - pod.cpu_milli, left)

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        pod = self._pod
        cpu = self._cpu_free(candidate.node)
        cpu_after = (1 << 40 if cpu is None else cpu) - (pod.cpu_milli if pod else 0)
        left = sum(self.free_milli(view, candidate.node).values()) - (
            pod.devices * pod.milli if pod else 0
        )
        return super().score(view, candidate) - self.eps * self.tie_term(cpu_after, left)


class CpuPack(_CpuTie):
    """Equal scores: the node left with the least free CPU."""

    name = "x-cpupack"

    def tie_term(self, cpu_after: int, free_after: int) -> float:
        return min(cpu_after, 1 << 30) / 1000.0


class CpuRatio(_CpuTie):
    """Equal scores: the node whose free CPU per free GPU milli after the pod is closest to
    the mix's."""

    name = "x-cpuratio"

    def tie_term(self, cpu_after: int, free_after: int) -> float:
        mix = [(s, p) for s, p in self.mix() if s.devices]
        want = sum(p * s.cpu_milli for s, p in mix) / max(
            sum(p * s.devices * s.milli for s, p in mix), 1
        )
        have = min(cpu_after, 1 << 30) / max(free_after, 1)
        return abs(have - want) * 1000.0


class Online(Fragmentation):
    """Not primed: the mix is the shapes placed so far that cover 95 % of them (FGD's typical
    pods, learnt online), drawn again after each of the first 64 pods, then every 64."""

    name = "x-online"

    def prime(self, mix: Mapping[TaskShape, float]) -> None:
        pass  # the scheduler's case: no trace known in advance

    def observe(self, devices: int) -> None:
        pod = self._pod if self._pod is not None and self._pod.devices == devices else None
        self.observed[pod or TaskShape(devices)] += 1
        placed = sum(self.observed.values())
        if placed <= 64 or placed % 64 == 0:
            self._forget()
        self._pod = None

    def mix(self) -> list[tuple[TaskShape, float]]:
        if self._mix is None:
            counts = sorted(self.observed.items(), key=lambda kv: -kv[1])
            total, covered, chosen = sum(c for _, c in counts), 0, []
            for shape, count in counts:
                if covered >= 0.95 * total:
                    break
                chosen.append((shape, count))
                covered += count
            self._mix = [(s, c / covered) for s, c in chosen] if covered else []
            self._cpu_steps = sorted({s.cpu_milli for s, _ in self._mix})
        return self._mix


class PricedOnline(FragmentationPriced, Online):
    """`fragmentation-priced` not primed: the mix (and so the prices) learnt online as
    `x-online` learns it."""

    name = "x-priced-online"


def _job(policy: str, seed: int, stem: str, max_pods: int | None = None) -> Job:
    """FGD's experiment on the Alibaba cluster: arrivals up to 130 % of its GPUs."""
    nodes, pods = OPENB_DIR / "openb_node_list_gpu_node.csv", OPENB_DIR / f"{stem}.csv"
    return Job(str(nodes), str(pods), policy, seed, "saturate", max_pods, 1.3, False)


def one(
    policy: str, seed: int, max_pods: int | None = None, stem: str = "openb_pod_list_default"
) -> dict[str, Any]:
    # FGD_TYPICAL_SHARE: prime with the task types covering this share of the pods
    engine.TYPICAL_SHARE = float(os.environ.get("FGD_TYPICAL_SHARE", engine.TYPICAL_SHARE))
    start = time.process_time()
    r = _execute(_job(policy, seed, stem, max_pods))
    return {
        "policy": policy,
        "seed": seed,
        "unalloc100": 100 - r.summary["alloc_at_100"],
        "unalloc130": 100 - r.summary["alloc_at_130"],
        "cpu_s": round(time.process_time() - start, 1),
        "wall_s": round(r.wall_s, 1),
    }


def leftovers(policy: str, seed: int, stem: str = "openb_pod_list_default") -> dict[str, float]:
    """Where the GPU capacity left free at the end of a saturate run sits (% of all GPUs):
    whole GPUs, parts of GPUs by the node's free CPU, the 150-199-milli parts, and the floor
    the 810-milli type leaves (its 190-milli remainders less what the types of 190 milli or
    less placed could fill)."""
    cluster, workload, arrivals = _prepare(_job(policy, seed, stem))
    with engine.simulation(cluster, policy, target=workload.tasks, seed=seed) as sim:
        names = sim.submit_all(arrivals.tasks)
        sim.scheduler.refresh()
        for _ in names:
            pod = sim.scheduler.queue.pop()
            assert pod is not None
            outcome = sim.scheduler.schedule(pod)
            if outcome.node is not None:
                sim.record(outcome)
        least_cpu = min(t.cpu_milli for t in workload.tasks if t.num_gpu)
        cap, out = sim.state.capacity_milli / 100, dict.fromkeys(_LEFTOVERS, 0.0)
        for node in sim.state.nodes.values():
            cpu = node.cpu_free
            band = "short" if cpu < least_cpu else "1-8" if cpu < 8000 else "8+"
            for free in node.gpu_free:
                out["whole"] += free / cap if free == MILLI else 0.0
                out[f"part, cpu {band}"] += free / cap if 0 < free < MILLI else 0.0
                out["part 150-199"] += free / cap if 150 <= free < 200 else 0.0
        placed = [p.task for p in sim.placements.values() if p.task.num_gpu == 1]
        holes = sum(MILLI - t.gpu_milli for t in placed if t.gpu_milli == 810)
        small = sum(t.gpu_milli for t in placed if t.gpu_milli <= 190)
        out["floor of the 810 type"] = (holes - small) / cap
        out["least any packing of the placed shares leaves (LP)"] = _least_idle(placed) / cap
    out["unallocated"] = sum(v for k, v in out.items() if k == "whole" or k.startswith("part,"))
    return out


def _least_idle(placed: Sequence[TaskSpec]) -> float:
    """The GPU milli the best fractional packing of these one-GPU shares leaves idle on the
    GPUs it uses (nodes and CPU set aside: a lower bound for any placement of them): the
    cutting-stock LP's optimum, which its duals give (strong duality)."""
    counts = Counter(t.gpu_milli for t in placed if 0 < t.gpu_milli < MILLI)
    prices = share_prices({m: float(n) for m, n in counts.items()}, MILLI)
    return sum(n * (prices.price[m] - m) for m, n in counts.items())


_LEFTOVERS = ("whole", "part, cpu short", "part, cpu 1-8", "part, cpu 8+", "part 150-199")


def _one(args: tuple[str, int, str]) -> dict[str, Any]:
    return one(args[0], args[1], None, args[2])


if __name__ == "__main__" and sys.argv[1] == "--leftovers":  # --leftovers POLICY SEED
    for key, value in leftovers(sys.argv[2], int(sys.argv[3])).items():
        print(f"{key}: {value:.2f} %")
elif __name__ == "__main__":
    name, seeds = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
    with ProcessPoolExecutor(int(sys.argv[3]) if len(sys.argv) > 3 else 1) as pool:
        stem = sys.argv[4] if len(sys.argv) > 4 else "openb_pod_list_default"
        results = list(pool.map(_one, [(name, s, stem) for s in seeds]))
    for line in results:
        print(json.dumps(line))
    values = [r["unalloc130"] for r in results]
    spread = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    print(f"{name}: unallocated at 130 % arrived {statistics.mean(values):.2f}{spread}")
