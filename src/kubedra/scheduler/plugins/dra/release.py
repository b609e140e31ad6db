"""Giving devices back: reservations of pods that ended, claims nobody holds.

Upstream splits this: the DynamicResources plugin's Unreserve drops a pod's reservation
when its binding fails, and kube-controller-manager's resourceclaim controller drops the
reservations of pods that are done, deallocates claims nobody reserves and deletes the
claims generated for pods that are gone. On the embedded store kubedra's scheduler is also
that controller (`release_ended`); on a cluster it only drops reservations.

A claim reserved for a PodGroup (KEP-5729) is held while the PodGroup exists, whether or
not its pods still run: its reservation goes, and the claim is deallocated, only once the
PodGroup is gone or replaced (another uid), as upstream's resourceclaim controller (v1.37)
does for a group. A claim generated for a PodGroup is deleted with the PodGroup (garbage
collection, by its owner reference), not with its pods.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import msgspec

from kubedra.api.core import Pod, pod_runs
from kubedra.api.resource import ResourceClaim, ResourceClaimConsumerReference
from kubedra.api.scheduling import PodGroup
from kubedra.errors import KubedraError
from kubedra.scheduler.binding import FINALIZER, update_status_retrying
from kubedra.scheduler.cache import key_of
from kubedra.scheduler.claims import allocated_refs, is_podgroup_consumer
from kubedra.scheduler.framework.interfaces import Handle

log = logging.getLogger(__name__)

Pods = dict[str | None, Pod]


def pods_by_uid(handle: Handle) -> Pods:
    return {p.metadata.uid: p for p in handle.cache.of(Pod).values() if isinstance(p, Pod)}


class Groups:
    """Which PodGroups still hold their claims: those that exist, by uid (upstream keeps a
    group's reservation until the PodGroup is deleted or replaced, not when its pods end:
    the group may start pods again)."""

    def __init__(self, handle: Handle, pods: Pods) -> None:
        self.uids = {
            pg.metadata.uid for pg in handle.cache.of(PodGroup).values() if isinstance(pg, PodGroup)
        }

    def live(self, namespace: str, ref: ResourceClaimConsumerReference) -> bool:
        return ref.uid in self.uids


def _live(
    claim: ResourceClaim,
    reserved: tuple[ResourceClaimConsumerReference, ...],
    pods: Pods,
    groups: Groups,
) -> tuple[ResourceClaimConsumerReference, ...]:
    return tuple(
        r
        for r in reserved
        if (
            groups.live(claim.namespace, r)
            if is_podgroup_consumer(r)
            else pod_runs(pods.get(r.uid))
        )
    )


def release_ended(handle: Handle) -> int:
    """Drop ended or deleted pods from reservedFor; free claims nobody uses any more
    (generated claims of an ended pod are deleted, as upstream's claim controller does),
    and claims being deleted that nobody holds (their finalizer goes, so they go)."""
    pods = pods_by_uid(handle)
    groups = Groups(handle, pods)
    released = 0
    freed: set[str | None] = set()  # None: a node we cannot tell
    for claim in handle.claims():
        reserved = claim.status.reserved_for if claim.status else ()
        live = _live(claim, reserved, pods, groups)
        if len(live) == len(reserved) and not _abandoned(claim):
            if not reserved and _group_gone(claim, groups):
                released += _delete(handle, claim)  # its PodGroup went: it goes too
            continue
        released += 1
        if release(handle, claim, live, pods):
            view = handle.built_view()
            if view is not None:
                view.release(allocated_refs(claim))
            # a claim nobody held any more: its devices' node is not known here
            freed |= {_node_of(pods.get(r.uid)) for r in reserved} or {None}
    if released:
        handle.refresh()
        # Only what claims decide changes: devices in use, CPU in use, known misfits.
        handle.forget_usage()
        if None in freed:
            handle.framework.forget()
        else:
            handle.framework.freed({node for node in freed if node is not None})
        handle.queue.wake_all()
    return released


def drop_reservations(handle: Handle, pod: Pod, claims: Iterable[ResourceClaim]) -> None:
    """Upstream's Unreserve in the store: the pod's reservations of `claims` go (a claim
    nobody else holds is freed where this scheduler is the claim controller)."""
    pods = pods_by_uid(handle)
    for claim in claims:
        current = handle.cache.of(ResourceClaim).get(key_of(claim))
        if isinstance(current, ResourceClaim) and current.status is not None:
            held = current.status.reserved_for
            live = tuple(r for r in held if r.uid != pod.metadata.uid)
            if len(live) < len(held):
                release(handle, current, live, pods)
    handle.invalidate()  # allocations changed under the cached views


def release(
    handle: Handle,
    claim: ResourceClaim,
    live: tuple[ResourceClaimConsumerReference, ...],
    pods: Pods,
) -> bool:
    """Write the smaller reservedFor, or free the claim; True when it was freed. The
    writes are this scheduler's own: the caller updates what depends on them. Where the
    cluster's resourceclaim controller frees claims, only the reservations go (upstream's
    Unreserve); it then frees or deletes the claim as it sees fit."""
    store = handle.store
    try:
        if (live or not handle.claim_controller) and claim.status is not None:
            dropped = {r.uid for r in claim.status.reserved_for} - {r.uid for r in live}
            smaller = update_status_retrying(
                store, claim, lambda c: _without_reservations(c, dropped)
            )
            if smaller is not None:
                handle.mine(smaller)
            return False
        cleared = handle.mine(store.update_status(msgspec.structs.replace(claim, status=None)))
        meta = msgspec.structs.replace(
            cleared.metadata,
            finalizers=tuple(f for f in cleared.metadata.finalizers if f != FINALIZER),
        )
        cleared = handle.mine(store.update(msgspec.structs.replace(cleared, metadata=meta)))
        if cleared.metadata.deletion_timestamp and not cleared.metadata.finalizers:
            return True  # it was being deleted: without the finalizer it is gone
        owners = [o for o in cleared.metadata.owner_references if o.controller]
        groups = Groups(handle, pods) if any(o.kind == "PodGroup" for o in owners) else None
        if owners and all(
            (o.uid not in groups.uids)
            if groups is not None and o.kind == "PodGroup"
            else not pod_runs(pods.get(o.uid))
            for o in owners
        ):
            store.delete(ResourceClaim, cleared.name, cleared.namespace)
    except KubedraError as err:  # changed by someone else, or the server away: the next
        log.debug("claim %s not released: %s", claim.name, err)  # refresh sees the truth
        return False
    return True


def _without_reservations(claim: ResourceClaim, uids: set[str]) -> ResourceClaim | None:
    if claim.status is None:
        return None
    kept = tuple(r for r in claim.status.reserved_for if r.uid not in uids)
    if len(kept) == len(claim.status.reserved_for):
        return None
    return msgspec.structs.replace(
        claim, status=msgspec.structs.replace(claim.status, reserved_for=kept)
    )


def _group_gone(claim: ResourceClaim, groups: Groups) -> bool:
    """Generated for a PodGroup that no longer exists (garbage collection's part)."""
    owners = [o for o in claim.metadata.owner_references if o.controller]
    return bool(owners) and all(o.kind == "PodGroup" and o.uid not in groups.uids for o in owners)


def _delete(handle: Handle, claim: ResourceClaim) -> int:
    if claim.metadata.deletion_timestamp:
        return 0
    try:
        handle.store.delete(ResourceClaim, claim.name, claim.namespace)
    except KubedraError as err:
        log.debug("claim %s not deleted: %s", claim.name, err)
        return 0
    return 1


def _node_of(pod: Pod | None) -> str | None:
    return pod.spec.node_name if pod is not None and pod.spec.node_name else None


def _abandoned(claim: ResourceClaim) -> bool:
    """Being deleted, held by nobody, and still kept by the scheduler's finalizer."""
    reserved = claim.status.reserved_for if claim.status else ()
    return bool(
        claim.metadata.deletion_timestamp
        and not reserved
        and FINALIZER in claim.metadata.finalizers
    )
