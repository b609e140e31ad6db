"""Check every allocation in a store against its slices and classes, whoever made it.

For each allocated claim the allocator itself is the judge: it allocates the claim again
on the node the allocation is for, each request preferring exactly the devices it holds.
A valid allocation is then the first solution it finds (every device matches its class
and request selectors, counts and constraints hold), so the claim is valid when the
allocator returns the same devices, request for request. Then what concerns the cluster:
no device held by two claims, every reservation names a live pod (or a PodGroup that
exists, KEP-5729: one entry for the whole group), and every bound pod's claims are
allocated, reserved for it or for its PodGroup, and admit its node. Taints are left out: a device
tainted after its allocation keeps it (evicting is the taint controller's part).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from kubedra.allocator import (
    AllocatedState,
    AllocationError,
    DeviceRef,
    Features,
    Inventory,
    NodeInfo,
    RequestKey,
    allocate,
)
from kubedra.api.core import Node, Pod
from kubedra.api.resource import (
    AllocationResult,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup
from kubedra.api.selection import NodeSelectorError, node_selector_matches
from kubedra.cluster.store import Store
from kubedra.errors import KubedraError
from kubedra.scheduler.binding import reserved_for
from kubedra.scheduler.claims import is_podgroup_consumer, pod_group_of

# Against slices and classes only: a taint added since the allocation does not undo it.
_CHECK_FEATURES = Features(device_taints=False, device_taint_rules=False)


def check_allocations(store: Store) -> list[str]:
    """Every problem found, one line each (empty: all allocations valid)."""
    claims = store.list(ResourceClaim, namespace=None)
    pods = store.list(Pod, namespace=None)
    nodes = {n.name: n for n in store.list(Node)}
    inventory = Inventory.build(store.list(ResourceSlice), features=_CHECK_FEATURES)
    classes = {c.name: c for c in store.list(DeviceClass)}
    by_uid = {p.metadata.uid: p for p in pods}
    groups = _pod_groups(store)
    problems = _double_held(claims)
    for claim in claims:
        allocation = claim.status.allocation if claim.status else None
        if allocation is None:
            continue
        node = _node_of(claim, allocation, pods, by_uid, nodes)
        if node is None:
            problems.append(f"claim {_name(claim)}: allocated, but no node its allocation admits")
            continue
        problems += _check_claim(claim, allocation, node, inventory, classes)
        problems += _check_reservations(claim, by_uid, groups)
    for pod in pods:
        problems += _check_bound_pod(pod, claims, nodes)
    return problems


def _check_claim(
    claim: ResourceClaim,
    allocation: AllocationResult,
    node: Node,
    inventory: Inventory,
    classes: dict[str, DeviceClass],
) -> list[str]:
    held: dict[str, list[DeviceRef]] = {}
    for r in allocation.devices.results:
        held.setdefault(r.request, []).append(DeviceRef(r.driver, r.pool, r.device))

    def prefer_held(key: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
        mine = set(held.get(key.request, ()))
        return sorted(refs, key=lambda ref: ref not in mine)  # stable: the rest keep order

    unallocated = _without_allocation(claim)
    try:
        again = allocate(
            [unallocated],
            NodeInfo(node.name, node.metadata.labels),
            inventory,
            classes,
            AllocatedState(),
            features=_CHECK_FEATURES,
            order=prefer_held,
        )
    except AllocationError as err:
        return [f"claim {_name(claim)} on node {node.name}: {err}"]
    if again.results is None:
        why = again.unsatisfiable.summary if again.unsatisfiable else "no fit"
        return [
            f"claim {_name(claim)} on node {node.name}: its request cannot be met there ({why})"
        ]
    found = _pairs(again.results[0])
    recorded = _pairs(allocation)
    if found != recorded:
        return [
            f"claim {_name(claim)} on node {node.name}: holds {sorted(recorded)}, "
            f"but a valid allocation preferring them is {sorted(found)}"
        ]
    return []


def _pod_groups(store: Store) -> set[str | None]:
    """The uids of the PodGroups (none where the server does not serve them)."""
    try:
        return {pg.metadata.uid for pg in store.list(PodGroup, namespace=None)}
    except KubedraError:
        return set()


def _check_reservations(
    claim: ResourceClaim, pods: dict[str | None, Pod], groups: set[str | None]
) -> list[str]:
    problems = []
    for consumer in claim.status.reserved_for if claim.status else ():
        if is_podgroup_consumer(consumer):
            if consumer.uid not in groups:
                problems.append(
                    f"claim {_name(claim)}: reserved for pod group {consumer.name}, which is gone"
                )
            continue
        pod = pods.get(consumer.uid)
        if pod is None:
            problems.append(
                f"claim {_name(claim)}: reserved for pod {consumer.name}, which is gone"
            )
        elif not pod.spec.node_name:
            problems.append(f"claim {_name(claim)}: reserved for pod {consumer.name}, not bound")
    return problems


def _check_bound_pod(pod: Pod, claims: list[ResourceClaim], nodes: dict[str, Node]) -> list[str]:
    if not pod.spec.node_name:
        return []
    by_name = {(c.namespace, c.name): c for c in claims}
    statuses = pod.status.resource_claim_statuses if pod.status else ()
    names = [e.resource_claim_name for e in pod.spec.resource_claims if e.resource_claim_name]
    names += [s.resource_claim_name for s in statuses if s.resource_claim_name]
    problems = []
    for name in names:
        claim = by_name.get((pod.namespace, name or ""))
        allocation = claim.status.allocation if claim and claim.status else None
        where = f"pod {pod.namespace}/{pod.name} on {pod.spec.node_name}"
        if claim is None or allocation is None:
            problems.append(f"{where}: claim {name} is not allocated")
            continue
        if not (reserved_for(claim, pod.metadata.uid) or _reserved_for_group(claim, pod)):
            problems.append(f"{where}: claim {name} is not reserved for it")
        node = nodes.get(pod.spec.node_name)
        if node is not None and not _admits(allocation, node):
            problems.append(f"{where}: claim {name}'s allocation does not admit the node")
    return problems


def _reserved_for_group(claim: ResourceClaim, pod: Pod) -> bool:
    """Reserved for the pod's PodGroup (upstream's test: the entry names the group the pod
    names, since a pod does not know its group's uid)."""
    group = pod_group_of(pod)
    return group is not None and any(
        is_podgroup_consumer(r) and r.name == group[1]
        for r in (claim.status.reserved_for if claim.status else ())
    )


