"""GangScheduling: the pods of a PodGroup with a gang policy are placed all or nothing,
and those of a group with a topology constraint all in one domain.

Upstream's plugin of the same name (KEP-4671, workload-aware scheduling) gates a gang's
pods at PreEnqueue until minCount of them exist, and holds each reserved pod at Permit
until minCount are reserved or bound, then lets them all bind together. kubedra does the
same at its extension points:

    PreEnqueue  a pod of a group waits (parked, quietly) until its PodGroup exists and, for
                a gang, until minCount pods of the group exist and none of its pending
                pods is held back by another PreEnqueue plugin (a claim kube-controller-
                manager has not made yet: upstream's queue gates a pod group as a whole
                while any of its pods is gated); the one that completes it brings its
                parked or backed-off siblings to the active queue, so that a gang's pods
                are tried together (PrioritySort also keeps them adjacent)
    PreFilter   with a topology key, the gang's domain: the one its members already hold,
                else the best fit among the domains whose nodes take its pending members
                (packed node by node, `topology.py`), leaving out a domain where the gang
                failed at placement (PostFilter) until something there is freed; none
                fitting ends the cycle with the numbers
    NodeFilter  refuses the nodes outside that domain (before DynamicResources allocates)
    PostFilter  a member that fits nowhere while others wait: once the gang can no longer
                reach minCount, the waiting members are rejected at once (their devices
                go back before the next pod is tried), so a gang that cannot complete
                never holds what another gang needs
    Permit      a reserved member waits until minCount of the gang are reserved or bound
                (at most the gang timeout), then all waiting members are allowed
    Unreserve   a member given back (timed out, rejected, a failed write) takes the
                waiting rest of its gang with it: nothing of a gang is held partly
    PostBind    PodGroupInitiallyScheduled=True once minCount are bound

Claims are allocated in the store only at PreBind, which runs after Permit allows: a gang
that never completes leaves no allocation behind (claims generated from templates exist,
unallocated, as the resourceclaim controller would have made them). A claim of the
PodGroup itself (KEP-5729) is allocated by the first member placed, in the view only, and
reused by the others (the allocator keeps them where its devices are reachable); it is
written once, at the first PreBind, reserved for the group, and counts once in the
topology domain's need.

PodGroups come from the scheduler's feed like the other kinds (`FEED_KINDS`), so a group
created after its pods wakes them at once.

The gang timeout (how long reserved members wait for the rest) is the Scheduler's
`gang_timeout`, `kubedra scheduler run --gang-timeout`; upstream's Permit waits 5 minutes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from kubedra.api.core import ENDED_PHASES, Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.scheduling import PodGroup
from kubedra.scheduler.framework.interfaces import (
    ALLOW,
    Candidate,
    Handle,
    NodeFilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    Verdict,
)
from kubedra.scheduler.framework.state import CycleState, Diagnosis, PodInfo
from kubedra.scheduler.framework.status import Unschedulable, Waiting
from kubedra.scheduler.plugins.gang import status, topology
from kubedra.scheduler.queue import MAX_BACKOFF_S, PodKey, pod_key

NAME = "GangScheduling"
GANG_TIMEOUT_S = 300.0  # upstream's Permit timeout for a gang (5 minutes)
# A gang's backed-off siblings are brought to the active queue at most this often (s):
# the longest backoff, so that one gang's retries never keep the queue from emptying.
SIBLINGS_EVERY_S = MAX_BACKOFF_S
OUTSIDE_DOMAIN = "node(s) didn't match the pod group's topology domain"

GroupKey = tuple[str, str]  # (namespace, PodGroup name)


def group_key(pod: Pod) -> GroupKey | None:
    group = pod.spec.scheduling_group
    if group is None or not group.pod_group_name:
        return None
    return (pod.namespace, group.pod_group_name)


def min_count(pg: PodGroup) -> int:
    gang = pg.spec.scheduling_policy.gang
    return max(gang.min_count, 1) if gang is not None else 1


@dataclass(frozen=True, slots=True)
class GangState:
    group: GroupKey
    pg: PodGroup
    nodes: frozenset[str] | None  # the topology domain's nodes (None: no constraint)
    key: str = ""  # the topology key
    domain: str | None = None  # the topology domain


class GangScheduling(
    PreEnqueuePlugin,
    PreFilterPlugin,
    NodeFilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PermitPlugin,
    PostBindPlugin,
):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self.timeout = handle.gang_timeout
        self._attempts = itertools.count()
        # Members that fit nowhere while others of their gang wait, per gang.
        self._failed: dict[GroupKey, set[PodKey]] = {}
        # Topology domains where a gang failed at placement: domain -> its free matching
        # devices then (tried again once more is free there).
        self._failed_domains: dict[GroupKey, dict[str, int]] = {}
        # The domain last chosen per gang, with its free matching devices then.
        self._chosen: dict[GroupKey, tuple[str, int]] = {}
        self._siblings_at: dict[GroupKey, float] = {}
        # Pods this plugin's PreEnqueue parked (waiting for the group to form), per group:
        # only those are activated at once when it forms; a sibling parked for another
        # reason (a claim not made yet) waits for that, or the throttled hurry below.
        self._gated: dict[GroupKey, set[PodKey]] = {}
        # Members (uids) that passed the other PreEnqueue plugins once, per group (what
        # those wait for, a claim made, does not go away): each is asked about once.
        self._ready: dict[GroupKey, set[str]] = {}

    # --- what the plugin reads -------------------------------------------------------------

    def pod_group(self, group: GroupKey) -> PodGroup | None:
        """The group as the scheduler's feed has it (absent also on a cluster that does not
        serve the API); a group that appears wakes its parked pods (`eventhandlers.py`)."""
        found = self.handle.cache.of(PodGroup).get(group)
        return found if isinstance(found, PodGroup) else None

    def members(self, group: GroupKey) -> list[Pod]:
        """The group's pods that count: neither ended nor being deleted (the cache's
        version, so a reserved member is on its node)."""
        out = []
        for obj in self.handle.cache.of(Pod).values():
            if not isinstance(obj, Pod) or group_key(obj) != group:
                continue
            ended = obj.status is not None and obj.status.phase in ENDED_PHASES
            if not ended and not obj.metadata.deletion_timestamp:
                out.append(obj)
        return out

    def _waiting(self, members: Iterable[Pod]) -> list[PodKey]:
        waiting = self.handle.waiting
        return [k for k in map(pod_key, members) if k in waiting]

    # --- PreEnqueue ----------------------------------------------------------------------

    def pre_enqueue(self, pod: Pod) -> str:
        group = group_key(pod)
        if group is None:
            return ""
        pg = self.pod_group(group)
        if pg is None:
            self._gated.setdefault(group, set()).add(pod_key(pod))
            return f'waiting for pods\'s pod group "{group[1]}" to appear in scheduling queue'
        members = self.members(group)
        if len(members) < min_count(pg):
            self._gated.setdefault(group, set()).add(pod_key(pod))
            return "waiting for minCount pods from a gang to appear in scheduling queue"
        if pg.spec.scheduling_policy.gang is not None:
            why = self._held_back(group, members)
            if why:
                self._gated.setdefault(group, set()).add(pod_key(pod))
                return why
        self._bring_siblings(group, pod, members)
        return ""

    def _held_back(self, group: GroupKey, members: list[Pod]) -> str:
        """Why a pending member of the gang may not be tried yet, by another PreEnqueue
        plugin (a claim the controller has not made), or "". Trying the others meanwhile
        would place part of the gang on what the held member will not need (a topology
        domain chosen without its devices, another gang's room), and fail it when that
        member comes: upstream's queue keeps a pod group gated while any of its pods is.
        The member is parked by its own PreEnqueue and woken by its claim's event; the
        first of the gang tried after that finds none held and brings the rest."""
        others = [p for p in self.handle.framework.pre_enqueues if p is not self]
        ready = self._ready.setdefault(group, set())
        ready &= {m.metadata.uid or "" for m in members}  # forget pods gone
        for member in members:
            uid = member.metadata.uid or ""
            if member.spec.node_name or uid in ready:
                continue
            for plugin in others:
                why = plugin.pre_enqueue(member)
                if why:
                    return f"waiting for pod {member.name} of the gang: {why}"
            ready.add(uid)
        return ""

    def _bring_siblings(self, group: GroupKey, pod: Pod, members: list[Pod]) -> None:
        """Try the gang's other pending pods now too: those parked (waiting for the gang
        to form) always, those backing off at most once in SIBLINGS_EVERY_S (a gang that
        fails then backs off as a whole rather than pod by pod, and is never retried in a
        loop)."""
        queue = self.handle.queue
        now = queue.clock()
        backed_off = now - self._siblings_at.get(group, -SIBLINGS_EVERY_S) >= SIBLINGS_EVERY_S
        if backed_off:
            self._siblings_at[group] = now
        gated = self._gated.pop(group, set())
        for member in members:
            if member.metadata.uid != pod.metadata.uid and not member.spec.node_name:
                key = pod_key(member)
                if not (key in gated and queue.activate(key)) and backed_off:
                    queue.hurry(key)

    # --- PreFilter -----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, info: PodInfo) -> None:
        group = group_key(info.pod)
        if group is None:
            return
        pg = self.pod_group(group)
        if pg is None:
            raise Waiting(f'waiting for pod\'s pod group "{group[1]}"', quiet=True)
        constraints = pg.spec.scheduling_constraints
        key = constraints.topology[0].key if constraints and constraints.topology else ""
        domain = self._domain(pg, group, key, info.pod) if key else None
        nodes = (
            frozenset(n.name for n in self.handle.nodes() if n.metadata.labels.get(key) == domain)
            if key
            else None
        )
        state.write(NAME, GangState(group, pg, nodes, key, domain))

    def signature(self, state: CycleState, info: PodInfo) -> bytes:
        """A gang member is like no other pod (its domain and its siblings matter): each
        attempt has a signature of its own, so a failure is always diagnosed afresh."""
        if state.get(NAME, GangState) is None:
            return b""
        return b"gang\x00%d\x00" % next(self._attempts)

    def _domain(self, pg: PodGroup, group: GroupKey, key: str, pod: Pod) -> str:
        """The gang's domain: the one its placed members hold, else the best fit for what
        its pending members need (`topology.choose`), leaving out the domains where it
        failed at placement since (until something there is freed)."""
        handle = self.handle
        members = self.members(group)
        domain = topology.held_domain(handle, members, key)
        if domain is not None:
            return domain
        pending = [m for m in members if not m.spec.node_name] or [pod]
        required = max(min_count(pg) - (len(members) - len(pending)), 1)
        choice = topology.choose(handle, pending, key, required, self._failed_domains.get(group))
        if choice.domain is None:
            self._gang_failed(pod, choice.reason, pg)
            raise Unschedulable(choice.reason)
        self._chosen[group] = (choice.domain, choice.fits[choice.domain].spare)
        return choice.domain

    # --- NodeFilter ----------------------------------------------------------------------

    def filter_node(
        self,
        state: CycleState,
        info: PodInfo,
        node: Node,
        index: int,
        found: list[Candidate] | None,
        diagnosis: Diagnosis,
    ) -> list[Candidate]:
        gang = state.get(NAME, GangState)
        if gang is not None and gang.nodes is not None and node.name not in gang.nodes:
            diagnosis.add(OUTSIDE_DOMAIN)
            return []
        return found if found is not None else [Candidate(node.name, (), ())]

    # --- PostFilter ----------------------------------------------------------------------

    def post_filter(self, state: CycleState, info: PodInfo, diagnosis: Diagnosis) -> str:
        gang = state.get(NAME, GangState)
        if gang is not None:
            if gang.domain is not None:
                self._domain_failed(gang)
            self._gang_failed(info.pod, diagnosis.summary(), gang.pg)
        return ""

    def _domain_failed(self, gang: GangState) -> None:
        """A member fits nowhere in the gang's chosen domain: that domain is left out of
        the gang's next choices until more is free there than when it was chosen (the
        gang's own members, given back, free nothing new)."""
        assert gang.domain is not None
        chosen = self._chosen.get(gang.group)
        if chosen is None or chosen[0] != gang.domain:
            return  # the domain its bound members hold: not a choice of this plugin's
        self._failed_domains.setdefault(gang.group, {})[gang.domain] = chosen[1]

    def _gang_failed(self, pod: Pod, why: str, pg: PodGroup) -> None:
        """A member fits nowhere: say so on the group; reject the waiting members once the
        gang can no longer reach minCount in this attempt."""
        group = group_key(pod)
        assert group is not None
        members = self.members(group)
        waiting = self._waiting(members)
        # one message for the group (not naming the pod): the same reason is written once
        message = f"a pod of the pod group cannot be placed: {why}"
        if waiting:
            failed = self._failed.setdefault(group, set())
            failed.add(pod_key(pod))
            if len(members) - len(failed) < min_count(pg):
                self._reject(group, waiting, message)
        else:
            self._failed.pop(group, None)
        if not status.initially_scheduled(pg):
            status.report(self.handle, pg, False, message)

    def _reject(self, group: GroupKey, waiting: Iterable[PodKey], why: str) -> None:
        self._failed.pop(group, None)
        for key in waiting:
            self.handle.waiting.reject(key, f"gang rejected: {why}")

    # --- Reserve / Unreserve -------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        """Nothing to assume: Permit counts the members the cache has on nodes."""

    def unreserve(
        self, state: CycleState, pod: Pod, candidate: Candidate, written: Iterable[KubeObject]
    ) -> None:
        gang = state.get(NAME, GangState)
        if gang is None or gang.pg.spec.scheduling_policy.gang is None:
            return
        waiting = [k for k in self._waiting(self.members(gang.group)) if k != pod_key(pod)]
        if waiting:
            self._reject(gang.group, waiting, f"pod {pod.name} of the gang was given back")

    # --- Permit --------------------------------------------------------------------------

    def permit(self, state: CycleState, pod: Pod, candidate: Candidate) -> Verdict:
        gang = state.get(NAME, GangState)
        if gang is None or gang.pg.spec.scheduling_policy.gang is None:
            return ALLOW
        members = self.members(gang.group)
        needed = min_count(gang.pg)
        # Reserve put this pod on its node in the cache, as every waiting member is.
        placed = sum(1 for m in members if m.spec.node_name)
        waiting = [k for k in self._waiting(members) if k != pod_key(pod)]
        if placed >= needed:
            self._ready.pop(gang.group, None)
            self._failed.pop(gang.group, None)
            self._failed_domains.pop(gang.group, None)
            self._chosen.pop(gang.group, None)
            for key in waiting:
                self.handle.waiting.allow(key, NAME)
            return ALLOW
        failed = self._failed.get(gang.group, set()) - {pod_key(pod)}
        if len(members) - len(failed) < needed:
            # upstream's wording (its PlacementFeasible)
            remaining = len(members) - len(failed) - placed
            why = (
                f"minCount ({needed}) cannot be satisfied: {placed} scheduled, "
                f"{remaining} remaining"
            )
            self._reject(gang.group, waiting, why)
            return Verdict(reject=why)
        return Verdict(timeout=self.timeout)

    # --- PostBind ------------------------------------------------------------------------

    def post_bind(self, state: CycleState, pod: Pod, candidate: Candidate) -> None:
        gang = state.get(NAME, GangState)
        if gang is None or status.initially_scheduled(gang.pg):
            return
        members = self.members(gang.group)
        waiting = set(self._waiting(members))
        bound = sum(1 for m in members if m.spec.node_name and pod_key(m) not in waiting)
        needed = min_count(gang.pg)
        if bound >= needed:
            pg = self.pod_group(gang.group) or gang.pg
            message = f"{bound} pod(s) of the pod group bound (minCount {needed})"
            status.report(self.handle, pg, True, message)
