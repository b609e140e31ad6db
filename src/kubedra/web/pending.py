"""Pending pods and why they wait: kubedra's explanation, the funnel per node group.

A pod is pending while it has no node, has not ended and is not being deleted (whoever its
scheduler). Its explanation is `kubedra explain pod`'s: nodes grouped by outcome, for each
group the node filter that excluded it or, per request, the device funnel. The blocker of a
group is the first funnel stage that leaves fewer devices than the request needs.
Explaining runs the allocator on every node, so only the first `limit` pods are explained.
"""

from __future__ import annotations

from typing import Any

from kubedra.allocator import RequestFunnel
from kubedra.api.core import Pod
from kubedra.errors import KubedraError
from kubedra.scheduler.explain import NodeGroup, explain_claims, pod_claims
from kubedra.scheduler.scheduler import ENDED_PHASES, Unschedulable
from kubedra.web.facts import Facts
from kubedra.web.workloads import scheduling_message

DEFAULT_LIMIT = 25


def is_pending(pod: Pod) -> bool:
    ended = pod.status is not None and pod.status.phase in ENDED_PHASES
    return not pod.spec.node_name and not ended and not pod.metadata.deletion_timestamp


def pending_view(facts: Facts, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    pods = [p for p in facts.scheduler.store.list(Pod) if is_pending(p)]
    return {
        "version": facts.version,
        "total": len(pods),
        "explained": min(len(pods), limit),
        "pods": [explain_pod(facts, p) if i < limit else _head(p) for i, p in enumerate(pods)],
    }


def explain_pod(facts: Facts, pod: Pod) -> dict[str, Any]:
    out = _head(pod)
    try:
        claims = pod_claims(facts.scheduler, pod)
        groups = explain_claims(facts.scheduler, claims, pod)
    except (KubedraError, Unschedulable) as err:
        out["error"] = str(err)
        return out
    out["groups"] = [_group(g) for g in groups]
    out["fits"] = sum(len(g.nodes) for g in groups if g.fits)
    return out


def _head(pod: Pod) -> dict[str, Any]:
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "message": scheduling_message(pod),
        "claims": [e.name for e in pod.spec.resource_claims],
    }


def _group(group: NodeGroup) -> dict[str, Any]:
    return {
        "nodes": list(group.nodes),
        "fits": group.fits,
        "summary": group.summary,
        "blocker": None if group.fits else blocker(group),
        "funnels": [_funnel(f) for f in group.funnels],
    }


def blocker(group: NodeGroup) -> str:
    """The first stage where a request runs short, or the group's own summary."""
    for f in group.funnels:
        stage = f.bottleneck
        if stage is not None:
            count = dict(f.rows())[stage]
            return f"{f.request}: {stage} ({count} of {f.wanted} needed)"
    return group.summary


def _funnel(f: RequestFunnel) -> dict[str, Any]:
    return {
        "claim": f.claim,
        "request": f.request,
        "wanted": f.wanted,
        "mode": f.mode,
        "stages": [{"stage": s, "count": c} for s, c in f.rows()],
        "bottleneck": f.bottleneck,
    }
