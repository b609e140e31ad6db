"""Typed models of scheduling.k8s.io/v1beta1 Workload and PodGroup (Kubernetes 1.37).

Workload-aware scheduling: a Workload holds the templates of a workload's pod groups
(KEP-4671), a PodGroup is one runtime group of pods scheduled together, basic or all or
nothing (KEP-5832 split the two), and a PodGroup can carry ResourceClaims shared by all
its pods (KEP-5729). Pods join a group through `spec.schedulingGroup.podGroupName`.

Field names and nesting follow upstream's `scheduling/v1beta1` Go types one to one. The
API server serves these kinds only with the GenericWorkload gate on and the
scheduling.k8s.io/v1beta1 API enabled (both off by default in 1.37); kubedra assumes the
gates listed in `kubedra.api.gates.GATES` (see docs/compatibility.md, "Workloads and pod
groups").
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from kubedra.api.meta import KubeObject, Model
from kubedra.api.resource import Condition

GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

# The largest priority a user-defined priority class (and so a group) may have.
HIGHEST_USER_PRIORITY = 1_000_000_000
MAX_TEMPLATES = 8  # templates per list (pod group or composite)
MAX_TEMPLATE_DEPTH = 4  # nesting of composite templates
MAX_GROUP_CLAIMS = 4  # resourceClaims of a PodGroup or a template
MAX_TOPOLOGY_CONSTRAINTS = 1

# Condition types and reasons of a PodGroup's status, as upstream's scheduler writes them.
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_PREEMPTED = "PreemptionByScheduler"
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")


# --- policies, constraints, claims (shared by templates and groups) -----------------------


class BasicSchedulingPolicy(Model):
    """Marks a group whose pods are scheduled one by one, as pods without a group are;
    it has no fields (its presence is the choice)."""


class GangSchedulingPolicy(Model):
    """All-or-nothing scheduling: the group's pods are admitted only when enough of them
    fit at the same time."""

    min_count: int = 0
    """How many pods of the group must be placeable together before any of them is bound;
    at least 1. Unlike the rest of the policy it may be changed later (for scaling); the
    scheduler applies a new value from its next attempt on."""


class PodGroupSchedulingPolicy(Model):
    """How the scheduler treats the group's pods: exactly one of `basic` and `gang`,
    chosen at creation and never switched afterwards."""

    basic: BasicSchedulingPolicy | None = None
    """Schedule the pods independently (written `basic: {}`); cannot be changed once
    the group exists."""
    gang: GangSchedulingPolicy | None = None
    """Schedule the pods all or nothing; it can be neither added nor removed after
    creation, only its `minCount` may change."""


class TopologyConstraint(Model):
    """Keeps a group's pods inside one topology domain."""

    key: str = ""
    """A node label key (`topology.kubernetes.io/rack`, ...): all pods of the group must
    land on nodes with the same value of this label. Separate groups made from the same
    template may each get a different domain."""


class PodGroupSchedulingConstraints(Model):
    """Placement constraints on the group as a whole (TopologyAwareWorkloadScheduling,
    alpha)."""

    topology: tuple[TopologyConstraint, ...] = ()
    """The topology domain the group must fit into; at most one entry in 1.37."""


class PodGroupResourceClaim(Model):
    """A ResourceClaim the whole group uses, by name or made from a template once for the
    group (DRAWorkloadResourceClaims, beta). A pod of the group shares it by listing an
    identical entry (same name, same claim or template) in its `spec.resourceClaims`."""

    name: str = ""
    """The claim's name within the group, a DNS label unique among the group's claims.
    Pods refer to the shared claim by an entry of this name."""
    resource_claim_name: str | None = None
    """An existing ResourceClaim in the group's namespace; it is reserved for the group
    (one `reservedFor` entry naming the PodGroup) rather than for each pod. Exactly one
    of this and `resourceClaimTemplateName`."""
    resource_claim_template_name: str | None = None
    """A ResourceClaimTemplate in the group's namespace: one claim is made from it for
    the group, owned by the PodGroup and deleted with it, and its generated name is
    recorded in `status.resourceClaimStatuses`. Exactly one of this and
    `resourceClaimName`."""


class SingleDisruptionMode(Model):
    """Members may be disrupted one at a time; it has no fields."""


class AllDisruptionMode(Model):
    """Members may only be disrupted together; it has no fields."""


class DisruptionMode(Model):
    """How the members of a group may be disrupted (preempted, evicted): exactly one of
    `single` and `all`."""

    single: SingleDisruptionMode | None = None
    """Each pod may be disrupted on its own (written `single: {}`)."""
    all: AllDisruptionMode | None = None
    """The pods may only be disrupted all together (written `all: {}`)."""


# --- Workload -----------------------------------------------------------------------------


