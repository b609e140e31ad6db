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
    """One test on a node: a label (or, in `matchFields`, a field) compared with a list of
    values by an operator."""

    key: str
    """The label key to test; in `matchFields` the node field, of which only
    `metadata.name` is supported."""
    operator: str
    """How the key's value is compared: `In` and `NotIn` (with one or more values),
    `Exists` and `DoesNotExist` (with no values), `Gt` and `Lt` (with a single integer
    value)."""
    values: tuple[str, ...] = ()
    """The values the operator compares against; its count depends on the operator (see
    `operator`)."""


class NodeSelectorTerm(Model):
    """A set of node requirements that must all hold (AND). An empty term matches no
    node."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    """Requirements on the node's labels."""
    match_fields: tuple[NodeSelectorRequirement, ...] = ()
    """Requirements on the node's fields; only `metadata.name` can be tested."""


class NodeSelector(Model):
    """Picks nodes by label or field: a node matches when at least one of the terms does
    (the terms are ORed)."""

    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()
    """Alternative terms; a node qualifies if it satisfies any one of them. Must not be
    empty."""


class PreferredSchedulingTerm(Model):
    """A node preference with a weight: nodes that match the term score the weight extra."""

    weight: int
    """How much a match counts, from 1 to 100; the scheduler adds the weights of all
    matching terms to a node's score."""
    preference: NodeSelectorTerm
    """The term a node must satisfy to earn the weight."""


class NodeAffinity(Model):
    """Rules that attract the pod to nodes with certain labels or fields, either as a hard
    requirement or as a scored preference."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    """Nodes the pod may be scheduled to; a node that matches none of the terms is
    filtered out. Label changes after the pod is bound do not evict it."""
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()
    """Soft preferences: the scheduler favours nodes whose matching terms add up to the
    largest weight, but may still pick a node that matches none."""


class Affinity(Model):
    """The pod's affinity rules. kubedra reads node affinity; pod affinity and
    anti-affinity are kept as written."""

    node_affinity: NodeAffinity | None = None
    """Which nodes the pod must or would rather run on, by node labels and fields."""


class Toleration(Model):
    """Lets a pod be scheduled onto (or keep running on) a node whose taint it matches."""

    key: str | None = None
    """The taint key this toleration matches. Empty matches every key, which requires
    operator `Exists`."""
    operator: str | None = None
    """`Equal` (the default: the taint's value must equal `value`) or `Exists` (any value
    of the key matches; `value` must then be empty)."""
    value: str | None = None
    """The taint value to match when the operator is `Equal`."""
    effect: str | None = None
    """The taint effect to match: `NoSchedule`, `PreferNoSchedule` or `NoExecute`. Empty
    matches every effect."""
    toleration_seconds: int | None = None
    """For `NoExecute` taints only: how many seconds the pod may keep running after the
    taint appears before it is evicted. Unset means it stays forever; zero or less
    means it is evicted at once."""


class Taint(Model):
    """A mark on a node that keeps away pods which do not tolerate it."""

    key: str
    """The taint's key: a label-style name with an optional DNS-subdomain prefix."""
    effect: str
    """What happens to pods that do not tolerate the taint: `NoSchedule` (not scheduled
    there), `PreferNoSchedule` (avoided if possible) or `NoExecute` (also evicted if
    already running)."""
    value: str | None = None
    """An optional value for the key, at most 63 characters."""
    time_added: str | None = None
    """When the taint was added (RFC 3339). Recorded for `NoExecute` taints, whose
    eviction timing depends on it."""


# --- Pod ----------------------------------------------------------------------------------


class ResourceClaimRef(Model):
    """`containers[].resources.claims[]`: which pod claim (and optionally which request)."""

    name: str
    """The name of an entry in the pod's `spec.resourceClaims`; the container gets access
    to what that claim allocated."""
    request: str | None = None
    """Limits the container to the devices of one request of the claim (its name). Empty
    gives the container every device of the claim."""


class ResourceRequirements(Model):
    """The compute resources a container asks for and may use, and the DRA claims it
    uses."""

    requests: dict[str, Quantity] = msgspec.field(default_factory=dict)
    """The minimum amount of each resource (`cpu`, `memory`, an extended resource such as
    `nvidia.com/gpu`) that the node must have free for the container. Defaults to
    `limits` where only a limit is given."""
    limits: dict[str, Quantity] = msgspec.field(default_factory=dict)
    """The most of each resource the container may use. For extended resources a limit
    alone counts as the request, and request and limit must be equal."""
    claims: tuple[ResourceClaimRef, ...] = ()
    """Which of the pod's resource claims (by their name in `spec.resourceClaims`) this
    container uses; only those devices are made available to it."""


