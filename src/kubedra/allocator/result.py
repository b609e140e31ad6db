"""Building each claim's `AllocationResult` in exactly upstream's shape."""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.allocator.search import Pick, ReqData, claim_name
from kubedra.allocator.types import AllocationError, Features, NodeInfo
from kubedra.api.core import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from kubedra.api.resource import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
)


def device_result(pick: Pick, features: Features) -> DeviceRequestAllocationResult:
    device = pick.entry.device
    binding = features.binding_conditions
    consumed = {}
    if pick.consumed is not None:
        # Status names use the spelling the device publishes (upstream capacityNameForStatus).
        consumed = {pick.entry.capacity[fq][0]: q for fq, q in pick.consumed.items()}
    return DeviceRequestAllocationResult(
        request=pick.req.full,
        driver=pick.entry.ref.driver,
        pool=pick.entry.ref.pool,
        device=pick.entry.ref.device,
        admin_access=True if pick.req.admin else None,  # true or absent, never false
        tolerations=pick.req.tolerations,  # verbatim copy of the (sub)request's tolerations
        binding_conditions=device.binding_conditions if binding else (),
        binding_failure_conditions=device.binding_failure_conditions if binding else (),
        share_id=pick.share_id,
        consumed_capacity=consumed,
    )


def configs(
    claim: ResourceClaim, chosen: Sequence[ReqData]
) -> tuple[DeviceAllocationConfiguration, ...]:
    """Class configs first (once per class, listing the requests that used it), then claim
    configs in spec order.

    DECISION (§7 item 14): class configs keep 1.36's explicit request lists; a claim config
    is copied once even when it names several requests (master's fix of 1.36's duplicates),
    with its request list as written; configs naming only unselected subrequests are dropped.
    """
    out: list[DeviceAllocationConfiguration] = []
    by_class: dict[str, tuple[ReqData, list[str]]] = {}
    for rd in chosen:
        entry = by_class.setdefault(rd.klass.name, (rd, []))
        entry[1].append(rd.full)
    for rd, names in by_class.values():
        for cfg in rd.klass.spec.config:
            out.append(
                DeviceAllocationConfiguration(
                    source="FromClass", requests=tuple(names), opaque=cfg.opaque
                )
            )
    used: set[str] = set()
    for rd in chosen:
        used.add(rd.full)
        if rd.parent is not None:
            used.add(rd.parent)
    for claim_cfg in claim.spec.devices.config:
        if not claim_cfg.requests or any(r in used for r in claim_cfg.requests):
            out.append(
                DeviceAllocationConfiguration(
                    source="FromClaim", requests=claim_cfg.requests, opaque=claim_cfg.opaque
                )
            )
    return tuple(out)


def node_selector(
    claim: ResourceClaim, picks: Sequence[Pick], node: NodeInfo, features: Features
) -> NodeSelector | None:
    """Upstream createNodeSelector (§7 item 13): a node-local or bindsToNode device pins the
    claim to the node; otherwise all selectors are ANDed into one de-duplicated term; only
    allNodes devices -> None (usable everywhere)."""
    exprs: list[NodeSelectorRequirement] = []
    fields: list[NodeSelectorRequirement] = []
    seen: set[tuple[bool, str, str, frozenset[str]]] = set()
    for pick in picks:
        entry = pick.entry
        if entry.node_local or (features.binding_conditions and entry.device.binds_to_node):
            req = NodeSelectorRequirement(key="metadata.name", operator="In", values=(node.name,))
            return NodeSelector(node_selector_terms=(NodeSelectorTerm(match_fields=(req,)),))
        selector = entry.node_selector
        if selector is None:
            continue
        terms = selector.node_selector_terms
        if len(terms) != 1:
            raise AllocationError(
                f"create NodeSelector for claim {claim_name(claim)}: unsupported "
                f"ResourceSlice.NodeSelector with {len(terms)} terms"
            )
        for is_field, reqs, target in (
            (False, terms[0].match_expressions, exprs),
            (True, terms[0].match_fields, fields),
        ):
            for req in reqs:
                key = (is_field, req.key, req.operator, frozenset(req.values))
                if key not in seen:
                    seen.add(key)
                    target.append(req)
    if not exprs and not fields:
        return None
    term = NodeSelectorTerm(match_expressions=tuple(exprs), match_fields=tuple(fields))
    return NodeSelector(node_selector_terms=(term,))


def build(
    claim: ResourceClaim,
    picks: Sequence[Pick],
    chosen: Sequence[ReqData],
    node: NodeInfo,
    features: Features,
) -> AllocationResult:
    """The claim's allocation; `chosen` = the request data used per request, in spec order."""
    return AllocationResult(
        devices=DeviceAllocationResult(
            results=tuple(device_result(p, features) for p in picks),
            config=configs(claim, chosen),
        ),
        node_selector=node_selector(claim, picks, node, features),
    )
