"""Claims and pods: the lists (with namespace and status filters) and a claim's own page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubedra.allocator import DeviceRef
from kubedra.api.core import Pod
from kubedra.api.resource import DeviceRequest, ResourceClaim
from kubedra.scheduler.claims import EXTENDED_RESOURCE_ANNOTATION, recorded_claim_name
from kubedra.web.devices import DeviceFacts
from kubedra.web.facts import Facts

CLAIM_STATUSES = ("pending", "allocated", "reserved", "deleting")
POD_STATUSES = ("pending", "bound", "running", "succeeded", "failed", "deleting")


def claim_status(claim: ResourceClaim) -> str:
    """pending (no devices yet), allocated, reserved (for pods that use it), deleting."""
    if claim.metadata.deletion_timestamp:
        return "deleting"
    status = claim.status
    if status is None or status.allocation is None:
        return "pending"
    return "reserved" if status.reserved_for else "allocated"


def pod_status(pod: Pod) -> str:
    """pending (no node), bound (a node, no phase yet), or its phase in lower case."""
    if pod.metadata.deletion_timestamp:
        return "deleting"
    phase = (pod.status.phase or "") if pod.status else ""
    if phase and phase != "Pending":
        return phase.lower()
    return "bound" if pod.spec.node_name else "pending"


def claims_view(facts: Facts, namespace: str = "", status: str = "") -> dict[str, Any]:
    claims = facts.scheduler.store.list(ResourceClaim)
    users = _claim_users(facts.scheduler.store.list(Pod))
    rows = []
    for claim in claims:
        state = claim_status(claim)
        if (namespace and claim.namespace != namespace) or (status and state != status):
            continue
        allocation = claim.status.allocation if claim.status else None
        results = allocation.devices.results if allocation else ()
        rows.append(
            {
                "namespace": claim.namespace,
                "name": claim.name,
                "status": state,
                "requests": [r.name for r in claim.spec.devices.requests],
                "devices": [f"{r.driver}/{r.pool}/{r.device}" for r in results],
                "pods": users.get((claim.namespace, claim.name), []),
                "extendedResources": is_extended(claim),
            }
        )
    return {
        "version": facts.version,
        "namespaces": sorted({c.namespace for c in claims}),
        "statuses": list(CLAIM_STATUSES),
        "claims": rows,
    }


def pods_view(facts: Facts, namespace: str = "", status: str = "") -> dict[str, Any]:
    pods = facts.scheduler.store.list(Pod)
    rows = []
    for pod in pods:
        state = pod_status(pod)
        if (namespace and pod.namespace != namespace) or (status and state != status):
            continue
        rows.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "status": state,
                "node": pod.spec.node_name,
                "claims": pod_claim_names(pod),
                "message": scheduling_message(pod),
            }
        )
    return {
        "version": facts.version,
        "namespaces": sorted({p.namespace for p in pods}),
        "statuses": list(POD_STATUSES),
        "pods": rows,
    }


def claim_view(facts: Facts, namespace: str, name: str) -> dict[str, Any]:
    """A claim's requests, the devices it was given (with their attributes and node), and the
    pods that reserve it or name it. Raises NotFound."""
    store = facts.scheduler.store
    claim = store.get(ResourceClaim, name, namespace)
    devices = {d.ref: d for node in facts.nodes for d in node.devices}
    allocation = claim.status.allocation if claim.status else None
    results = allocation.devices.results if allocation else ()
    reserved = claim.status.reserved_for if claim.status else ()
    return {
        "version": facts.version,
        "namespace": claim.namespace,
        "name": claim.name,
        "status": claim_status(claim),
        "extendedResources": is_extended(claim),
        "requests": [_request(r) for r in claim.spec.devices.requests],
        "constraints": [
            {
                "requests": list(c.requests),
                "matchAttribute": c.match_attribute,
                "distinctAttribute": c.distinct_attribute,
            }
            for c in claim.spec.devices.constraints
        ],
        "devices": [
            _allocated_device(
                r.request,
                devices.get(DeviceRef(r.driver, r.pool, r.device)),
                DeviceRef(r.driver, r.pool, r.device),
                r.share_id,
                {k: str(q) for k, q in r.consumed_capacity.items()},
            )
            for r in results
        ],
        "reservedFor": [{"resource": r.resource, "name": r.name, "uid": r.uid} for r in reserved],
        "pods": _claim_users(store.list(Pod, claim.namespace)).get((namespace, name), []),
    }


def scheduling_message(pod: Pod) -> str:
    """What the scheduler last said about the pod (its PodScheduled condition)."""
    conditions = pod.status.conditions if pod.status else ()
    found = next((c for c in conditions if c.type == "PodScheduled"), None)
    return (found.message or found.reason or "") if found is not None else ""


def pod_claim_names(pod: Pod) -> list[str]:
    """The claims a pod uses: those its spec.resourceClaims resolve to, then the one the
    scheduler made for its DRA-served extended resources (`nvidia.com/gpu: 1` through a
    DeviceClass's extendedResourceName, KEP-5004), recorded in its status."""
    names = [n for e in pod.spec.resource_claims if (n := recorded_claim_name(pod, e))]
    extended = pod.status.extended_resource_claim_status if pod.status else None
    if extended is not None and extended.resource_claim_name:
        names.append(extended.resource_claim_name)
    return names


def is_extended(claim: ResourceClaim) -> bool:
    """The claim was generated for a pod's extended resources."""
    return claim.metadata.annotations.get(EXTENDED_RESOURCE_ANNOTATION) == "true"


def _claim_users(pods: Sequence[Pod]) -> dict[tuple[str, str], list[str]]:
    """(namespace, claim) -> names of the pods that use it (`pod_claim_names`)."""
    out: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        for claim in pod_claim_names(pod):
            out.setdefault((pod.namespace, claim), []).append(pod.name)
    return out


def _request(r: DeviceRequest) -> dict[str, Any]:
    options = [r.exactly] if r.exactly else list(r.first_available)
    return {
        "name": r.name,
        "firstAvailable": not r.exactly,
        "options": [
            {
                "name": getattr(o, "name", "") or r.name,
                "deviceClassName": o.device_class_name,
                "allocationMode": o.allocation_mode or "ExactCount",
                "count": o.count if o.count is not None else 1,
                "selectors": [s.cel.expression for s in o.selectors if s.cel is not None],
                "capacity": {
                    k: str(q) for k, q in (o.capacity.requests if o.capacity else {}).items()
                },
            }
            for o in options
            if o is not None
        ],
    }


def _allocated_device(
    request: str,
    facts: DeviceFacts | None,
    ref: DeviceRef,
    share_id: str | None,
    consumed: dict[str, str],
) -> dict[str, Any]:
    """An allocated device: what it is, where, and its health (None: not published now)."""
    device = facts.entry.device if facts is not None else None
    return {
        "request": request,
        "device": f"{ref.driver}/{ref.pool}/{ref.device}",
        "driver": ref.driver,
        "pool": ref.pool,
        "name": ref.device,
        "node": facts.node if facts is not None else None,
        "healthy": facts.healthy if facts is not None else None,
        "faults": list(facts.faults) if facts is not None else [],
        "shareID": share_id,
        "consumedCapacity": consumed,
        "attributes": {k: a.value for k, a in device.attributes.items()} if device else {},
        "capacity": {k: str(c.value) for k, c in device.capacity.items()} if device else {},
    }