class Container(Model):
    """One container of the pod; kubedra reads its name and resources (the other fields
    are kept as written)."""

    name: str
    """The container's name, a DNS label unique within the pod."""
    image: str | None = None
    """The container image to run (registry/repository:tag or a digest)."""
    resources: ResourceRequirements | None = None
    """The resources the container requests and is limited to, and the DRA claims it
    uses."""


class PodResourceClaim(Model):
    """`spec.resourceClaims[]`: a claim by name, or a template to generate one per pod."""

    name: str
    """The name containers use to refer to this claim in `resources.claims`; a DNS label,
    unique within the pod."""
    resource_claim_name: str | None = None
    """An existing ResourceClaim in the pod's namespace, shared with whatever else uses it.
    Exactly one of this and `resourceClaimTemplateName` must be set."""
    resource_claim_template_name: str | None = None
    """A ResourceClaimTemplate in the pod's namespace; a claim is created from it for this
    pod alone and deleted with the pod. The generated name is recorded in
    `status.resourceClaimStatuses`. In a PodGroup whose `spec.resourceClaims` has an
    identical entry (same name and template), the pod uses the group's one claim instead
    (DRAWorkloadResourceClaims)."""


class PodSchedulingGroup(Model):
    """The runtime group a pod belongs to (GenericWorkload, beta); exactly one way of
    naming it, today only `podGroupName`."""

    pod_group_name: str | None = None
    """The PodGroup (in the pod's namespace) whose scheduling policy applies to this pod,
    a DNS subdomain. The group need not exist yet: the pod then waits for it."""


class PodSpec(Model):
    """What the pod runs and the constraints on where it may run."""

    containers: tuple[Container, ...] = ()
    """The containers of the pod; at least one is required."""
    init_containers: tuple[Container, ...] = ()
    """Containers that run one after another, to completion, before the regular
    containers start. Their resource requests count towards the pod's requests as the
    largest of them."""
    resource_claims: tuple[PodResourceClaim, ...] = ()
    """The DRA resource claims the pod needs, each named so containers can refer to it.
    The scheduler places the pod only on a node where every claim is or can be
    allocated."""
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    """Labels a node must carry (each key with exactly this value) for the pod to be
    scheduled there."""
    affinity: Affinity | None = None
    """Node affinity rules: required and preferred node selection beyond `nodeSelector`."""
    tolerations: tuple[Toleration, ...] = ()
    """Node taints the pod tolerates. (Device taints are tolerated in the claim's requests
    instead.)"""
    node_name: str | None = None
    """The node the pod is bound to. The scheduler sets it when it binds the pod; a pod
    created with it set skips scheduling."""
    scheduler_name: str | None = None
    """The scheduler responsible for the pod. Empty means the default scheduler; kubedra
    schedules the pods that name it (see `kubedra explain` for how it chose)."""
    priority: int | None = None
    """The pod's priority, filled in from `priorityClassName` at admission; higher values
    are scheduled first."""
    priority_class_name: str | None = None
    """The PriorityClass that gives the pod its priority; empty means the cluster default
    (or zero if there is none)."""
    scheduling_group: PodSchedulingGroup | None = None
    """The PodGroup the pod is scheduled with (basic or gang, with the group's topology
    and shared claims). Unset: the pod is scheduled on its own. Cannot be changed."""


class PodCondition(Model):
    """One aspect of the pod's state, such as whether it is scheduled or ready."""

    type: str
    """Which aspect this is: `PodScheduled`, `Initialized`, `ContainersReady`, `Ready` or
    another condition type."""
    status: str
    """`True`, `False` or `Unknown`."""
    reason: str | None = None
    """A one-word, CamelCase reason for the last change (`Unschedulable`, ...)."""
    message: str | None = None
    """A human-readable account of the last change; for `PodScheduled=False` the
    scheduler's summary of why no node fits."""
    last_probe_time: str | None = None
    """When the condition was last checked (RFC 3339)."""
    last_transition_time: str | None = None
    """When the status last changed from one value to another (RFC 3339)."""


class PodResourceClaimStatus(Model):
    """Which ResourceClaim was created for a template entry of `spec.resourceClaims`."""

    name: str
    """The entry of `spec.resourceClaims` (by name) that this status belongs to."""
    resource_claim_name: str | None = None
    """The name of the ResourceClaim generated for the pod from the entry's template (or,
    for an entry matching one of its PodGroup's claims, the group's claim). Empty if the
    template entry turned out to need no claim; the pod then runs without it."""