class TypedLocalObjectReference(Model):
    """Names an object of some kind in the Workload's namespace."""

    api_group: str | None = None
    """The referenced kind's API group (`batch`, `jobset.x-k8s.io`); empty for the core
    group. A DNS subdomain."""
    kind: str = ""
    """The referenced object's kind (`Job`); required, and usable as a URL path segment
    (no `/` or `%`, not `.` or `..`)."""
    name: str = ""
    """The referenced object's name; required, with the same path-segment rules as
    `kind`."""


class PodGroupTemplate(Model):
    """The blueprint of one kind of pod group in a Workload: the policy, constraints,
    shared claims and priority that a controller copies into each PodGroup it creates."""

    name: str = ""
    """The template's name, a DNS label unique among all templates of the Workload;
    PodGroups point back to it in `workloadRef.templateName`. Cannot be changed."""
    scheduling_policy: PodGroupSchedulingPolicy = msgspec.field(
        default_factory=PodGroupSchedulingPolicy
    )
    """Basic or gang scheduling for groups made from this template (exactly one)."""
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    """Topology constraints for groups made from this template. Cannot be changed;
    TopologyAwareWorkloadScheduling (alpha)."""
    resource_claims: tuple[PodGroupResourceClaim, ...] = ()
    """Claims shared by the pods of each group made from this template, at most 4, names
    unique. Cannot be changed; DRAWorkloadResourceClaims (beta)."""
    disruption_mode: DisruptionMode | None = None
    """Whether groups made from this template are disrupted pod by pod or as a whole.
    Cannot be changed."""
    priority_class_name: str | None = None
    """The PriorityClass for groups made from this template (a DNS subdomain). Every
    template of a Workload must name the same class. Cannot be changed."""
    priority: int | None = None
    """The priority of groups made from this template, at most 1000000000; every template
    of a Workload must have the same value (or none). Cannot be changed."""
    preemption_policy: str | None = None
    """`PreemptLowerPriority` or `Never`. PodGroupPreemptionPolicy (alpha, off in 1.37):
    the API server drops it, and so does kubedra."""


class CompositeBasicSchedulingPolicy(Model):
    """Marks a composite group whose child groups are scheduled independently; it has no
    fields."""


class CompositeGangSchedulingPolicy(Model):
    """All-or-nothing scheduling of a composite group's child groups."""

    min_group_count: int = 0
    """How many child groups must be placeable together before any is admitted; at
    least 1."""


class CompositePodGroupSchedulingPolicy(Model):
    """How a composite group's children are scheduled: exactly one of `basic` and
    `gang`."""

    basic: CompositeBasicSchedulingPolicy | None = None
    """The child groups are scheduled independently."""
    gang: CompositeGangSchedulingPolicy | None = None
    """The child groups are scheduled all or nothing."""


class SingleCompositeDisruptionMode(Model):
    """Child groups may be disrupted one at a time; it has no fields."""


class AllCompositeDisruptionMode(Model):
    """Child groups may only be disrupted together; it has no fields."""


class CompositeDisruptionMode(Model):
    """How a composite group's children may be disrupted: exactly one of `single` and
    `all`."""

    single: SingleCompositeDisruptionMode | None = None
    """Each child group may be disrupted on its own."""
    all: AllCompositeDisruptionMode | None = None
    """The child groups may only be disrupted together."""


class CompositePodGroupSchedulingConstraints(Model):
    """Placement constraints on a composite group as a whole."""

    topology: tuple[TopologyConstraint, ...] = ()
    """The topology domain all the composite group's pods must fit into; at most one."""


class CompositePodGroupTemplate(Model):
    """A template for a group of pod groups (a hierarchy up to 4 levels deep).
    CompositePodGroup (alpha, off in 1.37): the API server drops these templates, and so
    does kubedra."""

    name: str = ""
    """The template's name, a DNS label unique among all templates of the Workload."""
    scheduling_policy: CompositePodGroupSchedulingPolicy = msgspec.field(
        default_factory=CompositePodGroupSchedulingPolicy
    )
    """Basic or gang scheduling of the child groups (exactly one)."""
    scheduling_constraints: CompositePodGroupSchedulingConstraints | None = None
    """Topology constraints for the composite group."""
    disruption_mode: CompositeDisruptionMode | None = None
    """Whether child groups are disrupted one by one or together."""
    priority_class_name: str | None = None
    """The PriorityClass of composite groups made from this template; the same for every
    template of the Workload."""
    priority: int | None = None
    """The priority of composite groups made from this template, at most 1000000000."""
    preemption_policy: str | None = None
    """`PreemptLowerPriority` or `Never` (PodGroupPreemptionPolicy, alpha)."""
    pod_group_templates: tuple[PodGroupTemplate, ...] = ()
    """Templates of the child pod groups, at most 8."""
    composite_pod_group_templates: tuple[CompositePodGroupTemplate, ...] = ()
    """Templates of nested composite groups, at most 8."""


