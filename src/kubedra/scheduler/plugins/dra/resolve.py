"""Which ResourceClaims a pod's `spec.resourceClaims` mean, as the DRA plugin's PreFilter
reads them: the claim named, or the one generated from a template for the pod.

Generating it is the resourceclaim controller's part (kube-controller-manager upstream);
the embedded scheduler does it in the cycle (`claim_controller`), and on a cluster waits
for the controller. A claim that does not exist yet parks the pod until it does (upstream's
PreEnqueue gate on claims): `not_made_yet` before the cycle, for the claims the controller
is about to make (so that a gang is held as a whole until each member's exist), and
`resolve_claims` in PreFilter for the rest (a claim the user names, said on the pod).

A pod of a PodGroup whose entry matches one of the group's `spec.resourceClaims` (same
name, same source) uses the group's claim (KEP-5729): named by the group's entry, or made
once for the group from the template (`_generate_for_group`, the resourceclaim controller's
part for PodGroups) and recorded in the PodGroup's `status.resourceClaimStatuses`.
"""

from __future__ import annotations

from kubedra.api.core import Pod, PodResourceClaim
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate
from kubedra.api.scheduling import PodGroup, PodGroupResourceClaim
from kubedra.scheduler.binding import update_status_retrying
from kubedra.scheduler.cache import Key
from kubedra.scheduler.claims import (
    generated_claim,
    generated_group_claim,
    group_claim_name,
    group_entry,
    is_owned_by,
    is_owned_by_group,
    pod_group_of,
    recorded_claim_name,
    with_claim_status,
    with_group_claim_status,
)
from kubedra.scheduler.framework.interfaces import Handle
from kubedra.scheduler.framework.status import Unschedulable, Waiting
from kubedra.scheduler.queue import pod_key


def resolve_claims(
    handle: Handle, waiting: dict[Key, set[Key]], pod: Pod
) -> tuple[list[ResourceClaim], list[PodGroup | None], Pod]:
    """The pod's claims in `spec.resourceClaims` order, per claim the PodGroup it is the
    group's claim of (None: the pod's own), and the pod as it is now (its status records
    the claims generated for it). A pod parked until a claim exists is filed in `waiting`
    under the claim."""
    claims: list[ResourceClaim] = []
    groups: list[PodGroup | None] = []
    group = pod_group_of(pod)
    pg = None
    if group is not None and pod.spec.resource_claims:
        found_pg = handle.cache.of(PodGroup).get(group)
        if not isinstance(found_pg, PodGroup):
            # which entries are the group's is not known before the group exists
            raise Waiting(f'waiting for pod\'s pod group "{group[1]}"', quiet=True)
        pg = found_pg
    for entry in pod.spec.resource_claims:
        shared = group_entry(pg, entry)
        if pg is not None and shared is not None:
            claim, pg, pod = _group_claim(handle, waiting, pod, pg, entry, shared)
            claims.append(claim)
            groups.append(pg)
            continue
        groups.append(None)
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
    return claims, groups, pod


