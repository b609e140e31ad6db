"""PlacementPolicy: kubedra's placement policies (`policies/`) as a plugin.

A policy answers three questions through its own small interface, unchanged: in which
order to try the nodes that passed the filters (NodeOrder), in which order the allocator
should prefer devices on a node (a hint), and how good a candidate is (Score). It also
says how many candidates to find before choosing (Sufficient: upstream's share of nodes to
score), and learns the workload mix from every pod placed (PostBind).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from kubedra.allocator import DeviceOrder
from kubedra.api.core import Pod
from kubedra.scheduler.framework.interfaces import (
    Candidate,
    Handle,
    NodeOrderPlugin,
    PostBindPlugin,
    ScorePlugin,
    SufficientPlugin,
)
from kubedra.scheduler.framework.state import CycleState, PodInfo
from kubedra.scheduler.plugins.dra import claims_of
from kubedra.scheduler.view import ClusterView

NAME = "PlacementPolicy"


class PlacementPolicy(NodeOrderPlugin, SufficientPlugin, ScorePlugin, PostBindPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self.policy = handle.policy
        self.policy.attach(handle)

    def order(
        self, state: CycleState, info: PodInfo, nodes: Sequence[str], skip: AbstractSet[str]
    ) -> Sequence[str]:
        view = self.handle.view()
        state.write(NAME, view)
        self.policy.prepare(info.pod, claims_of(state))
        return self.policy.rank_nodes(view, nodes, skip)

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        return self.policy.device_orders(view, node)

    def sufficient(self, state: CycleState, found: Sequence[Candidate]) -> bool:
        return len(found) >= self.policy.candidates

    def score(self, state: CycleState, candidate: Candidate) -> float:
        return self.policy.score(state.read(NAME, ClusterView), candidate)

    def post_bind(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        self.policy.observe(len(candidate.refs))