class ContainerExtendedResourceRequest(Model):
    """Which request of the extended-resource claim serves a container's resource."""

    container_name: str
    """The container (regular or init) whose extended-resource request this maps."""
    resource_name: str
    """The extended resource name the container asked for (`example.com/gpu`)."""
    request_name: str
    """The request in the generated claim that allocated devices for it."""


class PodExtendedResourceClaimStatus(Model):
    """The claim the scheduler made for the pod's DRA-backed extended resources."""

    request_mappings: tuple[ContainerExtendedResourceRequest, ...] = ()
    """For each container and extended resource, the claim request that serves it."""
    resource_claim_name: str = ""
    """The name of the ResourceClaim the scheduler created to back the pod's extended
    resources with devices of a DeviceClass that names them."""


class PodStatus(Model):
    """What is known about the pod's progress: its phase, conditions and the claims made
    for it."""

    phase: str | None = None
    """Where the pod is in its life: `Pending`, `Running`, `Succeeded`, `Failed` or
    `Unknown`. A pod that succeeded or failed no longer holds its node's resources or
    its devices."""
    conditions: tuple[PodCondition, ...] = ()
    """The pod's current conditions (`PodScheduled`, `Ready`, ...)."""
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()
    """The names of the ResourceClaims generated from templates for this pod, one per
    template entry in `spec.resourceClaims`."""
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None
    """Set when the pod's extended-resource requests are served through DRA: the claim
    made for them and which request serves which container."""


ENDED_PHASES = ("Succeeded", "Failed")


class Pod(KubeObject):
    """A group of containers that run together on one node; the unit the scheduler
    places, with the resource claims it needs."""

    API_GROUP: ClassVar[str] = ""
    KIND: ClassVar[str] = "Pod"
    NAMESPACED: ClassVar[bool] = True

    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    """The desired state of the pod: its containers, claims and placement constraints."""
    status: PodStatus | None = None
    """The observed state of the pod, written by the scheduler and the kubelet."""


# --- Node and Namespace -------------------------------------------------------------------


class NodeSpec(Model):
    """The node's configured scheduling properties."""

    taints: tuple[Taint, ...] = ()
    """Taints that keep pods without a matching toleration off the node."""
    unschedulable: bool | None = None
    """True when the node is cordoned: no new pods are scheduled there, running ones
    stay."""


class NodeCondition(Model):
    """One aspect of the node's health, such as `Ready` or `MemoryPressure`."""

    type: str
    """Which aspect this is: `Ready`, `MemoryPressure`, `DiskPressure`, `PIDPressure`,
    `NetworkUnavailable` or another type."""
    status: str
    """`True`, `False` or `Unknown`."""
    reason: str | None = None
    """A one-word, CamelCase reason for the last change."""
    message: str | None = None
    """A human-readable account of the last change."""
    last_heartbeat_time: str | None = None
    """When the kubelet last reported on this condition (RFC 3339)."""
    last_transition_time: str | None = None
    """When the status last changed from one value to another (RFC 3339)."""


class NodeStatus(Model):
    """The node's resources and health as its kubelet reports them."""

    capacity: dict[str, Quantity] = msgspec.field(default_factory=dict)
    """The total amount of each resource on the node (`cpu`, `memory`, `pods`, extended
    resources)."""
    allocatable: dict[str, Quantity] = msgspec.field(default_factory=dict)
    """The share of each resource that pods may request: the capacity less what is
    reserved for the system. The scheduler fits pod requests against these values. In
    kubedra a node that lists no `cpu` or `memory` is not limited on it; an extended
    resource it does not list, it has none of."""
    conditions: tuple[NodeCondition, ...] = ()
    """The node's current conditions (`Ready`, pressure conditions, ...)."""


class Node(KubeObject):
    """A machine in the cluster that runs pods. DRA devices reach a node through the
    ResourceSlices that name it or select it."""

    API_GROUP: ClassVar[str] = ""
    KIND: ClassVar[str] = "Node"
    NAMESPACED: ClassVar[bool] = False

    spec: NodeSpec | None = None
    """The node's taints and whether it takes new pods."""
    status: NodeStatus | None = None
    """The node's capacity, allocatable resources and conditions."""


class Namespace(KubeObject):
    """A scope for names of namespaced objects (pods, claims, claim templates). Its
    labels can grant admin access to devices
    (`resource.kubernetes.io/admin-access: "true"`)."""

    API_GROUP: ClassVar[str] = ""
    KIND: ClassVar[str] = "Namespace"
    NAMESPACED: ClassVar[bool] = False


def pod_runs(pod: Pod | None) -> bool:
    """Not ended and not being deleted: the pod still holds what it was given."""
    if pod is None or pod.metadata.deletion_timestamp:
        return False
    return pod.status is None or pod.status.phase not in ENDED_PHASES