def _double_held(claims: list[ResourceClaim]) -> list[str]:
    holders: Counter[str] = Counter()
    for claim in claims:
        allocation = claim.status.allocation if claim.status else None
        for r in allocation.devices.results if allocation else ():
            if not r.admin_access and r.share_id is None:
                holders[f"{r.driver}/{r.pool}/{r.device}"] += 1
    return [f"device {d} is allocated to {n} claims" for d, n in sorted(holders.items()) if n > 1]


def _node_of(
    claim: ResourceClaim,
    allocation: AllocationResult,
    pods: list[Pod],
    by_uid: dict[str | None, Pod],
    nodes: dict[str, Node],
) -> Node | None:
    """The node of a pod the claim is reserved for (or of a bound pod of the PodGroup it is
    reserved for, on a node the allocation admits), else the first its allocation admits."""
    for consumer in claim.status.reserved_for if claim.status else ():
        if is_podgroup_consumer(consumer):
            group = (claim.namespace, consumer.name)
            for member in pods:
                node = nodes.get(member.spec.node_name or "")
                if node is not None and pod_group_of(member) == group and _admits(allocation, node):
                    return node
            continue
        pod = by_uid.get(consumer.uid)
        if pod is not None and pod.spec.node_name in nodes:
            return nodes[pod.spec.node_name]
    return next((n for _, n in sorted(nodes.items()) if _admits(allocation, n)), None)


def _admits(allocation: AllocationResult, node: Node) -> bool:
    if allocation.node_selector is None:
        return True
    try:
        return node_selector_matches(allocation.node_selector, node.name, node.metadata.labels)
    except NodeSelectorError:
        return False


def _pairs(allocation: AllocationResult) -> set[tuple[str, str]]:
    return {(r.request, f"{r.driver}/{r.pool}/{r.device}") for r in allocation.devices.results}


def _without_allocation(claim: ResourceClaim) -> ResourceClaim:
    return msgspec.structs.replace(claim, status=None)


def _name(claim: ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}"