def not_made_yet(handle: Handle, waiting: dict[Key, set[Key]], pod: Pod) -> str:
    """Why the pod cannot be tried yet, "" when it can: a claim the resourceclaim
    controller makes from a template (for the pod, or for its PodGroup) is not in the cache
    yet, its name not recorded or its object not arrived (the pod's status and the claim
    come in two watch events, in either order). Upstream's DynamicResources PreEnqueue
    holds such a pod back until the claim's add or the pod's status update requeues it;
    here the pod is parked and those events activate it (`eventhandlers.py`,
    `claim_arrived`), and one with a name is filed in `waiting` under it. Claims this
    scheduler makes itself (`claim_controller`) and claims the user names are PreFilter's
    (`resolve_claims`: the latter are said on the pod's condition)."""
    group = pod_group_of(pod)
    pg = None
    if group is not None and pod.spec.resource_claims:
        found_pg = handle.cache.of(PodGroup).get(group)
        if not isinstance(found_pg, PodGroup):
            return f'waiting for pod\'s pod group "{group[1]}"'
        pg = found_pg
    claims = handle.cache.of(ResourceClaim)
    for entry in pod.spec.resource_claims:
        shared = group_entry(pg, entry)
        if pg is not None and shared is not None:
            template, namespace = shared.resource_claim_template_name, pg.namespace
            name = group_claim_name(pg, shared)
            whose = f'pod group "{pg.name}" entry "{shared.name}"'
        else:
            template, namespace = entry.resource_claim_template_name, pod.namespace
            name = recorded_claim_name(pod, entry)
            whose = f'"{entry.name}"'
        if not template:
            continue  # named by the user: PreFilter waits for it, and says so on the pod
        if name is None:
            if handle.claim_controller:
                continue  # made in the cycle
            return f'waiting for the claim of {whose} to be created from template "{template}"'
        if not isinstance(claims.get((namespace, name)), ResourceClaim):
            waiting.setdefault((namespace, name), set()).add(pod_key(pod))
            return f'waiting for resource claim "{name}" to be created'
    return ""


def _group_claim(
    handle: Handle,
    waiting: dict[Key, set[Key]],
    pod: Pod,
    pg: PodGroup,
    entry: PodResourceClaim,
    shared: PodGroupResourceClaim,
) -> tuple[ResourceClaim, PodGroup, Pod]:
    """The group's claim for a pod's entry that matches the group's (upstream: the pod
    uses the PodGroup's claim instead of one of its own); made from the template once for
    the whole group where this scheduler is the claim controller."""
    name = group_claim_name(pg, shared)
    template = shared.resource_claim_template_name
    if name is None and template:
        if not handle.claim_controller:
            raise Waiting(
                f'waiting for the claim of pod group "{pg.name}" entry "{shared.name}" to '
                f'be created from template "{template}"',
                quiet=True,
            )
        claim, pg = _generate_for_group(handle, pg, shared.name, template)
    else:
        found = handle.cache.of(ResourceClaim).get((pg.namespace, name or ""))
        if not isinstance(found, ResourceClaim):
            waiting.setdefault((pg.namespace, name or ""), set()).add(pod_key(pod))
            raise Waiting(
                f'waiting for resource claim "{name}" to be created', quiet=bool(template)
            )
        if found.metadata.deletion_timestamp:
            raise Unschedulable(f'resource claim "{name}" is being deleted')
        if template and not is_owned_by_group(found, pg):
            raise Unschedulable(
                f'resource claim "{name}" was not created for pod group "{pg.name}"'
            )
        claim = found
    if template and handle.claim_controller and recorded_claim_name(pod, entry) != claim.name:
        # the pod's status names the claim its template entry means, as for its own claims
        pod = handle.mine(
            handle.store.update_status(with_claim_status(pod, entry.name, claim.name))
        )
    return claim, pg, pod


def _generate_for_group(
    handle: Handle, pg: PodGroup, entry: str, template_name: str
) -> tuple[ResourceClaim, PodGroup]:
    """Create the group's claim of a template entry, once, and record its name in the
    PodGroup's status (what upstream's resourceclaim controller does for a PodGroup)."""
    template = handle.cache.of(ResourceClaimTemplate).get((pg.namespace, template_name))
    if not isinstance(template, ResourceClaimTemplate):
        raise Unschedulable(f'resource claim template "{template_name}" not found')
    shared = next(e for e in pg.spec.resource_claims if e.name == entry)
    claim = handle.mine(handle.store.create(generated_group_claim(pg, shared, template)))

    def record(current: PodGroup) -> PodGroup | None:
        statuses = current.status.resource_claim_statuses if current.status else ()
        if any(s.name == entry and s.resource_claim_name == claim.name for s in statuses):
            return None
        return with_group_claim_status(current, entry, claim.name)

    written = update_status_retrying(handle.store, pg, record)
    if written is not None:
        pg = handle.mine(written)
    return claim, pg


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
