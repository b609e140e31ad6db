"""`fragmentation`: choose the placement that least increases expected GPU fragmentation.

In the spirit of "Beware of Fragmentation" (Weng et al., USENIX ATC 2023, FGD): a node's
free devices are *fragmented* for a task that needs more devices than the node has free;
the expected fragmentation of a node is the sum over the observed workload mix
(probability p_m of a task needing m devices) of its free devices that task m could not
use. Among feasible nodes, the one whose fragmentation grows least (or shrinks most) wins;
binpacking breaks ties.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kubedra.allocator import DeviceOrder
from kubedra.scheduler.policies.base import Candidate, Policy, grouped_order
from kubedra.scheduler.view import ClusterView


class Fragmentation(Policy):
    name = "fragmentation"
    candidates = 16

    def __init__(self) -> None:
        self.mix: Counter[int] = Counter()

    def observe(self, devices: int) -> None:
        if devices > 0:
            self.mix[devices] += 1

    def expected_fragmentation(self, free: int) -> float:
        """Free devices that a task drawn from the workload mix could not use."""
        total = sum(self.mix.values())
        if not total or free <= 0:
            return 0.0
        return sum(count / total * free for m, count in self.mix.items() if m > free)

    def rank_nodes(self, view: ClusterView, nodes: Sequence[str]) -> Sequence[str]:
        return sorted(nodes, key=lambda n: view.nodes[n].free())

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return grouped_order(view, node, fullest_first=True)

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        free = view.nodes[candidate.node].free()
        after = free - len(candidate.refs)
        delta = self.expected_fragmentation(after) - self.expected_fragmentation(free)
        return -delta - after / 1000.0
