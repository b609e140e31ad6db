"""`kubedra explain pod` for a pod already bound: its devices, why those, and the funnel.

A bound pod's claims hold their devices, so a funnel of the cluster as it is now would
count those devices as taken and find the pod fitting nowhere. The funnel is computed as
the scheduler saw the cluster before the bind: these claims unallocated, their devices and
the pod's CPU and memory on its node free, every other claim and pod as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from kubedra.allocator import AllocatedState
from kubedra.api.core import Pod
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceRequestAllocationResult,
    DeviceSelector,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.cli.columns import device_memory, device_product
from kubedra.cluster.store import Store
from kubedra.scheduler.explain import NodeGroup, explain_claims, pod_claims
from kubedra.scheduler.nodes import pod_requests
from kubedra.scheduler.scheduler import Scheduler


class BeforeBind(Scheduler):
    """The scheduler's view of the cluster with `pod` not placed yet."""

    def __init__(self, store: Store, pod: Pod, strict_cel: bool) -> None:
        super().__init__(store, strict_cel=strict_cel)
        self.pod = pod
        self._held: set[str] = set()
        self._before: AllocatedState | None = None

    def release(self, claims: Sequence[ResourceClaim]) -> list[ResourceClaim]:
        """The claims as they were before allocation (their devices free for the funnel)."""
        self._held = {c.metadata.uid or "" for c in claims}
        self._before = None
        return [msgspec.structs.replace(c, status=None) for c in claims]

    def allocated(self) -> AllocatedState:
        if self._before is None:
            others = self.store.list(ResourceClaim, None)
            self._before = AllocatedState.from_claims(
                c for c in others if c.metadata.uid not in self._held
            )
        return self._before

    def node_usage(self) -> dict[str, dict[str, Quantity]]:
        usage = {node: dict(used) for node, used in super().node_usage().items()}
        mine = usage.get(self.pod.spec.node_name or "", {})
        for name, quantity in pod_requests(self.pod).items():
            if name in mine:
                mine[name] = mine[name].sub(quantity)
        return usage


def explain_bound(store: Store, pod: Pod, strict_cel: bool) -> tuple[list[str], list[NodeGroup]]:
    """Lines naming each allocated device and why it qualified, and the node groups of the
    funnel as the scheduler saw it before the bind."""
    scheduler = BeforeBind(store, pod, strict_cel)
    claims = pod_claims(scheduler, pod)
    unplaced = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=None))
    groups = explain_claims(scheduler, scheduler.release(claims), unplaced)
    products = _products(store, pod.spec.node_name or "")
    lines = []
    for claim in claims:
        alloc = claim.status.allocation if claim.status else None
        for result in alloc.devices.results if alloc else ():
            device = f"{result.driver}/{result.pool}/{result.device}"
            product = products.get((result.driver, result.device), "")
            lines.append(f"  {claim.name}/{result.request}: {device}{product}")
            lines.append(f"    why: {_why(claim, result, scheduler)}")
    if lines:
        lines.append(f"  placement: {_choice(groups, pod.spec.node_name or '')}")
    return lines, groups


def _choice(groups: Sequence[NodeGroup], node: str) -> str:
    """How much choice the placement policy had: fitting nodes, and devices on this one."""
    fitting = sum(len(g.nodes) for g in groups if g.fits)
    here = next((g for g in groups if node in g.nodes), None)
    devices = ", ".join(f"{f.fit} for {f.request}" for f in here.funnels) if here else "none"
    return (
        f"{node} is 1 of {fitting} node(s) that fit, with devices that fit: {devices}; "
        "the scheduler's placement policy chose among them"
    )


def _why(claim: ResourceClaim, result: DeviceRequestAllocationResult, sched: Scheduler) -> str:
    """The selectors the device passed: its class's and the request's own."""
    request, _, sub = result.request.partition("/")
    entry = next((r for r in claim.spec.devices.requests if r.name == request), None)
    subs = entry.first_available if entry is not None else ()
    exact = entry.exactly if entry is not None else None
    wanted = next((s for s in subs if s.name == sub), None) if sub else exact
    if wanted is None:
        return "no request of this name in the claim's spec"
    device_class = sched.classes().get(wanted.device_class_name)
    parts = [
        f"DeviceClass {wanted.device_class_name} selects "
        + _selectors(device_class.spec.selectors if device_class else ())
    ]
    if wanted.selectors:
        parts.append("the request adds " + _selectors(wanted.selectors))
    if result.admin_access:
        parts.append("admin access: the device stays available to others")
    return "; ".join(parts)


def _selectors(selectors: Sequence[DeviceSelector]) -> str:
    expressions = [s.cel.expression for s in selectors if s.cel is not None]
    return " && ".join(expressions) if expressions else "every device"


def _products(store: Store, node: str) -> dict[tuple[str, str], str]:
    """(driver, device) -> ` (product, memory)` for the node's devices."""
    out = {}
    for rs in store.list(ResourceSlice, field_selector=f"spec.nodeName={node}"):
        for d in rs.spec.devices:
            facts = [x for x in (device_product(d), device_memory(d)) if x]
            out[(rs.spec.driver, d.name)] = f" ({', '.join(facts)})" if facts else ""
    return out
