"""`binpack`: fill partially used nodes and NVLink domains first, keep whole nodes free."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from kubedra.allocator import DeviceOrder
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.policies.base import Candidate, Policy, fixed_device_count, grouped_order
from kubedra.scheduler.policies.ranking import NodeIndex, free_devices, rank_by_free
from kubedra.scheduler.view import ClusterView


class Binpack(Policy):
    name = "binpack"
    candidates = 4

    def __init__(self) -> None:
        self._free = NodeIndex(free_devices)

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        # The score falls with the node's free devices, the order in which nodes are tried:
        # with the same device count everywhere the first candidate scores best.
        self.first_only(fixed_device_count(claims) is not None)

    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        # Fewest free devices first; whole-free nodes last (names break ties).
        return rank_by_free(self._free, view, nodes, skip, fewest_first=True)

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return grouped_order(view, node, fullest_first=True)

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        return -float(view.nodes[candidate.node].free() - len(candidate.refs))
