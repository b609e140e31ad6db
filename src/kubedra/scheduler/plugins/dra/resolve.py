"""Which ResourceClaims a pod's `spec.resourceClaims` mean, as the DRA plugin's PreFilter
reads them: the claim named, or the one generated from a template for the pod.

Generating it is the resourceclaim controller's part (kube-controller-manager upstream);
the embedded scheduler does it in the cycle (`claim_controller`), and on a cluster waits
for the controller. A claim that does not exist yet parks the pod until it does (upstream's
PreEnqueue gate on claims).
"""

from __future__ import annotations

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate
from kubedra.scheduler.cache import Key
from kubedra.scheduler.claims import (
    generated_claim,
    is_owned_by,
    recorded_claim_name,
    with_claim_status,
)
from kubedra.scheduler.framework.interfaces import Handle
from kubedra.scheduler.framework.status import Unschedulable, Waiting
from kubedra.scheduler.queue import pod_key


def resolve_claims(
    handle: Handle, waiting: dict[Key, set[Key]], pod: Pod
) -> tuple[list[ResourceClaim], Pod]:
    """The pod's claims in `spec.resourceClaims` order, and the pod as it is now (its
    status records the claims generated for it). A pod parked until a claim exists is
    filed in `waiting` under the claim."""
    claims = []
    for entry in pod.spec.resource_claims:
        name = recorded_claim_name(pod, entry)
        if name is None and entry.resource_claim_template_name:
            if not handle.claim_controller:
                raise Waiting(
                    f'waiting for the claim of "{entry.name}" to be created from template '
                    f'"{entry.resource_claim_template_name}"',
                    quiet=True,
                )
            claim, pod = _generate(handle, pod, entry.name, entry.resource_claim_template_name)
            claims.append(claim)
            continue
        found = handle.cache.of(ResourceClaim).get((pod.namespace, name or ""))
        if not isinstance(found, ResourceClaim):
            waiting.setdefault((pod.namespace, name or ""), set()).add(pod_key(pod))
            raise Waiting(
                f'waiting for resource claim "{name}" to be created',
                quiet=bool(entry.resource_claim_template_name),
            )
        if found.metadata.deletion_timestamp:
            raise Unschedulable(f'resource claim "{name}" is being deleted')
        if entry.resource_claim_template_name and not is_owned_by(found, pod):
            raise Unschedulable(f'resource claim "{name}" was not created for this pod')
        claims.append(found)
    return claims, pod


def _generate(
    handle: Handle, pod: Pod, entry: str, template_name: str
) -> tuple[ResourceClaim, Pod]:
    """Create the claim of a template entry, and record its name in the pod's status."""
    template = handle.cache.of(ResourceClaimTemplate).get((pod.namespace, template_name))
    if not isinstance(template, ResourceClaimTemplate):
        raise Unschedulable(f'resource claim template "{template_name}" not found')
    pod_entry = next(e for e in pod.spec.resource_claims if e.name == entry)
    claim = handle.mine(handle.store.create(generated_claim(pod, pod_entry, template)))
    pod = handle.mine(handle.store.update_status(with_claim_status(pod, entry, claim.name)))
    return claim, pod
