"""`binpack`: fill partially used nodes and NVLink domains first, keep whole nodes free."""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.allocator import DeviceOrder
from kubedra.scheduler.policies.base import Candidate, Policy, grouped_order
from kubedra.scheduler.view import ClusterView


class Binpack(Policy):
    name = "binpack"
    candidates = 4

    def rank_nodes(self, view: ClusterView, nodes: Sequence[str]) -> Sequence[str]:
        # Fewest free devices first; whole-free nodes last (sorted is stable: names break ties).
        return sorted(nodes, key=lambda n: view.nodes[n].free())

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return grouped_order(view, node, fullest_first=True)

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        return -float(view.nodes[candidate.node].free() - len(candidate.refs))
