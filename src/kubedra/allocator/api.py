"""`allocate`: one Allocate call of upstream's structured allocator, for one node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubedra.allocator import explain as _explain
from kubedra.allocator.blockers import Holders, diagnose, results_limit
from kubedra.allocator.explain import Blocker, RequestFunnel, Unsatisfiable
from kubedra.allocator.inventory import Inventory
from kubedra.allocator.nodes import NodeSelectorError, selector_matches
from kubedra.allocator.result import build
from kubedra.allocator.search import CelSelectorError, DeviceOrder, ReqData, Search, claim_name
from kubedra.allocator.state import AllocatedState
from kubedra.allocator.types import (
    DEFAULT_FEATURES,
    AllocationError,
    AllocationTimeout,
    Features,
    NodeInfo,
    ResultsLimitExceeded,
)
from kubedra.api.resource import AllocationResult, DeviceClass, ResourceClaim

ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
_NO_LABELS: Mapping[str, str] = {}


@dataclass
class Allocation:
    """One result per claim, in input order; or None with the reason."""

    results: list[AllocationResult] | None
    unsatisfiable: Unsatisfiable | None = None
    steps: int = 0  # search steps (upstream's allocateOne invocations)

    @property
    def ok(self) -> bool:
        return self.results is not None


class AdminAccessDenied(AllocationError):
    """An admin-access request in a namespace without the admin-access label."""


def _check_admin_namespace(claims: Sequence[ResourceClaim], labels: Mapping[str, str]) -> None:
    # The API server admits admin-access requests only in namespaces labelled for it; the
    # allocator itself never checks (upstream). Enforced here only when the caller passes the
    # namespace's labels.
    if not labels or labels.get(ADMIN_NAMESPACE_LABEL) == "true":
        return
    for claim in claims:
        for request in claim.spec.devices.requests:
            if request.exactly is not None and request.exactly.admin_access:
                raise AdminAccessDenied(
                    f"claim {claim_name(claim)}, request {request.name}: admin access to devices "
                    f'requires the {ADMIN_NAMESPACE_LABEL}: "true" label on the namespace'
                )


def allocate(
    claims: Sequence[ResourceClaim],
    node: NodeInfo,
    inventory: Inventory,
    classes: Mapping[str, DeviceClass],
    allocated: AllocatedState,
    *,
    namespace_labels: Mapping[str, str] = _NO_LABELS,
    features: Features = DEFAULT_FEATURES,
    order: DeviceOrder | None = None,
    strict_cel: bool = False,
    timeout_s: float = 10.0,
    max_steps: int | None = None,
) -> Allocation:
    """Allocate all `claims` together on `node`, first fit in upstream's order.

    Claims that already have `status.allocation` are not searched (the scheduler passes
    only unallocated claims to upstream's allocator and checks allocated ones separately):
    their existing allocation is returned as is when its node selector admits the node,
    and otherwise the node is unsatisfiable. Their devices must already be in `allocated`.

    Raises AllocationError for fatal input problems (upstream's Allocate error) and
    AllocationTimeout when the search exceeds `timeout_s` or `max_steps`.
    """
    _check_admin_namespace(claims, namespace_labels)
    pending = [c for c in claims if c.status is None or c.status.allocation is None]
    for claim in claims:
        existing = claim.status.allocation if claim.status is not None else None
        if existing is not None and existing.node_selector is not None:
            try:
                fits = selector_matches(existing.node_selector, node)
            except NodeSelectorError as exc:
                raise AllocationError(f"claim {claim_name(claim)}: {exc}") from None
            if not fits:
                # Upstream checks an allocated claim's node selector before allocating.
                summary = f"claim {claim_name(claim)}: allocation is not available on node"
                blocker = Blocker(
                    "allocated claim's node selector", claim_name(claim), "", 0, 1,
                    "already allocated, with a node selector that excludes this node",
                    "allocated claim's node selector excludes the node",
                )  # fmt: skip
                return Allocation(
                    None, Unsatisfiable(f"{summary} {node.name}", node.name, blockers=(blocker,))
                )
    search = Search(
        pending,
        node,
        inventory,
        classes,
        allocated,
        features=features,
        order=order,
        strict_cel=strict_cel,
        timeout_s=timeout_s,
        max_steps=max_steps,
    )
    search.prepare()
    if not search.run():
        invalid = any(p.invalid is not None for p in search.pools)
        summary = (
            "invalid resource pools were encountered" if invalid else ("cannot allocate all claims")
        )
        return Allocation(None, _explain.unsatisfiable(search, summary), search.steps)
    built = iter(
        build(claim, search.results[ci], _chosen(search, ci), node, features)
        for ci, claim in enumerate(pending)
    )
    results = [
        c.status.allocation
        if c.status is not None and c.status.allocation is not None
        else next(built)
        for c in claims
    ]
    return Allocation(results, None, search.steps)


def _chosen(search: Search, ci: int) -> list[ReqData]:
    out = []
    for ri, subs in enumerate(search.reqs[ci]):
        out.append(subs[search.selected.get((ci, ri), 0)] if subs[0].sub_index >= 0 else subs[0])
    return out


@dataclass
class Explanation:
    """What `kubedra explain` prints: the outcome, funnels, and the error if any."""

    node: str
    summary: str
    allocation: Allocation | None = None
    funnels: tuple[RequestFunnel, ...] = ()
    error: str | None = None
    cel_expression: str | None = None
    cel_device: str | None = None
    details: Unsatisfiable | None = field(default=None)
    blockers: tuple[Blocker, ...] = ()  # why it does not fit (empty when it does)


def explain(
    claims: Sequence[ResourceClaim],
    node: NodeInfo,
    inventory: Inventory,
    classes: Mapping[str, DeviceClass],
    allocated: AllocatedState,
    holders: Holders | None = None,
    **kwargs: object,
) -> Explanation:
    """Run `allocate` and explain the outcome; fatal errors become part of the answer.
    `holders` (device -> claims) lets blockers name the claims whose devices would help."""
    try:
        allocation = allocate(claims, node, inventory, classes, allocated, **kwargs)  # type: ignore[arg-type]
    except CelSelectorError as exc:
        return Explanation(
            node.name,
            str(exc),
            error=str(exc),
            cel_expression=exc.expression,
            cel_device=str(exc.device) if exc.device else None,
        )
    except AllocationError as exc:
        return Explanation(node.name, str(exc), error=str(exc), blockers=(_error_blocker(exc),))
    if allocation.unsatisfiable is not None:
        u = allocation.unsatisfiable
        why = diagnose(u, holders or {})
        return Explanation(node.name, u.summary, allocation, u.funnels, details=u, blockers=why)
    features = kwargs.get("features", Features())
    assert isinstance(features, Features)
    search = Search(
        [c for c in claims if c.status is None or c.status.allocation is None],
        node, inventory, classes, allocated, features=features, order=None,
        strict_cel=bool(kwargs.get("strict_cel", False)), timeout_s=1.0, max_steps=None,
    )  # fmt: skip
    search.prepare()
    return Explanation(node.name, "allocated", allocation, _explain.funnels(search))


def _error_blocker(exc: AllocationError) -> Blocker:
    """A fatal answer of the allocator as a blocker: the results limit, the budget, admin
    access, or input."""
    if isinstance(exc, ResultsLimitExceeded):
        return results_limit(exc.claim, exc.request, exc.need)
    kind = (
        "search budget"
        if isinstance(exc, AllocationTimeout)
        else "admin access"
        if isinstance(exc, AdminAccessDenied)
        else "error"
    )
    return Blocker(kind, "", "", 0, 1, str(exc), kind if kind != "error" else str(exc))
