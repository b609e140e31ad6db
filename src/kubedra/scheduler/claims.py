"""A pod's claims: which ResourceClaim each `spec.resourceClaims[]` entry means.

For a template, the claim is generated once per pod, as upstream's resourceclaim
controller does: `generateName` `<pod>-<pod claim>-`, the pod as controlling owner (so the
claim is deleted with it), the annotation `resource.kubernetes.io/pod-claim-name`, and the
pod's `status.resourceClaimStatuses` recording the generated name.

A PodGroup's claims (KEP-5729, DRAWorkloadResourceClaims): a pod's entry that matches an
entry of its PodGroup's `spec.resourceClaims` (same name, same claim or template) means
the group's claim, not one of its own. A template entry of the group gets one claim for the
whole group, made as upstream's resourceclaim controller (v1.37) makes it for a PodGroup:
`generateName` `<podgroup>-<claim>-` (both parts cut in proportion when longer than 57
characters), the PodGroup as controlling owner (garbage collection deletes the claim with
the PodGroup, never with its pods), the same `resource.kubernetes.io/pod-claim-name`
annotation as a pod's claim (naming the group's entry), the template's labels, and the
PodGroup's `status.resourceClaimStatuses` recording the generated name (each member's
`status.resourceClaimStatuses` names it too). Such a claim is reserved for the group (one
`reservedFor` entry: apiGroup scheduling.k8s.io, resource podgroups, the group's name and
uid), not for each pod, and that entry stays while the PodGroup (that uid) exists.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from kubedra.allocator import DeviceRef
from kubedra.api.core import (
    ContainerExtendedResourceRequest,
    Pod,
    PodExtendedResourceClaimStatus,
    PodResourceClaim,
    PodResourceClaimStatus,
    PodStatus,
)
from kubedra.api.meta import ObjectMeta, OwnerReference
from kubedra.api.resource import (
    DeviceClaim,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimSpec,
    ResourceClaimTemplate,
)
from kubedra.api.scheduling import API_VERSION as SCHEDULING_API_VERSION
from kubedra.api.scheduling import GROUP as SCHEDULING_GROUP
from kubedra.api.scheduling import (
    PodGroup,
    PodGroupResourceClaim,
    PodGroupResourceClaimStatus,
    PodGroupStatus,
)
from kubedra.cluster.sqlite import generated_name

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# generateName keeps 5 characters for the random suffix within a 63-character name.
_MAX_PREFIX = 63 - 5
# The longest generateName base upstream's controller leaves for its parts (63 characters
# less the hyphen and the 5 random characters the API server adds).
_MAX_BASE = 57


def pod_owner(pod: Pod) -> OwnerReference:
    """The pod as controlling owner: its claims are deleted with it (garbage collection).
    Upstream's resourceclaim controller sets no blockOwnerDeletion on the claims it makes."""
    return OwnerReference(
        api_version="v1",
        kind="Pod",
        name=pod.name,
        uid=pod.metadata.uid or "",
        controller=True,
    )


def generated_claim(
    pod: Pod, entry: PodResourceClaim, template: ResourceClaimTemplate
) -> ResourceClaim:
    """The claim to create for a template entry of the pod (not yet stored)."""
    return claim_from_template(template, pod.namespace, pod.name, entry.name, pod_owner(pod))


def claim_from_template(
    template: ResourceClaimTemplate, namespace: str, owner_name: str, entry: str,
    owner: OwnerReference,
) -> ResourceClaim:
    """A claim as the resourceclaim controller makes one from a template for an owner's entry
    (a pod's, or a PodGroup's): the template's labels and spec, its annotations plus the
    entry's name, the owner as controller, `generateName` from both names."""
    tmeta = template.spec.metadata or ObjectMeta()
    meta = ObjectMeta(
        generate_name=claim_prefix(owner_name, entry),
        namespace=namespace,
        labels=dict(tmeta.labels),
        annotations={**tmeta.annotations, POD_CLAIM_NAME_ANNOTATION: entry},
        owner_references=(owner,),
    )
    return ResourceClaim(
        api_version="resource.k8s.io/v1", kind="ResourceClaim", metadata=meta,
        spec=template.spec.spec,
    )  # fmt: skip


