"""`topology`: the fewest NVLink domains, PCIe roots and NUMA nodes per pod.

Devices of one pod that share an NVLink domain talk at NVLink speed; a GPU and NIC under
one PCIe root avoid the CPU interconnect. The score counts the distinct groups the chosen
devices span at each level (NVLink weighted most), then packs as a tie-break.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.allocator import DeviceOrder
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.policies.base import Candidate, fixed_device_count, grouped_order
from kubedra.scheduler.policies.by_free import ByFreeDevices
from kubedra.scheduler.view import ClusterView

WEIGHTS = (100.0, 10.0, 1.0)  # nvlink, pcie root, numa


class Topology(ByFreeDevices):
    """Nodes tried as `binpack` tries them (fewest free devices first)."""

    name = "topology"
    candidates = 16

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        # One device spans no groups: the score is the packing tie-break alone, which falls
        # with the node's free devices, the order in which nodes are tried.
        self.first_only(fixed_device_count(claims) == 1)

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        # One try per NVLink domain (that domain first), so a pod that fits in one domain
        # is found there even when upstream order would start in another.
        domains = sorted(view.group_usage(node, 0), key=str)
        return [grouped_order(view, node, fullest_first=True, first_domain=d) for d in domains] or [
            grouped_order(view, node, fullest_first=True)
        ]

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        spans = 0.0
        for level, weight in enumerate(WEIGHTS):
            groups = {
                view.placement[r].groups[level] for r in candidate.refs if r in view.placement
            }
            groups.discard(None)
            spans += weight * max(len(groups) - 1, 0)
        leftover = view.nodes[candidate.node].free() - len(candidate.refs)
        return -spans - leftover / 1000.0