class WorkloadSpec(Model):
    """The templates that make up a Workload, and the object it describes."""

    controller_ref: TypedLocalObjectReference | None = None
    """The object (a Job, a JobSet, ...) this Workload belongs to, for tools that link
    back to it. Cannot be changed, set or removed after creation."""
    pod_group_templates: tuple[PodGroupTemplate, ...] = ()
    """The pod group templates, at most 8, names unique. Templates cannot be added or
    removed after creation; each keeps the mutability of its own fields. Exactly one of
    this and `compositePodGroupTemplates` must be non-empty."""
    composite_pod_group_templates: tuple[CompositePodGroupTemplate, ...] = ()
    """Templates of composite groups, at most 8. CompositePodGroup (alpha, off in 1.37):
    the API server drops them on create, and so does kubedra."""


class Workload(KubeObject):
    """The scheduling shape of a workload: which groups of pods it consists of and how
    each kind of group is scheduled (basic or gang), constrained and prioritised. A
    static description; PodGroups are its runtime instances. Namespaced."""

    API_GROUP: ClassVar[str] = GROUP
    API_VERSION: ClassVar[str] = VERSION
    KIND: ClassVar[str] = "Workload"
    NAMESPACED: ClassVar[bool] = True

    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)
    """The Workload's templates and the object it belongs to."""


# --- PodGroup -----------------------------------------------------------------------------


class WorkloadReference(Model):
    """Which Workload template a PodGroup was made from."""

    workload_name: str = ""
    """The Workload's name (a DNS subdomain) in the group's namespace; required."""
    template_name: str = ""
    """The name of the template within that Workload (a DNS label); required."""


class PodGroupResourceClaimStatus(Model):
    """Which ResourceClaim was made for one template entry of a PodGroup's
    `spec.resourceClaims`."""

    name: str = ""
    """The entry of `spec.resourceClaims` this status is for (by name)."""
    resource_claim_name: str | None = None
    """The name of the ResourceClaim generated for the group from the entry's template.
    Unset when no claim was needed; the entry can then be ignored."""


class PodGroupStatus(Model):
    """What the scheduler and controllers report about a PodGroup."""

    conditions: tuple[Condition, ...] = ()
    """The group's conditions, one per type. `PodGroupInitiallyScheduled` turns True once
    the group's scheduling requirement was first met and stays True (reason
    `Unschedulable` or `SchedulerError` while it is False); `DisruptionTarget` (reason
    `PreemptionByScheduler`) says the group is about to be disrupted."""
    resource_claim_statuses: tuple[PodGroupResourceClaimStatus, ...] = ()
    """The claims generated from templates for the group, one per template entry of
    `spec.resourceClaims` (at most 4)."""


class PodGroupSpec(Model):
    """One runtime group of pods: its scheduling policy and constraints, shared claims,
    disruption mode and priority, normally copied from a Workload template."""

    parent_composite_pod_group_name: str | None = None
    """The composite group this group belongs to. CompositePodGroup (alpha, off in 1.37):
    the API server drops it, and so does kubedra."""
    workload_ref: WorkloadReference | None = None
    """The Workload template the group was made from, if any; the Workload need not
    exist. Cannot be changed."""
    scheduling_policy: PodGroupSchedulingPolicy = msgspec.field(
        default_factory=PodGroupSchedulingPolicy
    )
    """Basic or gang scheduling (exactly one); only `gang.minCount` may change later."""
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    """Topology constraints for the group's pods. Cannot be changed;
    TopologyAwareWorkloadScheduling (alpha)."""
    resource_claims: tuple[PodGroupResourceClaim, ...] = ()
    """Claims shared by the group's pods, at most 4, names unique. A claim made from a
    template is created once for the group and reserved for the PodGroup in the claim's
    `reservedFor`. Cannot be changed; DRAWorkloadResourceClaims (beta)."""
    disruption_mode: DisruptionMode | None = None
    """Whether the group's pods are disrupted one by one or together; `single` when
    unset. Cannot be changed."""
    priority_class_name: str | None = None
    """The PriorityClass the group's priority comes from (a DNS subdomain); the API
    server refuses a class that does not exist. Cannot be changed."""
    priority: int | None = None
    """The group's priority, filled in on create from `priorityClassName` (0 without a
    class); a different value is refused. At most 1000000000. Cannot be changed."""
    preemption_policy: str | None = None
    """`PreemptLowerPriority` or `Never`. PodGroupPreemptionPolicy (alpha, off in 1.37):
    the API server drops it, and so does kubedra."""


class PodGroup(KubeObject):
    """A group of pods the scheduler places together (pods join it through
    `spec.schedulingGroup.podGroupName`), basic or all or nothing, with its own shared
    ResourceClaims and scheduling status. Created by a workload controller from a
    Workload template, or by hand. Namespaced."""

    API_GROUP: ClassVar[str] = GROUP
    API_VERSION: ClassVar[str] = VERSION
    KIND: ClassVar[str] = "PodGroup"
    NAMESPACED: ClassVar[bool] = True

    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    """The group's policy, constraints, shared claims, disruption mode and priority."""
    status: PodGroupStatus | None = None
    """The group's conditions and the claims generated for it (the `status`
    subresource); empty on create."""
