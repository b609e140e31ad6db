"""`spread`: place on the emptiest node and domain (blast radius, thermal headroom)."""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.allocator import DeviceOrder
from kubedra.scheduler.policies.base import Candidate, Policy, grouped_order
from kubedra.scheduler.view import ClusterView


class Spread(Policy):
    name = "spread"
    candidates = 4

    def rank_nodes(self, view: ClusterView, nodes: Sequence[str]) -> Sequence[str]:
        return sorted(nodes, key=lambda n: -view.nodes[n].free())

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return grouped_order(view, node, fullest_first=False)

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        return float(view.nodes[candidate.node].free() - len(candidate.refs))
