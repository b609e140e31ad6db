"""A pod's claims: which ResourceClaim each `spec.resourceClaims[]` entry means.

For a template, the claim is generated once per pod, as upstream's resourceclaim
controller does: `generateName` `<pod>-<pod claim>-`, the pod as controlling owner (so the
claim is deleted with it), the annotation `resource.kubernetes.io/pod-claim-name`, and the
pod's `status.resourceClaimStatuses` recording the generated name.
"""

from __future__ import annotations

import msgspec

from kubedra.api.core import Pod, PodResourceClaim, PodResourceClaimStatus, PodStatus
from kubedra.api.meta import ObjectMeta, OwnerReference
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# generateName keeps 5 characters for the random suffix within a 63-character name.
_MAX_PREFIX = 63 - 5


def generated_claim(
    pod: Pod, entry: PodResourceClaim, template: ResourceClaimTemplate
) -> ResourceClaim:
    """The claim to create for a template entry of the pod (not yet stored)."""
    tmeta = template.spec.metadata or ObjectMeta()
    prefix = f"{pod.name}-{entry.name}"[: _MAX_PREFIX - 1] + "-"
    owner = OwnerReference(
        api_version="v1",
        kind="Pod",
        name=pod.name,
        uid=pod.metadata.uid or "",
        controller=True,
        block_owner_deletion=True,
    )
    meta = ObjectMeta(
        generate_name=prefix,
        namespace=pod.namespace,
        labels=dict(tmeta.labels),
        annotations={**tmeta.annotations, POD_CLAIM_NAME_ANNOTATION: entry.name},
        owner_references=(owner,),
    )
    return ResourceClaim(
        api_version="resource.k8s.io/v1",
        kind="ResourceClaim",
        metadata=meta,
        spec=template.spec.spec,
    )


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
