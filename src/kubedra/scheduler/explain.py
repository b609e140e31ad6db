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
from kubedra.errors import NotFound
from kubedra.scheduler.claims import generated_claim, recorded_claim_name
from kubedra.scheduler.hints import hints
from kubedra.scheduler.plugins.gang import status, topology
from kubedra.scheduler.plugins.gang.need import Need, gang_need
from kubedra.scheduler.plugins.gang.packing import DomainFit, Packer
from kubedra.scheduler.plugins.gang.plugin import GangScheduling, min_count
from kubedra.scheduler.scheduler import Scheduler, Unschedulable
from kubedra.scheduler.selectors import summarise_selector as summarise_selector


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
    shared = (
        scheduler.shared_nodes(besides=pod) if pod is not None and scheduler.others.refuse else {}
    )
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


# --- gangs -------------------------------------------------------------------------------
#
# Why a PodGroup is placed, waits, or fits nowhere, in one line with the numbers: computed
# live from the scheduler's view with the GangScheduling plugin's own functions (its
# members, minCount, `topology.choose`, `cluster_fit`, `held_domain`, `refusal`), so that
# the line says what the plugin will decide, in the words of the PodGroup's condition. The
# counts are the plugin's: devices passing the request's class and its own selectors,
# packed node by node (a member counts where all its devices fit on one node).

GANG_SCHEDULED = "scheduled"
GANG_WAITING_PODS = "waiting for pods"
GANG_WAITING_GROUP = "waiting for its PodGroup"
GANG_UNSCHEDULABLE = "unschedulable"
GANG_PENDING = "pending"
# Without a topology constraint the free devices are counted over this label, which the
# kubelet sets on every node.
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class GangMember:
    name: str
    node: str  # "" while pending
    message: str  # pending: what the scheduler last said (its PodScheduled condition)


@dataclass(frozen=True)
class GangExplanation:
    namespace: str
    name: str
    state: str  # one of GANG_*
    reason: str  # the one line, with the numbers
    min_count: int  # 0 when the PodGroup does not exist
    topology_key: str
    members: tuple[GangMember, ...]
    condition: str  # the PodGroupInitiallyScheduled condition in one line ("" when none)
    gang: bool = False  # the PodGroup has a gang policy (all or nothing)

    @property
    def verdict(self) -> str:
        return f"{self.state}: {self.reason}"


def explain_gang(scheduler: Scheduler, namespace: str, name: str) -> GangExplanation:
    """The verdict on PodGroup `namespace/name` (NotFound when neither it nor a pod naming
    it exists), its members and its condition."""
    scheduler.refresh()
    plugin = GangScheduling(scheduler)
    group = (namespace, name)
    pg = plugin.pod_group(group)
    pods = sorted(plugin.members(group), key=lambda p: p.name)
    members = tuple(GangMember(p.name, p.spec.node_name or "", _scheduled_message(p)) for p in pods)
    if pg is None:
        if not pods:
            raise NotFound(f'PodGroup "{name}" not found')
        reason = f"{len(pods)} pod(s) name pod group {name}, which does not exist"
        return GangExplanation(namespace, name, GANG_WAITING_GROUP, reason, 0, "", members, "")
    needed = min_count(pg)
    constraints = pg.spec.scheduling_constraints
    key = constraints.topology[0].key if constraints and constraints.topology else ""
    found = status.condition(pg)
    condition = (
        ""
        if found is None
        else f"{found.type}={found.status} ({found.reason or 'no reason'}): {found.message or ''}"
    )
    state, reason = _gang_verdict(scheduler, pods, needed, key, status.initially_scheduled(pg))
    gang = pg.spec.scheduling_policy.gang is not None
    return GangExplanation(namespace, name, state, reason, needed, key, members, condition, gang)


def _scheduled_message(pod: Pod) -> str:
    conditions = pod.status.conditions if pod.status else ()
    found = next((c for c in conditions if c.type == "PodScheduled"), None)
    return (found.message or found.reason or "") if found is not None else ""


def _gang_verdict(
    scheduler: Scheduler, pods: Sequence[Pod], needed: int, key: str, scheduled: bool
) -> tuple[str, str]:
    bound = [p for p in pods if p.spec.node_name]
    held = topology.held_domain(scheduler, bound, key) if key else None
    if scheduled or (bound and len(bound) >= needed):
        nodes = sorted({p.spec.node_name or "" for p in bound})
        where = f" in {key} {held}" if key and held else ""
        on = f", on {_names(nodes)}" if nodes else ""
        return GANG_SCHEDULED, f"{len(bound)} of minCount {needed} pod(s) bound{where}{on}"
    if len(pods) < needed:
        return GANG_WAITING_PODS, f"has {len(pods)} of minCount {needed} pod(s)"
    pending = [p for p in pods if not p.spec.node_name]
    required = max(needed - len(bound), 1)
    short = key.rpartition("/")[2] or key
    if not key or held is not None:
        need, fit = (
            topology.cluster_fit(scheduler, pending)
            if held is None
            else _domain_fit(scheduler, pending, key, held)
        )
        if not need:
            return GANG_PENDING, "the gang claims no devices: its pods wait only for the scheduler"
        by_class = need.by_class
        lacking = [c for c in sorted(by_class) if by_class[c] > fit.free[c]]
        has = ", ".join(f"{fit.free[c]}{_of(c, by_class)} free" for c in (lacking or by_class))
        room = (
            ""
            if lacking or fit.members >= required
            else (f" but room for {fit.members} of {len(pending)} pod(s)")
        )
        wants = need.describe()
        if held is not None:  # members bound already: the rest must join their domain
            line = f"needs {wants} more in {short} {held}, where its bound pods are; it has {has}"
        else:
            line = f"needs {wants}; the cluster has {has}"
        if lacking or room:
            return GANG_UNSCHEDULABLE, line + room
        return GANG_PENDING, ("fits by count: " if held is None else "") + line
    choice = topology.choose(scheduler, pending, key, required)
    if choice.domain is None:  # before the devices: a gang may be refused for its CPU alone
        return GANG_UNSCHEDULABLE, choice.reason
    if not choice.need:
        return GANG_PENDING, "the gang claims no devices: its pods wait only for the scheduler"
    fit = choice.fits[choice.domain]
    by_class = choice.need.by_class
    has = ", ".join(f"{fit.free[c]}{_of(c, by_class)}" for c in sorted(by_class))
    return GANG_PENDING, (
        f"fits in {short} {choice.domain} (best fit): needs {choice.need.describe()} in one "
        f"{key}; it has {has} free"
    )


def _domain_fit(
    scheduler: Scheduler, pods: Sequence[Pod], key: str, value: str
) -> tuple[Need, DomainFit]:
    need = gang_need(scheduler, pods)
    nodes = topology.domains(scheduler, key).get(value, [])
    return need, Packer(scheduler, need).fit(value, nodes)


def _names(names: Sequence[str], shown: int = 4) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _of(klass: str, need: Mapping[str, int]) -> str:
    """` of class c` where the gang asks for several classes (one: the count says it)."""
    return f" of class {klass}" if len(need) > 1 else ""


def gang_json(gang: GangExplanation) -> dict[str, Any]:
    """`kubedra explain podgroup -o json`."""
    return {
        "object": f"podgroup {gang.namespace}/{gang.name}",
        "state": gang.state,
        "reason": gang.reason,
        "minCount": gang.min_count,
        "topologyKey": gang.topology_key or None,
        "gang": gang.gang,
        "members": [
            {"pod": m.name, "node": m.node or None, "message": m.message or None}
            for m in gang.members
        ],
        "condition": gang.condition or None,
    }
