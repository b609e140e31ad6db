"""Where a gang with a topology constraint goes: one domain (one value of a node label)
for all its pods, chosen once for the whole gang.

Upstream's topology-aware workload scheduling (KEP-4671's follow-up) places a pod group
inside one domain of `schedulingConstraints.topology[0].key`. kubedra chooses the domain
before the gang's first pod is tried, from what the gang still needs and what each domain
has free: of the domains where everything fits, the one with the fewest free devices of
the classes the gang asks for (best fit), so that a large domain stays whole for a large
gang. The count is an estimate (a device is counted for a request when it passes the
request's DeviceClass; the request's own selectors, constraints, CPU and memory are left
to the allocator): when the chosen domain does not take the gang after all, its pods fail
there and the gang backs off as a whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from kubedra.allocator import NodeInfo
from kubedra.allocator.inventory import DeviceEntry, Inventory
from kubedra.api.core import Pod
from kubedra.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
)
from kubedra.api.scheduling import PodGroup
from kubedra.scheduler.claims import (
    group_claim_name,
    group_entry,
    pod_group_of,
    recorded_claim_name,
)
from kubedra.scheduler.framework.interfaces import Handle


def gang_need(handle: Handle, pods: Iterable[Pod]) -> Counter[str]:
    """Devices per DeviceClass that `pods` still need (claims not allocated yet; a claim
    shared by several pods counted once; `allocationMode: All` not counted)."""
    need: Counter[str] = Counter()
    seen: set[str] = set()
    claims = handle.cache.of(ResourceClaim)
    templates = handle.cache.of(ResourceClaimTemplate)
    for pod in pods:
        group = pod_group_of(pod)
        pg = handle.cache.of(PodGroup).get(group) if group is not None else None
        for entry in pod.spec.resource_claims:
            spec: ResourceClaimSpec | None = None
            shared = group_entry(pg, entry) if isinstance(pg, PodGroup) else None
            name: str | None = recorded_claim_name(pod, entry)
            if shared is not None:  # the group's claim (KEP-5729): counted once
                assert isinstance(pg, PodGroup)
                name = group_claim_name(pg, shared) or f"\x00group\x00{entry.name}"
            if name is not None:
                if name in seen:
                    continue
                seen.add(name)
                claim = claims.get((pod.namespace, name))
                if isinstance(claim, ResourceClaim):
                    if claim.status is not None and claim.status.allocation is not None:
                        continue
                    spec = claim.spec
            if spec is None and entry.resource_claim_template_name:
                template = templates.get((pod.namespace, entry.resource_claim_template_name))
                if isinstance(template, ResourceClaimTemplate):
                    spec = template.spec.spec
            if spec is not None:
                need.update(_spec_need(spec))
    return need


def _spec_need(spec: ResourceClaimSpec) -> Counter[str]:
    need: Counter[str] = Counter()
    for request in spec.devices.requests:
        # firstAvailable: the first alternative, the one the allocator prefers
        exact = request.exactly or (request.first_available[0] if request.first_available else None)
        if exact is None or (exact.allocation_mode or "ExactCount") != "ExactCount":
            continue
        need[exact.device_class_name] += exact.count or 1
    return need


def domain_free(handle: Handle, key: str, classes: Iterable[str]) -> dict[str, Counter[str]]:
    """Free devices per domain (value of label `key`) and per class of `classes`, on the
    nodes this scheduler owns; a domain with none free is listed with an empty count."""
    known = handle.classes()
    wanted = {c: known[c] for c in classes if c in known}
    view, inventory = handle.view(), handle.inventory()
    free: dict[str, Counter[str]] = {}
    for node in handle.nodes():
        value = node.metadata.labels.get(key)
        if value is None:
            continue
        counts = free.setdefault(value, Counter())
        devices = view.nodes.get(node.name)
        if devices is None or not wanted:
            continue
        info = NodeInfo(node.name, node.metadata.labels)
        for pool in inventory.pools_for(info, handle.features):
            for entry, usable in pool.devices:
                if not usable or not entry.node_local or entry.ref in devices.used:
                    continue
                for name, klass in wanted.items():
                    if _passes(inventory, klass, entry, handle.strict_cel):
                        counts[name] += 1
    return free


def _passes(inventory: Inventory, klass: DeviceClass, entry: DeviceEntry, strict: bool) -> bool:
    try:
        return all(
            inventory.matches(s.cel.expression, entry, strict=strict)
            for s in klass.spec.selectors
            if s.cel is not None
        )
    except Exception:  # a selector that fails on a device does not select it
        return False


def best_fit(need: Mapping[str, int], free: Mapping[str, Counter[str]]) -> str | None:
    """The domain where `need` fits with the fewest devices of those classes free (ties:
    the smaller value); None when no domain takes it."""
    fits = [
        (sum(counts[c] for c in need), value)
        for value, counts in free.items()
        if all(counts[c] >= n for c, n in need.items())
    ]
    return min(fits)[1] if fits else None


def no_domain(key: str, need: Mapping[str, int], free: Mapping[str, Counter[str]]) -> str:
    """Why no domain takes the gang, with the numbers."""
    if not free:
        return f"no node has the label {key} of the pod group's topology constraint"
    # the class the domains lack most of
    klass = max(need, key=lambda c: (need[c] - max(f[c] for f in free.values()), c))
    largest = max(free, key=lambda v: (free[v][klass], v))
    return (
        f"the gang needs {need[klass]} device(s) of class {klass} in one {key}; "
        f"the largest {key} has {free[largest][klass]} free ({largest})"
    )
