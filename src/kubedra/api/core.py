"""The core/v1 subset the scheduler needs: Pod, Node, Namespace, and node selection types.

Pods, Nodes and Namespaces carry many fields kubedra does not model (container commands,
volumes, probes, ...). Those are valid Kubernetes, so they are kept for the round trip but
not reported as unknown (see `OPEN_STRUCTS` in the codec); only the resource.k8s.io kinds,
which kubedra models completely, report unknown fields.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from kubedra.api.meta import KubeObject, Model
from kubedra.api.quantity import Quantity

# --- node selection (also used by resource.k8s.io/v1) -------------------------------------


class NodeSelectorRequirement(Model):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class NodeSelectorTerm(Model):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(Model):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class PreferredSchedulingTerm(Model):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(Model):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class Affinity(Model):
    node_affinity: NodeAffinity | None = None


class Toleration(Model):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class Taint(Model):
    key: str
    effect: str
    value: str | None = None
    time_added: str | None = None


# --- Pod ----------------------------------------------------------------------------------


class ResourceClaimRef(Model):
    """`containers[].resources.claims[]`: which pod claim (and optionally which request)."""

    name: str
    request: str | None = None


class ResourceRequirements(Model):
    requests: dict[str, Quantity] = msgspec.field(default_factory=dict)
    limits: dict[str, Quantity] = msgspec.field(default_factory=dict)
    claims: tuple[ResourceClaimRef, ...] = ()


class Container(Model):
    name: str
    image: str | None = None
    resources: ResourceRequirements | None = None


class PodResourceClaim(Model):
    """`spec.resourceClaims[]`: a claim by name, or a template to generate one per pod."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSpec(Model):
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    node_name: str | None = None
    scheduler_name: str | None = None
    priority: int | None = None
    priority_class_name: str | None = None


class PodCondition(Model):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None


class PodResourceClaimStatus(Model):
    name: str
    resource_claim_name: str | None = None


class ContainerExtendedResourceRequest(Model):
    """Which request of the extended-resource claim serves a container's resource."""

    container_name: str
    resource_name: str
    request_name: str


class PodExtendedResourceClaimStatus(Model):
    """The claim the scheduler made for the pod's DRA-backed extended resources."""

    request_mappings: tuple[ContainerExtendedResourceRequest, ...] = ()
    resource_claim_name: str = ""


class PodStatus(Model):
    phase: str | None = None
    conditions: tuple[PodCondition, ...] = ()
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None


ENDED_PHASES = ("Succeeded", "Failed")


class Pod(KubeObject):
    API_GROUP: ClassVar[str] = ""
    KIND: ClassVar[str] = "Pod"
    NAMESPACED: ClassVar[bool] = True

    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus | None = None


# --- Node and Namespace -------------------------------------------------------------------


class NodeSpec(Model):
    taints: tuple[Taint, ...] = ()
    unschedulable: bool | None = None


class NodeCondition(Model):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None


class NodeStatus(Model):
    capacity: dict[str, Quantity] = msgspec.field(default_factory=dict)
    allocatable: dict[str, Quantity] = msgspec.field(default_factory=dict)
    conditions: tuple[NodeCondition, ...] = ()


class Node(KubeObject):
    API_GROUP: ClassVar[str] = ""
    KIND: ClassVar[str] = "Node"
    NAMESPACED: ClassVar[bool] = False

    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class Namespace(KubeObject):
    API_GROUP: ClassVar[str] = ""
    KIND: ClassVar[str] = "Namespace"
    NAMESPACED: ClassVar[bool] = False


def pod_runs(pod: Pod | None) -> bool:
    """Not ended and not being deleted: the pod still holds what it was given."""
    if pod is None or pod.metadata.deletion_timestamp:
        return False
    return pod.status is None or pod.status.phase not in ENDED_PHASES
