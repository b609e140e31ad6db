"""The scheduler: pending pods in, claims allocated and pods bound out.

It is a small loop around a framework (`framework/`) whose plugins (`plugins/`) each own
one concern, run at upstream's extension points for one pod at a time:

    queue (PrioritySort) -> PreEnqueue -> PreFilter -> Filter (NodeAffinity,
    NodeResourcesFit, DynamicResources) -> NodeOrder (PlacementPolicy) -> NodeFilter
    (DynamicResources: the allocator) -> Score -> Reserve -> Permit -> PreBind
    (DynamicResources: claim writes) -> Bind (DefaultBinder) -> PostBind

This class holds what they share: the store, the cache and its derived tables
(`snapshot.py`, which plugins read through it as upstream's framework Handle), the queue,
the feed, and the profile's framework. `schedule_one.py` is one pod's scheduling and
binding cycle around the framework; `eventhandlers.py` what each change of the feed does.

The view comes from a feed (`feed.py`): the embedded store's change log, read inside the
store's transaction so that two schedulers on one file never allocate from a stale view;
or, on a cluster, watch-fed caches, where replicas elect one leader instead (`runner.py`),
and the binding cycle runs in the background while the next pod is placed (`plan`,
`write`, `finish`). A scheduler that dies after the claims are written and before the pod
is bound leaves claims reserved for the pod; the next cycle binds the pod to a node that
their allocation admits, without allocating again.

On the embedded store the scheduler also does the resourceclaim controller's part
(`claim_controller`): it generates claims from templates and frees claims of pods that
ended. On a cluster, kube-controller-manager does that, and the scheduler waits for it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kubedra.allocator import AllocatedState, DeviceRef, Features, Inventory, NodeInfo
from kubedra.api.core import ENDED_PHASES, Namespace, Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup
from kubedra.cluster.events import LogRecorder, Recorder
from kubedra.cluster.store import Store, atomic
from kubedra.errors import Conflict, NotFound
from kubedra.scheduler import eventhandlers, schedule_one
from kubedra.scheduler.binding import FINALIZER, MAX_RESERVED_FOR, PATIENCE_S
from kubedra.scheduler.feed import OPTIONAL_KINDS, Feed, LogFeed
from kubedra.scheduler.framework import (
    Framework,
    Plugin,
    Registry,
    Unschedulable,
    Waiting,
    build,
)
from kubedra.scheduler.framework.waiting import WaitingPods
from kubedra.scheduler.nodes import NodeFit, node_constraints
from kubedra.scheduler.plugins import DEFAULT_PROFILE, IN_TREE
from kubedra.scheduler.plugins.dra import DynamicResources
from kubedra.scheduler.plugins.dra.diagnosis import DIAGNOSED_NODES
from kubedra.scheduler.plugins.dra.release import release_ended
from kubedra.scheduler.plugins.extended_resources import ExtendedResources
from kubedra.scheduler.plugins.gang import GANG_TIMEOUT_S
from kubedra.scheduler.plugins.node_affinity import NodeAffinity
from kubedra.scheduler.plugins.node_resources import NodeResourcesFit
from kubedra.scheduler.policies import Policy, make_policy
from kubedra.scheduler.queue import SchedulingQueue, pod_key
from kubedra.scheduler.schedule_one import EVENT_NOTE_DETAIL, Outcome, Plan, Written
from kubedra.scheduler.sharing import OtherSchedulers
from kubedra.scheduler.snapshot import ClusterSnapshot

SCHEDULER_NAMES = ("kubedra", "default-scheduler")
# What the scheduler watches, in the order a first load lists it.
FEED_KINDS: tuple[type[KubeObject], ...] = (
    Node,
    Namespace,
    ResourceSlice,
    DeviceTaintRule,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    PodGroup,
    Pod,
)

P = TypeVar("P", bound=Plugin)

__all__ = [
    "DIAGNOSED_NODES",
    "EVENT_NOTE_DETAIL",
    "FEED_KINDS",
    "FINALIZER",
    "MAX_RESERVED_FOR",
    "OPTIONAL_KINDS",
    "SCHEDULER_NAMES",
    "Outcome",
    "Plan",
    "Scheduler",
    "Unschedulable",
    "Waiting",
    "Written",
]


class Scheduler(ClusterSnapshot):
    """Schedules the store's pending pods with one placement policy."""

    def __init__(
        self,
        store: Store,
        policy: str | Policy = "first-fit",
        *,
        scheduler_names: Sequence[str] = SCHEDULER_NAMES,
        features: Features | None = None,
        strict_cel: bool = False,
        clock: Callable[[], float] = time.monotonic,
        feed: Feed | None = None,
        claim_controller: bool = True,
        node_selector: str = "",
        shared_nodes: str = "refuse",
        recorder: Recorder | None = None,
        patience: float = PATIENCE_S,
        profile: Sequence[str] = DEFAULT_PROFILE,
        registry: Registry | None = None,
        gang_timeout: float = GANG_TIMEOUT_S,
        freeze_loaded: bool = False,
    ) -> None:
        """`feed`: where the view comes from (default: the store's change log).
        `claim_controller`: also generate claims from templates and free claims of ended
        pods (the embedded store; on a cluster kube-controller-manager does it).
        `node_selector`: a label selector of the nodes this scheduler owns (default all).
        `shared_nodes`: what to do with an owned node where another scheduler's pods hold
        devices: "refuse" to allocate devices there (it would race), or only "warn".
        `profile`: the plugins, in order (`plugins.DEFAULT_PROFILE`), from the in-tree
        registry and `registry` (plugins of one's own).
        `gang_timeout`: how long the reserved pods of a gang wait for the rest of it before
        all are given back (s; `plugins/gang/`).
        `freeze_loaded`: for a process that lives with this scheduler (the runner): the
        first full load from the store's log runs without the cyclic garbage collector
        (all it makes is kept), and then every object the process holds is moved out of
        its reach (`gc.freeze`), so that full collections stop walking the whole cache
        again and again (at 5,000 nodes, some 13 % of a run's CPU). The cache's objects
        hold no cycles: those replaced later are still freed, by reference counting."""
        super().__init__(store, features or Features(), node_selector)
        if shared_nodes not in ("refuse", "warn"):
            raise ValueError(f"shared_nodes must be refuse or warn, not {shared_nodes!r}")
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.names = tuple(scheduler_names)
        self.strict_cel = strict_cel
        self.feed: Feed = feed or LogFeed(store, FEED_KINDS)
        self.claim_controller = claim_controller
        self.queue = SchedulingQueue(clock=clock)
        self.recorder: Recorder = recorder or LogRecorder()
        self.patience = patience
        # Runs a write that nothing waits for (a PodScheduled condition): inline by default,
        # a background pool when the runner sets one.
        self.io: Callable[[Callable[[], object]], object] = lambda fn: fn()
        # Told each allocator run's status (Success, Unschedulable, Error) and seconds.
        self.on_allocate: Callable[[str, float], None] | None = None
        self.others = OtherSchedulers(self.names, self.queue.clock, shared_nodes == "refuse")
        self.loaded = False
        self.waiting: WaitingPods[Plan] = WaitingPods(clock)
        self.gang_timeout = gang_timeout
        self.freeze_loaded = freeze_loaded
        self.framework = Framework(self, build(self, profile, IN_TREE, registry or {}))
        if self.framework.queue_sort is not None:
            self.queue.order = self.framework.queue_sort.queue_key
        self.dra = _optional(self.framework, DynamicResources)
        self._affinity = _optional(self.framework, NodeAffinity)
        self._resources = _optional(self.framework, NodeResourcesFit)
        self._extended = _optional(self.framework, ExtendedResources)

    # --- the loop ---------------------------------------------------------------------

    def run_once(self) -> list[Outcome]:
        """Try every pending pod that is due (not in backoff); returns what happened."""
        self.refresh()
        if self.claim_controller:
            self.release_ended()
        outcomes = []
        while (pod := self.queue.pop()) is not None:
            outcomes.append(self.schedule(pod))
            if self.waiting:  # a gang completed or was rejected: settle before the next pod
                outcomes += self.settle_waiting()
        return outcomes + self.settle_waiting()

    def run(self, stop: Callable[[], bool], idle_sleep: float = 0.2) -> None:
        """Schedule until `stop()` is true, waking on store changes and backoff expiry."""
        while not stop():
            if not self.run_once():
                time.sleep(idle_sleep)

    def schedule(self, pod: Pod) -> Outcome:
        """One scheduling cycle and its binding cycle, in order. On the embedded store the
        refresh, the decision and the claim writes are one transaction."""
        try:
            with atomic(self.store):
                self.refresh()
                plan = self.plan(pod)
                if isinstance(plan, Outcome):
                    return plan
                written = self.write_claims(plan)
        except (Conflict, NotFound):
            return self.conflict(pod)
        if not written.stage:
            written = self.bind(plan, written)
        return self.finish(plan, written)

    def plan(self, pod: Pod) -> Plan | Outcome:
        """The scheduling cycle: decide where the pod goes and assume it (its devices and
        CPU are taken in the view); an Outcome when it cannot be placed now. Raises
        Conflict/NotFound when a claim it generates raced another write."""
        return schedule_one.plan(self, pod)

    def write(self, plan: Plan) -> Written:
        """The binding cycle's writes (no access to the view: it may run in another
        thread while the next pod is planned)."""
        written = self.write_claims(plan)
        return written if written.stage else self.bind(plan, written)

    def write_claims(self, plan: Plan) -> Written:
        """PreBind: per claim not yet reserved for the pod, finalizer, then allocation +
        reservedFor (and the claim of extended resources created)."""
        return schedule_one.write_claims(self, plan)

    def bind(self, plan: Plan, written: Written) -> Written:
        return schedule_one.bind(self, plan, written)

    def finish(self, plan: Plan, written: Written) -> Outcome:
        return schedule_one.finish(self, plan, written)

    def conflict(self, pod: Pod) -> Outcome:
        return schedule_one.conflict(self, pod)

    def settle_waiting(self) -> list[Outcome]:
        """Bind the pods Permit held that are allowed now; unreserve those rejected or
        timed out (until none is left: giving one back may reject the rest of its gang)."""
        outcomes: list[Outcome] = []
        while True:
            allowed, refused = self.release_waiting()
            outcomes += refused
            if not allowed:
                return outcomes
            for plan in allowed:
                with atomic(self.store):
                    written = self.write_claims(plan)
                if not written.stage:
                    written = self.bind(plan, written)
                outcomes.append(self.finish(plan, written))

    def release_waiting(self) -> tuple[list[Plan], list[Outcome]]:
        """Take the pods Permit allowed out of the waiting set, still assumed, for a binding
        cycle (the caller's: in line or in the background); unreserve at once those rejected
        or timed out, until none is left (giving one back may reject the rest of its gang),
        so that the next pod is planned with their devices free, as upstream's rejected
        waiting pods are unreserved at once."""
        allowed: list[Plan] = []
        outcomes: list[Outcome] = []
        while True:
            ok, refused = self.waiting.settled()
            if not ok and not refused:
                return allowed, outcomes
            allowed += ok
            outcomes += [schedule_one.refuse_waiting(self, p, why) for p, why in refused]

    # --- the cache --------------------------------------------------------------------

    def refresh(self) -> None:
        """Bring the view up to date with the feed (a full load the first time)."""
        if self.loaded or not self.freeze_loaded:
            eventhandlers.refresh(self)
            return
        # Paused only for a read of the store's own log, which ends: a watch's first
        # listing may wait for an API server as long as it is away.
        paused = gc.isenabled() and isinstance(self.feed, LogFeed)
        if paused:
            gc.disable()
        try:
            eventhandlers.refresh(self)
        finally:
            if paused:
                gc.enable()
        if self.loaded:
            gc.freeze()

    def own_write(self, resource_version: int) -> bool:
        """Whether the feed's change is this scheduler's own write (already in the view)."""
        if resource_version in self._own:
            self._own.discard(resource_version)
            return True
        return False

    def superseded(self, written: KubeObject) -> None:
        """The feed changed or deleted what this scheduler wrote while the write was in
        flight: taken as that change now (`eventhandlers.superseded`)."""
        eventhandlers.superseded(self, written)

    def invalidate(self) -> None:
        """Everything derived is read afresh, every memo forgotten."""
        self.drop_all()
        self.others.changed()
        self.framework.nodes_changed()
        self.framework.forget()

    def is_pending(self, pod: Pod) -> bool:
        ended = pod.status is not None and pod.status.phase in ENDED_PHASES
        return (
            not pod.spec.node_name
            and not ended
            and not pod.metadata.deletion_timestamp
            and (pod.spec.scheduler_name or "default-scheduler") in self.names
        )

    def current_pod(self, pod: Pod) -> Pod | None:
        current = self.cache.of(Pod).get(pod_key(pod))
        return current if isinstance(current, Pod) and self.is_pending(current) else None

    def release_ended(self) -> int:
        """The claim controller's part: drop ended pods' reservations, free claims nobody
        holds (`plugins/dra/release.py`)."""
        return release_ended(self)

    # --- what commands, explanations and policies ask -----------------------------------

    def shared_nodes(self, besides: Pod | None = None) -> dict[str, str]:
        """Owned nodes where another scheduler allocates devices (`sharing.py`); `besides`:
        a pod whose own pendency does not count (the pod being explained)."""
        known = self.others.known(besides=besides)
        if known is not None:
            return known  # without listing every pod and claim (once per pod placed)
        placement = self.view().placement

        def node_of(ref: DeviceRef) -> str | None:
            where = placement.get(ref)
            return where.node if where is not None else None

        affinity = self._affinity
        pods = {k: p for k, p in self.cache.of(Pod).items() if isinstance(p, Pod)}
        return self.others.nodes(
            pods,
            self.claims(),
            node_of,
            lambda pod: (
                affinity.static_nodes(pod, node_constraints(pod))
                if affinity is not None
                else self.node_names()
            ),
            besides=besides,
        )

    def node_fit(self, pod: Pod, node: Node, used: Mapping[str, Quantity]) -> NodeFit:
        """The non-DRA filters for `pod` on `node` (extended resources that DeviceClasses
        map are left to the allocator)."""
        return _required(self._resources).node_fit(pod, node, used)

    def allocator_inputs(
        self, claims: Sequence[ResourceClaim], node: Node
    ) -> tuple[
        Sequence[ResourceClaim], NodeInfo, Inventory, dict[str, DeviceClass], AllocatedState
    ]:
        """What the allocator is given for `claims` on `node` (also used by explain)."""
        return _required(self.dra).allocator_inputs(claims, node)

    def allocator_options(self, namespace: str) -> dict[str, Any]:
        """The allocator's switches for a pod of `namespace` (admin access needs its labels)."""
        return _required(self.dra).allocator_options(namespace)

    def extended_claim(self, pod: Pod) -> ResourceClaim | None:
        """The claim for the pod's extended resources that DRA classes serve: the one
        recorded in its status (or generated for it by an attempt that died before
        recording it), else a new one, not stored: the binding cycle creates it (upstream's
        PreBind), so a pod that never fits leaves no claim behind."""
        return self._extended.extended_claim(pod) if self._extended is not None else None


def _optional(framework: Framework, cls: type[P]) -> P | None:
    try:
        return framework.get(cls)
    except KeyError:
        return None


def _required(plugin: P | None) -> P:
    if plugin is None:
        raise KeyError("the scheduler's profile lacks the plugin this needs")
    return plugin
