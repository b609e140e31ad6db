"""The in-tree plugins, each owning one concern, and the default profile.

    PrioritySort       queue order: priority, then age
    NodeAffinity       nodeName, cordons, selectors, required affinity, taints
    NodeResourcesFit   CPU, memory, extended resources; counts a placed pod's requests
    ExtendedResources  extended resources served by DeviceClasses, as a DRA claim
    DynamicResources   ResourceClaims: resolved (templates), allocated, assumed, written,
                       released (`dra/`)
    PlacementPolicy    the placement policy (`policies/`): node order, device order, score
    GangScheduling     PodGroups: a gang all or nothing, a group in one topology domain
                       (`gang/`)
    DefaultBinder      pods/binding

The profile's order is the order plugins run at every extension point. A gang plugin
(PodGroups: PreEnqueue until a gang's pods exist, Permit holding each reserved pod until
all are, topology Filter/Score for where a gang fits) is added by registering it and
naming it in the profile, before DynamicResources: GangScheduling is that plugin.
"""

from __future__ import annotations

from kubedra.scheduler.framework.registry import PluginFactory
from kubedra.scheduler.plugins.binder import DefaultBinder
from kubedra.scheduler.plugins.dra import DynamicResources
from kubedra.scheduler.plugins.extended_resources import ExtendedResources
from kubedra.scheduler.plugins.gang import GangScheduling
from kubedra.scheduler.plugins.node_affinity import NodeAffinity
from kubedra.scheduler.plugins.node_resources import NodeResourcesFit
from kubedra.scheduler.plugins.placement import PlacementPolicy
from kubedra.scheduler.plugins.queue_sort import PrioritySort

IN_TREE: dict[str, PluginFactory] = {
    cls.name: cls
    for cls in (
        PrioritySort,
        NodeAffinity,
        NodeResourcesFit,
        ExtendedResources,
        GangScheduling,
        DynamicResources,
        PlacementPolicy,
        DefaultBinder,
    )
}
DEFAULT_PROFILE: tuple[str, ...] = (
    "PrioritySort",
    "NodeAffinity",
    "NodeResourcesFit",
    "ExtendedResources",
    "GangScheduling",
    "DynamicResources",
    "PlacementPolicy",
    "DefaultBinder",
)

__all__ = ["DEFAULT_PROFILE", "IN_TREE"]
