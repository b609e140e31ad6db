"""NodeResourcesFit: CPU, memory and extended resources against what a node has left.

Upstream's plugin of the same name: a pod's effective requests must fit in the node's
allocatable less what the pods bound there request. CPU and memory verdicts are kept
between pods (`room.py`: only the node a pod was placed on changes); a pod that asks for
extended resources is checked node by node, where a resource a DeviceClass serves passes
on nodes that do not declare it (ExtendedResources asks DRA for it). Reserve counts the
pod's requests on its node at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kubedra.api.core import Node, Pod
from kubedra.api.quantity import Quantity
from kubedra.scheduler.claims import extended_resource_classes
from kubedra.scheduler.framework.interfaces import (
    Candidate,
    FilterPlugin,
    Handle,
    PreFilterPlugin,
    ReservePlugin,
)
from kubedra.scheduler.framework.state import CycleState, Diagnosis, PodInfo
from kubedra.scheduler.nodes import (
    NodeFit,
    asks_node_resources,
    filter_node,
    is_extended_resource,
    shortfall,
)
from kubedra.scheduler.room import Room


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = "NodeResourcesFit"

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self.room = Room()  # what nodes have left for pod requests, and what fits

    def pre_filter(self, state: CycleState, info: PodInfo) -> None:
        pass

    def signature(self, state: CycleState, info: PodInfo) -> bytes:
        return msgspec.json.encode(info.requests, enc_hook=str)

    def filter(
        self, state: CycleState, info: PodInfo, nodes: Sequence[str], diagnosis: Diagnosis
    ) -> Sequence[str]:
        needs = info.requests
        if not asks_node_resources(needs):
            return nodes
        node_map = self.handle.node_map()
        if any(is_extended_resource(name) for name in needs):
            # Extended resources: node by node (rare; the kept room covers CPU and memory).
            usage, fitting = self.handle.node_usage(), []
            for name in nodes:
                fit = self.node_fit(info.pod, node_map[name], usage.get(name, {}))
                if fit.fits:
                    fitting.append(name)
                else:
                    diagnosis.add(fit.reason)
            return fitting
        # The node filters before passed already: only CPU and memory are left to check.
        wants = info.wanted
        self.room.sync(node_map, self.handle.node_usage())
        if state.scope is None:
            return self.room.fitting(info.constraints, nodes, wants, diagnosis.reasons)
        fitting = []
        for name in nodes:
            reason = shortfall(wants, self.room.left(name))
            if reason:
                diagnosis.add(reason)
            else:
                fitting.append(name)
        return fitting

    def node_fit(self, pod: Pod, node: Node, used: Mapping[str, Quantity]) -> NodeFit:
        """The non-DRA filters for `pod` on `node` (extended resources that DeviceClasses
        map are left to the allocator)."""
        served = extended_resource_classes(self.handle.classes().values())
        return filter_node(pod, node, used, served)

    def reserve(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        if self.handle.add_usage(candidate.node, pod):
            self.room.changed(candidate.node)
        self.handle.touch(candidate.node)  # policies re-read what pods use there
