"""What must hold of claims and pods on a store, whatever was killed or deleted when.

`always` holds at every instant (allocation and binding are ordered writes); `settled`
holds once a scheduler has run after the last change (reservations of gone pods dropped,
claims nobody holds freed).
"""

from __future__ import annotations

from collections import Counter

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster.store import Store
from kubedra.scheduler.scheduler import FINALIZER


def device_holders(claims: list[ResourceClaim]) -> Counter[str]:
    held: Counter[str] = Counter()
    for claim in claims:
        if claim.status is not None and claim.status.allocation is not None:
            for r in claim.status.allocation.devices.results:
                held[f"{r.driver}/{r.pool}/{r.device}"] += 1
    return held


def always(store: Store) -> list[str]:
    """No device held by two claims; every bound pod's claims are allocated on its node and
    reserved for it (its uid)."""
    claims = {c.name: c for c in store.list(ResourceClaim, namespace=None)}
    problems = [f"device {d} allocated {n} times" for d, n in device_holders(list(claims.values())).items() if n > 1]
    for pod in store.list(Pod, namespace=None):
        if not pod.spec.node_name:
            continue
        for recorded in pod.status.resource_claim_statuses if pod.status else ():
            claim = claims.get(recorded.resource_claim_name or "")
            status = claim.status if claim is not None else None
            if status is None or status.allocation is None:
                problems.append(f"bound pod {pod.name}: claim {recorded.resource_claim_name} not allocated")
                continue
            if pod.metadata.uid not in {r.uid for r in status.reserved_for}:
                problems.append(f"bound pod {pod.name}: claim {claim.name if claim else '?'} not reserved for it")
            pools = {r.pool for r in status.allocation.devices.results}
            if pools != {pod.spec.node_name}:
                problems.append(f"bound pod {pod.name} on {pod.spec.node_name}: devices on {sorted(pools)}")
    return problems


def settled(store: Store) -> list[str]:
    """No claim reserved for a pod that is gone; no claim allocated that nobody holds; no
    claim kept from deletion by the scheduler's finalizer when nobody holds it."""
    live = {p.metadata.uid for p in store.list(Pod, namespace=None)}
    problems = []
    for claim in store.list(ResourceClaim, namespace=None):
        reserved = claim.status.reserved_for if claim.status else ()
        dead = [r.name for r in reserved if r.uid not in live]
        if dead:
            problems.append(f"claim {claim.name} reserved for gone pod(s) {dead}")
        if not reserved and claim.status is not None and claim.status.allocation is not None:
            problems.append(f"claim {claim.name} allocated but held by nobody")
        if not reserved and claim.metadata.deletion_timestamp and FINALIZER in claim.metadata.finalizers:
            problems.append(f"claim {claim.name} being deleted but kept by the scheduler's finalizer")
    return problems
