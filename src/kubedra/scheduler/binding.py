"""The writes of a binding cycle, as upstream's DynamicResources plugin and binder make them.

For each claim (upstream's PreBind `bindClaim`): the `resource.kubernetes.io/delete-protection`
finalizer through a normal update, then `status.allocation` and the pod's `reservedFor`
entry in one `resourceclaims/status` update, each with the resourceVersion just read. A
conflict reads the claim again and retries, unless the claim is now being deleted or was
allocated by someone else meanwhile (then the pod goes back to the queue). Then the pod is
bound through `pods/binding`, its uid as precondition.

Beyond upstream, a write that got no answer (the API server away, or failing with 5xx) is
not assumed to have failed: the object is read back, once the server answers again, to see
whether it was done. Only then may devices be given back, or the pod be retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import msgspec

from kubedra.api.core import Pod
from kubedra.api.resource import (
    AllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
)
from kubedra.cluster.rest import ClusterError
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import Store, T
from kubedra.errors import Conflict, NotFound

FINALIZER = "resource.kubernetes.io/delete-protection"
MAX_RESERVED_FOR = 256  # upstream's ResourceClaimReservedForMaxSize
CONFLICT_RETRIES = 5  # client-go's retry.DefaultRetry steps
PATIENCE_S = 60.0  # how long a binding cycle waits for an API server that does not answer

R = TypeVar("R")


class Refused(Conflict):
    """The write cannot be done for this pod any more (claim deleted or allocated elsewhere)."""


def reserved_for(claim: ResourceClaim, uid: str | None) -> bool:
    status = claim.status
    return status is not None and any(r.uid == uid for r in status.reserved_for)


def reserve_claim(
    store: Store,
    claim: ResourceClaim,
    allocation: AllocationResult,
    consumer: ResourceClaimConsumerReference,
    *,
    allocate: bool,
    patience: float = PATIENCE_S,
) -> ResourceClaim:
    """Record `allocation` (when `allocate`; else the claim must still hold exactly it) and
    reserve the claim for `consumer`; returns the claim as written."""
    attempts, fresh = 0, False
    deadline = time.monotonic() + patience
    name, namespace = claim.name, claim.namespace
    while True:
        if fresh:
            claim = _read_back(lambda: store.get(ResourceClaim, name, namespace), deadline)
        fresh = True
        status = claim.status or ResourceClaimStatus()
        if status.allocation is not None and reserved_for(claim, consumer.uid):
            return claim  # done already (an earlier attempt whose answer was lost)
        _check_still_ours(claim, status, allocation, allocate)
        try:
            if allocate and FINALIZER not in claim.metadata.finalizers:
                meta = msgspec.structs.replace(
                    claim.metadata, finalizers=(*claim.metadata.finalizers, FINALIZER)
                )
                claim = store.update(msgspec.structs.replace(claim, metadata=meta))
            held = allocation if allocate else status.allocation or allocation
            status = msgspec.structs.replace(
                status, allocation=stamped(held), reserved_for=(*status.reserved_for, consumer)
            )
            return store.update_status(msgspec.structs.replace(claim, status=status))
        except Conflict:
            attempts += 1
            if attempts >= CONFLICT_RETRIES:
                raise
        except ClusterError as err:
            if not err.indeterminate or time.monotonic() > deadline:
                raise


def bind_pod(store: Store, pod: Pod, node: str, *, patience: float = PATIENCE_S) -> Pod | None:
    """`pods/binding`; after a write without an answer, the pod read back tells whether it
    was bound (to `node`: done; otherwise the refusal the server would have given)."""
    try:
        return store.bind(pod, node)
    except ClusterError as err:
        if not err.indeterminate:
            raise
    deadline = time.monotonic() + patience
    current = _read_back(lambda: store.get(Pod, pod.name, pod.namespace), deadline)
    if current.metadata.uid == pod.metadata.uid and current.spec.node_name == node:
        return current
    return store.bind(pod, node)


def update_status_retrying(store: Store, obj: T, change: Callable[[T], T | None]) -> T | None:
    """Write `change(obj)` to the status; on a conflict read the object again and apply
    `change` to that (client-go's RetryOnConflict). `change` returns None when there is
    nothing to write; the result is then None too."""
    for attempt in range(CONFLICT_RETRIES):
        if attempt:
            obj = store.get(type(obj), obj.name, obj.namespace)
        changed = change(obj)
        if changed is None:
            return None
        try:
            return store.update_status(changed)
        except Conflict:
            if attempt == CONFLICT_RETRIES - 1:
                raise
    return None  # not reached


def _check_still_ours(
    claim: ResourceClaim,
    status: ResourceClaimStatus,
    allocation: AllocationResult,
    allocate: bool,
) -> None:
    name = f"{claim.namespace}/{claim.name}"
    if claim.metadata.deletion_timestamp:
        raise Refused(f"claim {name} got deleted in the meantime")
    if allocate and status.allocation is not None:
        raise Refused(f"claim {name} got allocated elsewhere in the meantime")
    if not allocate and not same_allocation(status.allocation, allocation):
        raise Refused(f"claim {name} got deallocated or reallocated in the meantime")
    if len(status.reserved_for) >= MAX_RESERVED_FOR:
        raise Refused(f"claim {name} is in use by {MAX_RESERVED_FOR} pods")


def stamped(allocation: AllocationResult) -> AllocationResult:
    """The allocation with its `allocationTimestamp`, set when the claim is reserved and it
    has none, as kube-scheduler's DynamicResources plugin does (1.37, with the default
    DRADeviceBindingConditions and DRAResourceClaimDeviceStatus gates): the time the
    devices were allocated, which binding-condition timeouts and `describe` count from."""
    if allocation.allocation_timestamp:
        return allocation
    return msgspec.structs.replace(allocation, allocation_timestamp=now_rfc3339())


def same_allocation(a: AllocationResult | None, b: AllocationResult | None) -> bool:
    """Equal but for the timestamp (a plan's allocation never has the one written)."""
    if a is None or b is None:
        return a is b
    return msgspec.structs.replace(a, allocation_timestamp=None) == msgspec.structs.replace(
        b, allocation_timestamp=None
    )


def _read_back(read: Callable[[], R], deadline: float) -> R:
    """`read()` until the API server answers (NotFound is an answer) or `deadline` passes."""
    delay = 0.2
    while True:
        try:
            return read()
        except NotFound:
            raise
        except ClusterError as err:
            if not err.indeterminate or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 5.0)