def claim_prefix(owner_name: str, entry: str) -> str:
    """A generated claim's `generateName`: `<owner>-<entry>-`, or, when that is longer than
    57 characters, both names cut in proportion to their length (upstream's controller does
    so, rather than let the API server cut the entry's name away; it then ends without the
    trailing hyphen)."""
    prefix = f"{owner_name}-{entry}-"
    if len(prefix) <= _MAX_BASE:
        return prefix
    size = len(prefix)
    head, tail = len(owner_name) * _MAX_BASE // size, len(entry) * _MAX_BASE // size
    return owner_name[:head] + "-" + entry[:tail]


def is_owned_by(claim: ResourceClaim, pod: Pod) -> bool:
    return any(
        ref.uid == pod.metadata.uid and ref.controller for ref in claim.metadata.owner_references
    )


def recorded_claim_name(pod: Pod, entry: PodResourceClaim) -> str | None:
    """The claim name of an entry: given directly, or recorded for a generated claim."""
    if entry.resource_claim_name:
        return entry.resource_claim_name
    statuses = pod.status.resource_claim_statuses if pod.status else ()
    return next((s.resource_claim_name for s in statuses if s.name == entry.name), None)


def with_claim_status(pod: Pod, entry: str, claim_name: str) -> Pod:
    """The pod with `status.resourceClaimStatuses` recording a generated claim."""
    status = pod.status or PodStatus()
    kept = tuple(s for s in status.resource_claim_statuses if s.name != entry)
    entries = (*kept, PodResourceClaimStatus(name=entry, resource_claim_name=claim_name))
    return msgspec.structs.replace(
        pod, status=msgspec.structs.replace(status, resource_claim_statuses=entries)
    )


# --- PodGroup claims (KEP-5729) -------------------------------------------------------------

PODGROUPS = "podgroups"


def pod_group_of(pod: Pod) -> tuple[str, str] | None:
    """(namespace, PodGroup name) of the pod's `spec.schedulingGroup`, if any."""
    group = pod.spec.scheduling_group
    if group is None or not group.pod_group_name:
        return None
    return (pod.namespace, group.pod_group_name)


def group_entry(pg: PodGroup | None, entry: PodResourceClaim) -> PodGroupResourceClaim | None:
    """The group's entry that the pod's entry means, if any: upstream's rule is an entry of
    the same name with the same source (the same claim name, or the same template)."""
    if pg is None:
        return None
    for shared in pg.spec.resource_claims:
        if (
            shared.name == entry.name
            and shared.resource_claim_name == entry.resource_claim_name
            and shared.resource_claim_template_name == entry.resource_claim_template_name
        ):
            return shared
    return None


def group_claim_name(pg: PodGroup, entry: PodGroupResourceClaim) -> str | None:
    """The claim of a group entry: named directly, or recorded for a generated claim."""
    if entry.resource_claim_name:
        return entry.resource_claim_name
    statuses = pg.status.resource_claim_statuses if pg.status else ()
    return next((s.resource_claim_name for s in statuses if s.name == entry.name), None)


def podgroup_owner(pg: PodGroup) -> OwnerReference:
    """The PodGroup as controlling owner: its generated claims are deleted with it
    (upstream sets `controller` only, not `blockOwnerDeletion`)."""
    return OwnerReference(
        api_version=SCHEDULING_API_VERSION,
        kind="PodGroup",
        name=pg.name,
        uid=pg.metadata.uid or "",
        controller=True,
    )


def podgroup_consumer(pg: PodGroup) -> ResourceClaimConsumerReference:
    """The `reservedFor` entry of a claim reserved for a whole PodGroup."""
    return ResourceClaimConsumerReference(
        api_group=SCHEDULING_GROUP, resource=PODGROUPS, name=pg.name, uid=pg.metadata.uid or ""
    )


def is_podgroup_consumer(ref: ResourceClaimConsumerReference) -> bool:
    return ref.resource == PODGROUPS and ref.api_group == SCHEDULING_GROUP


def generated_group_claim(
    pg: PodGroup, entry: PodGroupResourceClaim, template: ResourceClaimTemplate
) -> ResourceClaim:
    """The claim to create for a template entry of the group (not yet stored)."""
    return claim_from_template(template, pg.namespace, pg.name, entry.name, podgroup_owner(pg))


def is_owned_by_group(claim: ResourceClaim, pg: PodGroup) -> bool:
    return any(
        ref.uid == pg.metadata.uid and ref.controller and ref.kind == "PodGroup"
        for ref in claim.metadata.owner_references
    )


