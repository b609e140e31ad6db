"""Pending pods and why they wait: kubedra's explanation, the funnel per node group.

A pod is pending while it has no node, has not ended and is not being deleted (whoever its
scheduler). Its explanation is `kubedra explain pod -o json`'s, built by the same functions:
nodes grouped by outcome, for each group the node filter that excluded it or the blockers
and, per request, the device funnel; and what would make it fit. Besides, the unhealthy
devices its requests would take (a health taint keeps them off), with their faults.
Explaining runs the allocator on every node, so only the first `limit` pods are explained.
The pods of a gang are shown together, one entry per PodGroup with `kubedra explain
podgroup`'s one-line verdict (the same function), rather than pod by pod.
"""

from __future__ import annotations

from typing import Any

from kubedra.api.core import ENDED_PHASES, Pod
from kubedra.errors import KubedraError
from kubedra.scheduler.explain import (
    GANG_WAITING_GROUP,
    NodeGroup,
    explain_claims,
    explain_gang,
    gang_json,
    group_json,
    group_reason,
    pod_claims,
    what_would_fit,
)
from kubedra.scheduler.plugins.gang.plugin import group_key
from kubedra.scheduler.scheduler import Unschedulable
from kubedra.web.facts import Facts
from kubedra.web.fleet import unhealthy_admitted
from kubedra.web.workloads import scheduling_message

DEFAULT_LIMIT = 25


def is_pending(pod: Pod) -> bool:
    ended = pod.status is not None and pod.status.phase in ENDED_PHASES
    return not pod.spec.node_name and not ended and not pod.metadata.deletion_timestamp


def pending_view(facts: Facts, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    pods = [p for p in facts.scheduler.store.list(Pod) if is_pending(p)]
    gangs, alone = pending_gangs(facts, pods)
    return {
        "version": facts.version,
        "total": len(pods),
        "explained": min(len(alone), limit) + (len(pods) - len(alone)),
        "gangs": gangs,
        "pods": [explain_pod(facts, p) if i < limit else _head(p) for i, p in enumerate(alone)],
    }


def pending_gangs(facts: Facts, pods: list[Pod]) -> tuple[list[dict[str, Any]], list[Pod]]:
    """The pending pods of gangs (a PodGroup with a gang policy, or one that does not exist
    yet) as one entry per group, `kubedra explain podgroup`'s verdict; and the other pods.
    The pods of a basic group are placed one by one: they are explained one by one."""
    groups: dict[tuple[str, str], list[Pod]] = {}
    for pod in pods:
        key = group_key(pod)
        if key is not None:
            groups.setdefault(key, []).append(pod)
    gangs: list[dict[str, Any]] = []
    grouped: set[str] = set()
    for (namespace, name), waiting in sorted(groups.items()):
        try:
            gang = explain_gang(facts.scheduler, namespace, name)
        except KubedraError:
            continue
        if not gang.gang and gang.state != GANG_WAITING_GROUP:
            continue
        grouped.update(p.metadata.uid or f"{p.namespace}/{p.name}" for p in waiting)
        gangs.append(
            {
                **gang_json(gang),
                "namespace": namespace,
                "name": name,
                "verdict": gang.verdict,
                "pending": [p.name for p in waiting],
            }
        )
    alone = [p for p in pods if (p.metadata.uid or f"{p.namespace}/{p.name}") not in grouped]
    return gangs, alone


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
    out["whatWouldFit"] = what_would_fit(groups)
    out["unhealthyDevices"] = unhealthy_admitted(facts, claims)
    return out


def _head(pod: Pod) -> dict[str, Any]:
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "message": scheduling_message(pod),
        "claims": [e.name for e in pod.spec.resource_claims],
    }


def _group(group: NodeGroup) -> dict[str, Any]:
    """`kubedra explain -o json`'s node group, with its blockers in one line."""
    return {**group_json(group), "blocker": None if group.fits else group_reason(group)}
