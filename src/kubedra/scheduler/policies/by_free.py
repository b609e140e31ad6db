"""Policies that try nodes by their free devices: fewest first (`binpack`, `topology`) or
most first (`spread`), from a `NodeIndex` kept between pods."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import ClassVar

from kubedra.allocator import DeviceOrder
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.policies.base import Candidate, Policy, fixed_device_count, grouped_order
from kubedra.scheduler.policies.ranking import NodeIndex, free_devices, rank_by_free
from kubedra.scheduler.view import ClusterView


class ByFreeDevices(Policy):
    """Nodes by free devices (then name), devices by NVLink domain use, the same way round:
    `fewest_first` packs, else spreads."""

    candidates = 4
    fewest_first: ClassVar[bool] = True

    def __init__(self) -> None:
        self._free = NodeIndex(free_devices)

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        # The score follows the node's free devices the way nodes are tried: with the same
        # device count on every node the first candidate scores best.
        self.first_only(fixed_device_count(claims) is not None)

    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        return rank_by_free(self._free, view, nodes, skip, fewest_first=self.fewest_first)

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return grouped_order(view, node, fullest_first=self.fewest_first)

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        left = float(view.nodes[candidate.node].free() - len(candidate.refs))
        return -left if self.fewest_first else left