def with_group_claim_status(pg: PodGroup, entry: str, claim_name: str) -> PodGroup:
    """The PodGroup with `status.resourceClaimStatuses` recording a generated claim."""
    status = pg.status or PodGroupStatus()
    kept = tuple(s for s in status.resource_claim_statuses if s.name != entry)
    entries = (*kept, PodGroupResourceClaimStatus(name=entry, resource_claim_name=claim_name))
    return msgspec.structs.replace(
        pg, status=msgspec.structs.replace(status, resource_claim_statuses=entries)
    )


EXTENDED_RESOURCE_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resource_classes(classes: Iterable[DeviceClass]) -> dict[str, str]:
    """Extended resource name -> the class that serves it (KEP-5004): each class serves its
    `extendedResourceName` and `deviceclass.resource.kubernetes.io/<name>`; when several
    claim one name the most recently created wins, then the lexicographically first."""
    ranked = sorted(classes, key=lambda c: (c.metadata.creation_timestamp or "", c.name))
    ranked.sort(key=lambda c: c.metadata.creation_timestamp or "", reverse=True)
    out: dict[str, str] = {}
    for dc in ranked:
        for name in (dc.spec.extended_resource_name, IMPLICIT_CLASS_PREFIX + dc.name):
            if name and name not in out:
                out[name] = dc.name
    return out


def _extended_requests(pod: Pod, served: dict[str, str]) -> list[tuple[str, str, str, int]]:
    """(request name, container, resource, count) per DRA-served extended resource, with
    upstream's request names `container-<i>-request-<j>`."""
    out = []
    for ci, container in enumerate(pod.spec.containers):
        res = container.resources
        wanted = {**(res.limits if res else {}), **(res.requests if res else {})}
        for ri, (name, quantity) in enumerate(sorted(wanted.items())):
            if name in served and quantity.value() > 0:
                out.append((f"container-{ci}-request-{ri}", container.name, name, quantity.value()))
    return out


def extended_resource_claim(pod: Pod, served: dict[str, str]) -> ResourceClaim | None:
    """The claim the scheduler generates for the pod's DRA-served extended resources, or None
    if the pod asks for none (kept as upstream: owned by the pod, annotated). Not stored
    yet: it is created once a node is chosen (upstream's PreBind), under the name chosen
    now, so that the scheduler's view can hold it as assumed until then."""
    wanted = _extended_requests(pod, served)
    if not wanted:
        return None
    requests = tuple(
        DeviceRequest(
            name=request,
            exactly=ExactDeviceRequest(device_class_name=served[resource], count=count),
        )
        for request, _, resource, count in wanted
    )
    owner = pod_owner(pod)
    prefix = f"{pod.name}-extended-resources-"[:_MAX_PREFIX]
    meta = ObjectMeta(
        name=generated_name(prefix),
        generate_name=prefix,
        namespace=pod.namespace,
        annotations={EXTENDED_RESOURCE_ANNOTATION: "true"},
        owner_references=(owner,),
    )
    return ResourceClaim(
        api_version="resource.k8s.io/v1",
        kind="ResourceClaim",
        metadata=meta,
        spec=ResourceClaimSpec(devices=DeviceClaim(requests=requests)),
    )


def is_extended_claim_of(claim: ResourceClaim, pod: Pod) -> bool:
    """The claim was generated for this pod's extended resources."""
    return claim.metadata.annotations.get(EXTENDED_RESOURCE_ANNOTATION) == "true" and (
        is_owned_by(claim, pod)
    )


def with_extended_claim(pod: Pod, claim: ResourceClaim, served: dict[str, str]) -> Pod:
    """The pod with `status.extendedResourceClaimStatus` naming its generated claim."""
    mappings = tuple(
        ContainerExtendedResourceRequest(container_name=c, resource_name=r, request_name=q)
        for q, c, r, _ in _extended_requests(pod, served)
    )
    status = pod.status or PodStatus()
    recorded = PodExtendedResourceClaimStatus(
        request_mappings=mappings, resource_claim_name=claim.name
    )
    return msgspec.structs.replace(
        pod, status=msgspec.structs.replace(status, extended_resource_claim_status=recorded)
    )


def allocated_refs(claim: ResourceClaim) -> list[DeviceRef]:
    """The devices a claim's allocation holds (admin access holds none)."""
    if claim.status is None or claim.status.allocation is None:
        return []
    return [
        DeviceRef(r.driver, r.pool, r.device)
        for r in claim.status.allocation.devices.results
        if not r.admin_access
    ]
