"""Building each claim's `AllocationResult` in exactly upstream's shape."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from kubedra.allocator.search import Pick, ReqData
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
    entry = pick.entry
    device = entry.device
    driver, pool, name = entry.key
    binding = features.binding_conditions
    consumed = pick.consumed or {}  # keyed as the device publishes its capacity
    return DeviceRequestAllocationResult(
        request=pick.req.full,
        driver=driver,
        pool=pool,
        device=name,
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

    As 1.37: a claim config is copied once even when it names several requests, with its
    request list as written; configs naming only unselected subrequests are dropped.
    """
    if not claim.spec.devices.config and not any(rd.klass.spec.config for rd in chosen):
        return ()  # nothing to copy: the common case
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
    # 1.37: a config that names every request (or its chosen subrequest) lists none, since
    # an empty list means "all requests".
    return tuple(
        msgspec.structs.replace(cfg, requests=())
        if cfg.requests and all(_names(rd, cfg.requests) for rd in chosen)
        else cfg
        for cfg in out
    )


def _names(rd: ReqData, requests: Sequence[str]) -> bool:
    """Does a config's request list cover this request (by its name or the chosen sub)?"""
    return (rd.parent or rd.name) in requests or rd.full in requests


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
                f"create NodeSelector for claim {claim.name}: unsupported "
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
