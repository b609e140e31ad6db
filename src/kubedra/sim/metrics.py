"""What the simulator measures, kept apart from the scheduler (so it checks it too).

`ClusterState` mirrors each node's free CPU, memory and per-GPU free milli from the
placements the scheduler reports. `FragMeter` is the FGD paper's fragmentation measure: for
a node n and a task type m of the target workload, F_n(m) is the node's free GPU-milli that m
cannot use: all of it when m cannot run on n at all (not enough CPU, too few GPUs with enough
free milli, a GPU model m does not accept; a task that asks for no GPU leaves all of it
idle), otherwise the free milli of the GPUs whose free milli is below m's per-GPU milli. The
cluster's fragmentation is sum_n sum_m p_m F_n(m), p_m the share of type m in the workload
(upstream: `NodeGpuShareFragAmount`, `FragAmountSumExceptQ3`). The measure itself is the one
the `fragmentation` policy descends on (`node_fragmentation`); the state it is applied to is
kept here, apart from the scheduler's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from kubedra.scheduler.policies.fragmentation import Mix, TaskShape, node_fragmentation
from kubedra.sim.convert import task_shape
from kubedra.sim.trace import MILLI, NodeSpec, TaskSpec

DRA_SHAPE: Callable[[TaskSpec], TaskShape] = partial(task_shape, mode="dra")


@dataclass
class NodeState:
    spec: NodeSpec
    cpu_free: int
    memory_free: int
    gpu_free: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Placement:
    task: TaskSpec
    node: str
    gpus: tuple[int, ...]  # device indices
    milli_each: int  # GPU-milli held on each of them


class ClusterState:
    """Free resources per node, updated by `place` and `remove`."""

    def __init__(self, nodes: Iterable[NodeSpec]) -> None:
        self.nodes: dict[str, NodeState] = {
            n.name: NodeState(n, n.cpu_milli, n.memory_mib, [MILLI] * n.gpus) for n in nodes
        }
        self.capacity_milli = sum(len(s.gpu_free) for s in self.nodes.values()) * MILLI
        self.allocated_milli = 0  # GPU demand of the placed tasks (what they asked for)
        self.reserved_milli = 0  # GPU-milli the placements hold (more under device-plugin)
        self.changed: set[str] = set(self.nodes)

    def place(self, p: Placement) -> None:
        state = self.nodes[p.node]
        state.cpu_free -= p.task.cpu_milli
        state.memory_free -= p.task.memory_mib
        for g in p.gpus:
            state.gpu_free[g] -= p.milli_each
            if state.gpu_free[g] < 0:
                raise AssertionError(f"{p.node} gpu-{g} over-allocated by {p.task.name}")
        self.allocated_milli += p.task.demand_milli
        self.reserved_milli += p.milli_each * len(p.gpus)
        self.changed.add(p.node)

    def remove(self, p: Placement) -> None:
        state = self.nodes[p.node]
        state.cpu_free += p.task.cpu_milli
        state.memory_free += p.task.memory_mib
        for g in p.gpus:
            state.gpu_free[g] += p.milli_each
        self.allocated_milli -= p.task.demand_milli
        self.reserved_milli -= p.milli_each * len(p.gpus)
        self.changed.add(p.node)

    @property
    def allocation_ratio(self) -> float:
        """Allocated GPU demand / GPU capacity (FGD's 'GPU allocation ratio'), 0..1."""
        return self.allocated_milli / self.capacity_milli if self.capacity_milli else 0.0

    def idle_gpus(self) -> int:
        return sum(g == MILLI for s in self.nodes.values() for g in s.gpu_free)


def typical_types(
    tasks: Sequence[TaskSpec],
    threshold: float = 1.0,
    shape: Callable[[TaskSpec], TaskShape] = DRA_SHAPE,
) -> list[tuple[TaskShape, float]]:
    """Task types and their shares; with `threshold` < 1 only the most popular types that
    cover that share of tasks, renormalised (upstream's typical pods; 1.0 keeps all)."""
    counts = sorted(
        Counter(shape(t) for t in tasks).items(),
        key=lambda kv: (-kv[1], kv[0].cpu_milli, kv[0].devices, kv[0].milli, sorted(kv[0].models)),
    )
    total = sum(c for _, c in counts)
    chosen, covered = [], 0
    for key, c in counts:
        if covered >= threshold * total:
            break
        chosen.append((key, c))
        covered += c
    return [(k, c / covered) for k, c in chosen]


class FragMeter:
    """Cluster fragmentation, recomputed only for the nodes that changed."""

    def __init__(self, state: ClusterState, types: Mix) -> None:
        self.state = state
        self.types = list(types)
        self._per_node: dict[str, float] = {}

    def total_milli(self) -> float:
        for name in self.state.changed:
            s = self.state.nodes[name]
            models = frozenset((s.spec.model,)) if s.spec.model else frozenset()
            self._per_node[name] = node_fragmentation(s.gpu_free, self.types, s.cpu_free, models)
        self.state.changed.clear()
        # fsum: exactly rounded, so the total does not depend on the order the nodes changed
        # in (a set's order, which varies with the process's string hash seed).
        return math.fsum(self._per_node.values())

    def ratio(self) -> float:
        """Fragmented GPU-milli / GPU capacity, 0..1 (FGD's 'fragmented GPU %' / 100)."""
        cap = self.state.capacity_milli
        return self.total_milli() / cap if cap else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(-(-q * len(ordered) // 100)) - 1))
    return float(ordered[k])
