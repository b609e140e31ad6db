"""NodeAffinity: the filters a pod's node constraints alone decide (upstream's NodeName,
NodeUnschedulable, NodeAffinity and TaintToleration plugins): `spec.nodeName`, a cordoned
node, `nodeSelector`, required node affinity, and NoSchedule/NoExecute taints the pod does
not tolerate (`nodes.py` holds the checks). The verdicts depend on the pod's constraints and
the nodes only, so the list of nodes that pass is kept per constraints until a node
changes; the message counts these nodes under one reason, as kubedra always has.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from kubedra.api.core import Pod
from kubedra.scheduler.framework.interfaces import (
    ClusterEvents,
    FilterPlugin,
    Handle,
    PreFilterPlugin,
)
from kubedra.scheduler.framework.state import CycleState, Diagnosis, PodInfo
from kubedra.scheduler.nodes import filter_node

REASON = "node(s) didn't match Pod's node affinity/selector or taints"


class NodeAffinity(PreFilterPlugin, FilterPlugin, ClusterEvents):
    name = "NodeAffinity"

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self._static: dict[bytes, list[str]] = {}  # constraints -> the nodes that pass

    def pre_filter(self, state: CycleState, info: PodInfo) -> None:
        pass

    def signature(self, state: CycleState, info: PodInfo) -> bytes:
        return info.constraints

    def filter(
        self, state: CycleState, info: PodInfo, nodes: Sequence[str], diagnosis: Diagnosis
    ) -> Sequence[str]:
        static = self.static_nodes(info.pod, info.constraints)
        excluded = diagnosis.total - len(static)
        if excluded:
            diagnosis.add(REASON, excluded)
        if nodes is not self.handle.node_names():  # narrowed before the filters
            keep = set(nodes)
            return [name for name in static if name in keep]
        return static  # the kept list itself: later filters keep verdicts per list

    def static_nodes(self, pod: Pod, constraints: bytes) -> list[str]:
        """The owned nodes a pod may go to by its node constraints alone (kept)."""
        static = self._static.get(constraints)
        if static is None:
            bare = msgspec.structs.replace(
                pod, spec=msgspec.structs.replace(pod.spec, containers=(), init_containers=())
            )
            static = [
                node.name
                for node in self.handle.node_map().values()
                if filter_node(bare, node, {}).fits
            ]
            self._static[constraints] = static
        return static

    def nodes_changed(self) -> None:
        self._static.clear()
