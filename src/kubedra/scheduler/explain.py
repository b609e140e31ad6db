"""Why a pod (or claim) lands where it does, or nowhere: the funnel per group of nodes.

Nodes with the same outcome are grouped (eight identical L4 nodes are one line), so the
explanation of a 5,000-node cluster stays readable. For each group: the node filter that
excluded it, or for each request the device funnel (in pools -> class selectors -> request
selectors -> untainted -> free -> fit), the allocator's one-line summary, and the blockers:
the stage that stopped each claim there, with its numbers (kubedra's; upstream says "cannot
allocate all claims"). `what_would_fit` then answers, where that is cheap, what the nearest
node lacks (nearest by what the claim needs: devices passing its selectors, then free ones),
and first, for a claim that no node of the cluster could hold even with all its devices
free, the kind of node that would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from kubedra.allocator import Blocker, RequestFunnel, explain, holders_of
from kubedra.allocator.blockers import Holders
from kubedra.api.core import Node, Pod
from kubedra.api.quantity import Quantity
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate
from kubedra.scheduler.claims import generated_claim, recorded_claim_name
from kubedra.scheduler.hints import hints
from kubedra.scheduler.scheduler import Scheduler, Unschedulable


@dataclass(frozen=True)
class NodeGroup:
    """Nodes with one outcome: fits, excluded by a node filter, or by the allocator."""

    nodes: tuple[str, ...]
    fits: bool
    summary: str
    funnels: tuple[RequestFunnel, ...] = ()
    blockers: tuple[Blocker, ...] = ()  # those of the group's first node (holders differ)


def explain_claims(
    scheduler: Scheduler, claims: Sequence[ResourceClaim], pod: Pod | None = None
) -> list[NodeGroup]:
    """The outcome of allocating `claims` (for `pod`, whose node filters apply) per node group."""
    scheduler.refresh()
    usage = scheduler.node_usage()
    holders = holders_of(scheduler.store.list(ResourceClaim, None))
    # The scheduler leaves nodes alone where another one allocates devices: say so, as a
    # blocker of those nodes, rather than "fits" where it will not place the pod.
    shared = scheduler.shared_nodes() if pod is not None and scheduler.others.refuse else {}
    groups: dict[tuple[object, ...], list[str]] = {}
    info: dict[tuple[object, ...], NodeGroup] = {}
    for node in scheduler.nodes():
        if node.name in shared:
            group = _shared(scheduler, shared[node.name])
        else:
            group = _outcome(scheduler, claims, pod, node, usage.get(node.name, {}), holders)
        key = (
            group.fits,
            group.summary,
            tuple(f.counts for f in group.funnels),
            tuple((b.detail, b.fits_free, b.limit and b.limit.detail) for b in group.blockers),
        )
        groups.setdefault(key, []).append(node.name)
        info.setdefault(key, group)
    out = [
        NodeGroup(tuple(names), g.fits, g.summary, g.funnels, g.blockers)
        for k, names in groups.items()
        for g in [info[k]]
    ]
    return sorted(out, key=lambda g: (not g.fits, -len(g.nodes), g.nodes))


def _shared(scheduler: Scheduler, other: str) -> NodeGroup:
    mine = "/".join(scheduler.names)
    detail = (
        f"{other} allocates devices on this node: {mine} leaves it alone (two schedulers "
        "could pick the same device; give it nodes of its own, or --shared-nodes=warn)"
    )
    blocker = Blocker("node", "", "", 0, 1, detail, f"shared with {other}")
    return NodeGroup((), False, f"node shared with {other}", blockers=(blocker,))


def _outcome(
    scheduler: Scheduler,
    claims: Sequence[ResourceClaim],
    pod: Pod | None,
    node: Node,
    used: Mapping[str, Quantity],
    holders: Holders,
) -> NodeGroup:
    if pod is not None:
        fit = scheduler.node_fit(pod, node, used)
        if not fit.fits:
            blocker = Blocker("node", "", "", 0, 1, fit.reason, fit.reason)
            return NodeGroup((node.name,), False, fit.reason, blockers=(blocker,))
    namespace = pod.namespace if pod is not None else (claims[0].namespace if claims else "")
    result = explain(
        *scheduler.allocator_inputs(claims, node),
        holders=holders,
        **scheduler.allocator_options(namespace),
    )
    fits = result.allocation is not None and result.allocation.results is not None
    summary = "fits" if fits else result.summary
    return NodeGroup((node.name,), fits, summary, result.funnels, result.blockers)


def what_would_fit(groups: Sequence[NodeGroup]) -> list[str]:
    """Where nothing fits, what would (`hints`), judged on each group's first node: the
    groups are every node of the cluster, so a claim no node could ever hold says so."""
    if any(g.fits for g in groups):
        return []
    return hints(((g.nodes[0], g.blockers) for g in groups), every_node=True)


def group_reason(group: NodeGroup) -> str:
    """Why a group fits nowhere in one line: its blockers, else the allocator's summary."""
    return "; ".join(str(b) for b in group.blockers) or group.summary


def group_json(group: NodeGroup) -> dict[str, Any]:
    """A node group for tools (`-o json`): nodes, outcome, funnels and blockers."""
    return {
        "nodes": list(group.nodes),
        "fits": group.fits,
        "summary": group.summary,
        "requests": [
            {
                "claim": f.claim,
                "request": f.request,
                "mode": f.mode,
                "wanted": f.wanted,
                "funnel": dict(f.rows()),
                "bottleneck": f.bottleneck,
            }
            for f in group.funnels
        ],
        "blockers": [
            {
                "kind": b.kind,
                "claim": b.claim,
                "request": b.request,
                "have": b.have,
                "need": b.need,
                "detail": b.detail,
                "heldBy": {claim: n for claim, n in b.holders},
                "fitsIfReleased": list(b.release),
                "suggestion": b.fix or None,
                "devicesMatching": b.matching,
                "devicesUsable": b.usable,
                "devicesNeeded": b.needed,
                "fitsWithAllDevicesFree": b.fits_free,
                "limit": None if b.limit is None else b.limit.short,
            }
            for b in group.blockers
        ],
    }


def pod_claims(scheduler: Scheduler, pod: Pod) -> list[ResourceClaim]:
    """The pod's claims as the scheduler resolves them (templates: the generated claim, or
    an unsaved one when not generated yet, so a pending pod can be explained; likewise the
    claim of its extended resources)."""
    scheduler.refresh()
    claims = []
    for entry in pod.spec.resource_claims:
        name = recorded_claim_name(pod, entry)
        if name:
            claim = scheduler.store.get(ResourceClaim, name, pod.namespace)
        elif entry.resource_claim_template_name:
            template = scheduler.store.get(
                ResourceClaimTemplate, entry.resource_claim_template_name, pod.namespace
            )
            claim = _unsaved(generated_claim(pod, entry, template))
        else:
            raise Unschedulable(f"pod claim {entry.name!r} names no claim")
        claims.append(claim)
    extended = scheduler.extended_claim(pod)  # the claim of DRA-served extended resources
    if extended is not None and not extended.metadata.uid:
        extended = _unsaved(extended)  # created by the binding cycle, once a node is chosen
    return claims + ([extended] if extended is not None else [])


def _unsaved(claim: ResourceClaim) -> ResourceClaim:
    """A claim not generated yet, named by its prefix (`pod-entry-`) so that blockers and
    hints say whose it is (the API server adds the suffix only when creating it)."""
    meta = msgspec.structs.replace(claim.metadata, name=claim.metadata.generate_name)
    return msgspec.structs.replace(claim, metadata=meta)
