"""Why a pod (or claim) lands where it does, or nowhere: the funnel per group of nodes.

Nodes with the same outcome are grouped (eight identical L4 nodes are one line), so the
explanation of a 5,000-node cluster stays readable. For each group: the node filter that
excluded it, or for each request the device funnel (in pools -> class selectors -> request
selectors -> untainted -> free -> fit) and the allocator's one-line summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubedra.allocator import RequestFunnel, explain
from kubedra.api.core import Node, Pod
from kubedra.api.quantity import Quantity
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate
from kubedra.scheduler.claims import generated_claim, recorded_claim_name
from kubedra.scheduler.scheduler import Scheduler, Unschedulable


@dataclass(frozen=True)
class NodeGroup:
    """Nodes with one outcome: fits, excluded by a node filter, or by the allocator."""

    nodes: tuple[str, ...]
    fits: bool
    summary: str
    funnels: tuple[RequestFunnel, ...] = ()


def explain_claims(
    scheduler: Scheduler, claims: Sequence[ResourceClaim], pod: Pod | None = None
) -> list[NodeGroup]:
    """The outcome of allocating `claims` (for `pod`, whose node filters apply) per node group."""
    scheduler.refresh()
    usage = scheduler.node_usage()
    groups: dict[tuple[object, ...], list[str]] = {}
    info: dict[tuple[object, ...], NodeGroup] = {}
    for node in scheduler.nodes():
        group = _outcome(scheduler, claims, pod, node, usage.get(node.name, {}))
        key = (group.fits, group.summary, tuple(f.counts for f in group.funnels))
        groups.setdefault(key, []).append(node.name)
        info.setdefault(key, group)
    out = [
        NodeGroup(tuple(names), info[k].fits, info[k].summary, info[k].funnels)
        for k, names in groups.items()
    ]
    return sorted(out, key=lambda g: (not g.fits, -len(g.nodes), g.nodes))


def _outcome(
    scheduler: Scheduler,
    claims: Sequence[ResourceClaim],
    pod: Pod | None,
    node: Node,
    used: Mapping[str, Quantity],
) -> NodeGroup:
    if pod is not None:
        fit = scheduler.node_fit(pod, node, used)
        if not fit.fits:
            return NodeGroup((node.name,), False, fit.reason)
    namespace = pod.namespace if pod is not None else (claims[0].namespace if claims else "")
    result = explain(
        *scheduler.allocator_inputs(claims, node), **scheduler.allocator_options(namespace)
    )
    fits = result.allocation is not None and result.allocation.results is not None
    summary = "fits" if fits else result.summary
    return NodeGroup((node.name,), fits, summary, result.funnels)


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
            claim = generated_claim(pod, entry, template)
        else:
            raise Unschedulable(f"pod claim {entry.name!r} names no claim")
        claims.append(claim)
    extended = scheduler.extended_claim(pod)  # the claim of DRA-served extended resources
    return claims + ([extended] if extended is not None else [])
