"""The scheduling loop: pending pods in, claims allocated and pods bound out.

One cycle per pod, as the kube-scheduler's DynamicResources plugin runs it: resolve the
pod's claims, filter nodes, run the allocator for all of the pod's claims on candidate
nodes in the policy's order, score, then *assume* (the chosen devices, and the pod's CPU
and memory on its node, are taken in the scheduler's view at once, so the next pod never
gets them) and write: each claim's finalizer, then `status.allocation` + `reservedFor`
(upstream's PreBind), then the binding (Bind: `spec.nodeName` and the PodScheduled
condition, the pod's uid as precondition). A write that fails gives the assumed devices
back; a refused binding also drops the pod's reservations (upstream's Unreserve).

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

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubedra.allocator import (
    AllocatedState,
    AllocationError,
    DeviceRef,
    Features,
    Inventory,
    NodeInfo,
    allocate,
)
from kubedra.allocator.blockers import Holders, diagnose, holders_of
from kubedra.allocator.explain import Blocker, Unsatisfiable
from kubedra.api.core import ENDED_PHASES, Namespace, Node, Pod, pod_runs
from kubedra.api.kinds import KubeObjectT
from kubedra.api.meta import KubeObject
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    AllocationResult,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.cluster.events import Event, LogRecorder, Recorder
from kubedra.cluster.selectors import parse_label_selector
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import Store, WatchEvent, atomic, with_scheduled_condition
from kubedra.errors import Conflict, KubedraError, NotFound
from kubedra.scheduler.binding import (
    FINALIZER,
    MAX_RESERVED_FOR,
    PATIENCE_S,
    bind_pod,
    reserve_claim,
    reserved_for,
    update_status_retrying,
)
from kubedra.scheduler.cache import Key, ObjectCache, key_of, rv_of
from kubedra.scheduler.claims import (
    extended_resource_claim,
    extended_resource_classes,
    generated_claim,
    is_extended_claim_of,
    is_owned_by,
    recorded_claim_name,
    with_claim_status,
    with_extended_claim,
)
from kubedra.scheduler.feed import Feed, LogFeed
from kubedra.scheduler.funnels import format_funnel
from kubedra.scheduler.hints import hints
from kubedra.scheduler.nodes import (
    NodeFit,
    add_requests,
    asks_node_resources,
    filter_node,
    is_extended_resource,
    pod_requests,
    shortfall,
    wanted,
)
from kubedra.scheduler.policies import Candidate, Policy, make_policy
from kubedra.scheduler.policies.base import refs_of
from kubedra.scheduler.preference import most_preferred, preference
from kubedra.scheduler.queue import SchedulingQueue, pod_key
from kubedra.scheduler.room import Room
from kubedra.scheduler.sharing import OtherSchedulers
from kubedra.scheduler.view import ClusterView

log = logging.getLogger(__name__)

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
    Pod,
)
# Kinds whose change can make an unschedulable pod fit (upstream's queueing hints).
WAKING_KINDS = (ResourceSlice, ResourceClaim, DeviceClass, Node, DeviceTaintRule)
DIAGNOSED_NODES = 32  # refused nodes whose blocker the PodScheduled message names
Blockers = tuple[Blocker, ...]
EVENT_NOTE_DETAIL = "kubedra: "  # what FailedScheduling adds to kube-scheduler's summary

__all__ = ["FINALIZER", "MAX_RESERVED_FOR"]


class Unschedulable(Exception):
    """The pod cannot be placed now; the message is what its PodScheduled condition says,
    the explanation what the FailedScheduling event adds (kubedra's funnel)."""

    def __init__(self, message: str, explanation: str = "") -> None:
        super().__init__(message)
        self.explanation = explanation


class Waiting(Unschedulable):
    """The pod cannot be tried yet: a claim it needs does not exist yet (upstream's
    PreEnqueue gate). No event; the claim's arrival wakes the pod. `quiet`: not even a
    condition, for a claim the claim controller is about to create (a moment's wait)."""

    def __init__(self, message: str, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet


@dataclass(frozen=True, slots=True)
class Outcome:
    pod: str  # namespace/name
    node: str | None
    message: str = ""
    devices: tuple[str, ...] = ()  # allocated for the pod in this cycle
    result: str = "scheduled"  # scheduled, unschedulable, waiting, error (metrics' labels)
    joined: tuple[str, ...] = ()  # of claims allocated before (a shared claim the pod joined)


@dataclass(frozen=True)
class Plan:
    """A placement decided and assumed: what the binding cycle writes."""

    pod: Pod
    claims: list[ResourceClaim]
    candidate: Candidate
    started: float  # perf_counter at the start of the scheduling cycle
    served: dict[str, str] = field(default_factory=dict)  # extended resource -> class


@dataclass(frozen=True)
class Written:
    """What a binding cycle's writes left: the claims written, and where it stopped."""

    claims: list[ResourceClaim] = field(default_factory=list)
    bound: Pod | None = None
    stage: str = ""  # "claims" or "binding" when it failed there; "" when all went through
    error: KubedraError | None = None


class Scheduler:
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
    ) -> None:
        """`feed`: where the view comes from (default: the store's change log).
        `claim_controller`: also generate claims from templates and free claims of ended
        pods (the embedded store; on a cluster kube-controller-manager does it).
        `node_selector`: a label selector of the nodes this scheduler owns (default all).
        `shared_nodes`: what to do with an owned node where another scheduler's pods hold
        devices: "refuse" to allocate devices there (it would race), or only "warn"."""
        self.store = store
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.names = tuple(scheduler_names)
        self.features = features or Features()
        self.strict_cel = strict_cel
        self.feed: Feed = feed or LogFeed(store, FEED_KINDS)
        self.claim_controller = claim_controller
        self.queue = SchedulingQueue(clock=clock)
        self._owned = parse_label_selector(node_selector) if node_selector else None
        if shared_nodes not in ("refuse", "warn"):
            raise ValueError(f"shared_nodes must be refuse or warn, not {shared_nodes!r}")
        self.recorder: Recorder = recorder or LogRecorder()
        self.patience = patience
        # Runs a write that nothing waits for (a PodScheduled condition): inline by default,
        # a background pool when the runner sets one.
        self.io: Callable[[Callable[[], object]], object] = lambda fn: fn()
        # Told each allocator run's status (Success, Unschedulable, Error) and seconds.
        self.on_allocate: Callable[[str, float], None] | None = None
        self._cache = ObjectCache()
        self._inventory: Inventory | None = None
        self._view: ClusterView | None = None
        self._allocated: AllocatedState | None = None
        self._loaded = False
        self.policy.attach(self)
        self._own: set[int] = set()  # resourceVersions this scheduler wrote itself
        self._usage: dict[str, dict[str, Quantity]] | None = None
        self._room = Room()  # what nodes have left for pod requests, and what fits
        self._nodes: list[Node] | None = None
        self._nodes_by_name: dict[str, Node] = {}
        self._classes: dict[str, DeviceClass] | None = None
        self.others = OtherSchedulers(self.names, self.queue.clock, shared_nodes == "refuse")
        self._static_fits: dict[bytes, list[str]] = {}
        # Claims signature -> nodes where those claims did not fit. Reserving devices only
        # removes options, so such a node stays infeasible until something is freed or
        # changed by someone else (then the memo is cleared).
        self._infeasible: dict[bytes, set[str]] = {}
        # Claims signature -> how many leading nodes of the (stable) ranked list are known
        # infeasible: first-fit resumes there instead of rescanning full nodes.
        self._cursor: dict[bytes, int] = {}
        # Pod signature (claims, requests, node constraints) -> why it fit nowhere, and the
        # length of `_freed` then. Placing pods only takes resources away, so a pod like it
        # can only fit on a node freed since (an equivalence cache, as the kube-scheduler
        # once had, narrowed like upstream's queueing hints to what an event can change).
        self._failed: dict[bytes, tuple[Unschedulable, int]] = {}
        self._freed: list[str] = []  # nodes where devices, CPU or memory were freed, in order
        # Claim (namespace, name) -> pods parked until it exists.
        self._waiting: dict[Key, set[Key]] = {}

    # --- public -----------------------------------------------------------------------

    def run_once(self) -> list[Outcome]:
        """Try every pending pod that is due (not in backoff); returns what happened."""
        self.refresh()
        if self.claim_controller:
            self.release_ended()
        outcomes = []
        while (pod := self.queue.pop()) is not None:
            outcomes.append(self.schedule(pod))
        return outcomes

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
        started = time.perf_counter()
        current = self._current_pod(pod)
        if current is None:
            self.queue.remove(pod_key(pod))
            return Outcome(_name(pod), None, "pod is no longer pending", result="error")
        try:
            claims = self._claims_of(current)
            candidate = self._place(current, claims)
        except Waiting as why:
            self.queue.park(current)
            if not why.quiet:
                self._set_condition(current, str(why))
            return Outcome(_name(current), None, str(why), result="waiting")
        except Unschedulable as why:
            return self._unschedulable(current, why)
        self._assume(current, claims, candidate)
        served = extended_resource_classes(self.classes().values())
        return Plan(current, claims, candidate, started, served)

    def write(self, plan: Plan) -> Written:
        """The binding cycle's writes (no access to the view: it may run in another
        thread while the next pod is planned)."""
        written = self.write_claims(plan)
        return written if written.stage else self.bind(plan, written)

    def write_claims(self, plan: Plan) -> Written:
        """Finalizer, then allocation + reservedFor, per claim not yet reserved for the pod."""
        pod, done = plan.pod, list[ResourceClaim]()
        consumer = ResourceClaimConsumerReference(
            resource="pods", name=pod.name, uid=pod.metadata.uid or ""
        )
        for claim, result in zip(plan.claims, plan.candidate.results, strict=True):
            if _is_allocated(claim) and reserved_for(claim, consumer.uid):
                continue  # written by an earlier cycle that died before binding
            try:
                if claim.metadata.resource_version is None:
                    claim = self._create_extended(pod, claim, plan.served)
                done.append(
                    reserve_claim(
                        self.store,
                        claim,
                        result,
                        consumer,
                        allocate=not _is_allocated(claim),
                        patience=self.patience,
                    )
                )
            except KubedraError as err:
                return Written(done, stage="claims", error=err)
        return Written(done)

    def _create_extended(
        self, pod: Pod, claim: ResourceClaim, served: dict[str, str]
    ) -> ResourceClaim:
        """Store the pod's extended-resource claim and record it in the pod's status."""
        created = self.store.create(claim)
        update_status_retrying(
            self.store, pod, lambda current: with_extended_claim(current, created, served)
        )
        return created

    def bind(self, plan: Plan, written: Written) -> Written:
        try:
            bound = self._bind(plan.pod, plan.candidate.node)
        except KubedraError as err:
            return Written(written.claims, stage="binding", error=err)
        return Written(written.claims, bound=bound)

    def finish(self, plan: Plan, written: Written) -> Outcome:
        """After the binding cycle: keep what was written in the view, give back what was
        assumed and not written, and on failure do what upstream's Unreserve does."""
        pod, node = plan.pod, plan.candidate.node
        for claim in written.claims:
            self._own.add(rv_of(claim))
            self._cache.assume(claim, rv_of(claim))
        if not written.stage:
            self._assume_bound(pod, node, written.bound)
            self.queue.scheduled(pod_key(pod))
            self.policy.observe(len(plan.candidate.refs))
            self.recorder.record(
                Event(
                    pod,
                    "Normal",
                    "Scheduled",
                    "Binding",
                    f"Successfully assigned {_name(pod)} to {node}",
                )
            )
            before = [
                r
                for r, c in zip(plan.candidate.results, plan.claims, strict=True)
                if _is_allocated(c)
            ]
            return Outcome(
                _name(pod),
                node,
                devices=tuple(str(r) for r in plan.candidate.refs),
                joined=tuple(str(r) for r in refs_of(before)),
            )
        keys = {key_of(c) for c in written.claims}
        for claim in plan.claims:
            if key_of(claim) not in keys:
                self._cache.restore(ResourceClaim, key_of(claim))
        self._cache.restore(Pod, pod_key(pod))
        self._invalidate()  # the devices, CPU and memory assumed are given back
        assert written.error is not None
        if written.stage == "binding":
            return self._unreserve(pod, plan.claims, node, written.error)
        self._drop_reservations(pod, plan.claims)
        self.queue.unschedulable(pod)
        if isinstance(written.error, (Conflict, NotFound)):
            return Outcome(_name(pod), None, "conflict: retried later", result="error")
        return Outcome(_name(pod), None, f"error: {written.error}", result="error")

    # --- refresh ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Bring the view up to date with the feed (a full load the first time)."""
        events = self.feed.sync()
        if not self._loaded:
            self._load(events)
            return
        woken = False
        for event in events:
            obj = event.obj
            before = self._cache.of(type(obj)).get(key_of(obj))
            if not self._cache.apply(event):
                continue  # older than what this scheduler assumed: the view keeps its own
            if event.resource_version in self._own:
                self._own.discard(event.resource_version)  # already applied when written
                continue
            if isinstance(obj, ResourceClaim):
                self._claim_arrived(obj)
                if not (
                    _is_allocated(obj)
                    or (isinstance(before, ResourceClaim) and _is_allocated(before))
                ):
                    continue  # a claim that holds no devices, before or after, changes no choice
            woken |= self._note_change(obj, event.type == "DELETED")
        if woken:
            self.queue.wake_all()

    def _load(self, events: list[WatchEvent]) -> None:
        for event in events:
            self._cache.apply(event)
        self._loaded = True
        self._invalidate()
        for obj in self._cache.of(Pod).values():
            assert isinstance(obj, Pod)
            if self._is_pending(obj):
                self.queue.add(obj)
            elif not self.others.mine(obj):
                self.others.changed(obj, pod_runs(obj))

    def _note_change(self, obj: KubeObject, deleted: bool) -> bool:
        """Update derived state for one changed object; True if pending pods may now fit."""
        if isinstance(obj, (ResourceSlice, DeviceTaintRule, Node)):
            self._inventory = self._view = self._nodes = None
            self._static_fits.clear()
            self._forget_infeasible()
        if isinstance(obj, ResourceClaim):
            self._allocated = None
            self._view = None
            self.others.changed()
            self._forget_infeasible()
        if isinstance(obj, DeviceClass):
            self._classes = None
            self._forget_infeasible()
        if isinstance(obj, Pod):
            ended = deleted or (obj.status is not None and obj.status.phase in ENDED_PHASES)
            if not self.others.mine(obj):
                self.others.changed(obj, not deleted and pod_runs(obj))
            if obj.spec.node_name:
                self._usage = None  # a pending pod uses nothing on any node yet
                self._touch(obj.spec.node_name)
                if ended:
                    self._note_freed({obj.spec.node_name})  # its CPU and memory
            if not deleted and self._is_pending(obj):
                self.queue.add(obj)
                self.queue.activate(pod_key(obj))  # a parked pod's claims may be recorded now
            else:
                self.queue.remove(pod_key(obj))
            return ended
        return isinstance(obj, WAKING_KINDS)

    def _claim_arrived(self, claim: ResourceClaim) -> None:
        """Wake the pods parked until this claim existed (by name, or as its owner)."""
        k = key_of(claim)
        for pod in self._waiting.pop(k, set()):
            self.queue.activate(pod)
        for owner in claim.metadata.owner_references:
            if owner.controller and owner.kind == "Pod":
                self.queue.activate((claim.namespace, owner.name))

    def _invalidate(self) -> None:
        self._inventory = self._view = self._allocated = None
        self._usage = self._classes = self._nodes = None
        self.others.changed()
        self._static_fits.clear()
        self._forget_infeasible()

    def _forget_infeasible(self) -> None:
        self._infeasible.clear()
        self._cursor.clear()
        self._failed.clear()
        self._freed.clear()

    def _note_freed(self, nodes: set[str]) -> None:
        """Something was freed on `nodes` only: just they can turn feasible again."""
        for infeasible in self._infeasible.values():
            infeasible -= nodes
        self._cursor.clear()  # a freed node may sit before a resume point
        if len(self._freed) >= _FREED_LOG_LIMIT:
            self._failed.clear()  # forget old failures rather than keep a long log
            self._freed.clear()
        if self._failed:  # only cached failures read the log
            self._freed.extend(sorted(nodes))

    def _retry_scope(self, equivalent: bytes) -> set[str] | None:
        """The nodes worth trying for a pod like one that fit nowhere (those freed since);
        None for a pod not seen failing. Raises when nothing was freed since."""
        failed = self._failed.get(equivalent)
        if failed is None:
            return None
        why, seen = failed
        if seen == len(self._freed):
            raise Unschedulable(str(why), why.explanation)
        return set(self._freed[seen:])

    def _mine(self, obj: KubeObjectT) -> KubeObjectT:
        """A write of this scheduler: in the view now, and not news when the feed brings it."""
        self._own.add(rv_of(obj))
        self._cache.assume(obj, rv_of(obj))
        return obj

    def _is_pending(self, pod: Pod) -> bool:
        ended = pod.status is not None and pod.status.phase in ENDED_PHASES
        return (
            not pod.spec.node_name
            and not ended
            and not pod.metadata.deletion_timestamp
            and (pod.spec.scheduler_name or "default-scheduler") in self.names
        )

    # --- derived state ----------------------------------------------------------------

    def nodes(self) -> list[Node]:
        """The nodes this scheduler owns (all, or those its node selector matches), in name
        order (cached until a node changes)."""
        if self._nodes is None:
            nodes = [
                n
                for n in self._cache.of(Node).values()
                if isinstance(n, Node)
                and (self._owned is None or self._owned.matches(n.metadata.labels))
            ]
            self._nodes = sorted(nodes, key=lambda n: n.name)
            self._nodes_by_name = {n.name: n for n in self._nodes}
        return self._nodes

    def inventory(self) -> Inventory:
        if self._inventory is None:
            slices = [
                s for s in self._cache.of(ResourceSlice).values() if isinstance(s, ResourceSlice)
            ]
            rules = [
                r
                for r in self._cache.of(DeviceTaintRule).values()
                if isinstance(r, DeviceTaintRule)
            ]
            slices.sort(key=lambda s: s.name)
            self._inventory = Inventory.build(slices, rules, features=self.features)
        return self._inventory

    def allocated(self) -> AllocatedState:
        if self._allocated is None:
            self._allocated = AllocatedState.from_claims(self._claims())
        return self._allocated

    def view(self) -> ClusterView:
        if self._view is None:
            infos = [NodeInfo(n.name, n.metadata.labels) for n in self.nodes()]
            used = [r for c in self._claims() for r in _claim_refs(c)]
            self._view = ClusterView(self.inventory(), infos, used)
        return self._view

    def _claims(self) -> list[ResourceClaim]:
        return [c for c in self._cache.of(ResourceClaim).values() if isinstance(c, ResourceClaim)]

    def classes(self) -> dict[str, DeviceClass]:
        if self._classes is None:
            table = self._cache.of(DeviceClass).values()
            self._classes = {c.name: c for c in table if isinstance(c, DeviceClass)}
        return self._classes

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self._cache.of(Namespace).get(("", namespace))
        return dict(ns.metadata.labels) if ns is not None else {}

    def node_usage(self) -> dict[str, dict[str, Quantity]]:
        """CPU/memory requested by the pods bound to each node (cached)."""
        if self._usage is None:
            usage: dict[str, dict[str, Quantity]] = {}
            for pod in self._cache.of(Pod).values():
                assert isinstance(pod, Pod)
                if pod.spec.node_name and pod_runs(pod):
                    add_requests(usage.setdefault(pod.spec.node_name, {}), pod)
            self._usage = usage
        return self._usage

    def cpu_free(self, node: str) -> int | None:
        """Allocatable CPU (milli) a node has left for pods; None where it declares none."""
        self.nodes()
        found = self._nodes_by_name.get(node)
        allocatable = found.status.allocatable if found is not None and found.status else {}
        if "cpu" not in allocatable:
            return None
        used = self.node_usage().get(node, {}).get("cpu")
        left = allocatable["cpu"] if used is None else allocatable["cpu"].sub(used)
        return left.milli_value()

    # --- one cycle --------------------------------------------------------------------

    def _current_pod(self, pod: Pod) -> Pod | None:
        current = self._cache.of(Pod).get(pod_key(pod))
        return current if isinstance(current, Pod) and self._is_pending(current) else None

    def _claims_of(self, pod: Pod) -> list[ResourceClaim]:
        """The pod's claims in `spec.resourceClaims` order (generating template claims when
        this scheduler is the claim controller; waiting for them otherwise)."""
        claims = []
        for entry in pod.spec.resource_claims:
            name = recorded_claim_name(pod, entry)
            if name is None and entry.resource_claim_template_name:
                if not self.claim_controller:
                    raise Waiting(
                        f'waiting for the claim of "{entry.name}" to be created from template '
                        f'"{entry.resource_claim_template_name}"',
                        quiet=True,
                    )
                claim, pod = self._generate(pod, entry.name, entry.resource_claim_template_name)
                claims.append(claim)
                continue
            found = self._cache.of(ResourceClaim).get((pod.namespace, name or ""))
            if not isinstance(found, ResourceClaim):
                self._waiting.setdefault((pod.namespace, name or ""), set()).add(pod_key(pod))
                raise Waiting(
                    f'waiting for resource claim "{name}" to be created',
                    quiet=bool(entry.resource_claim_template_name),
                )
            if found.metadata.deletion_timestamp:
                raise Unschedulable(f'resource claim "{name}" is being deleted')
            if entry.resource_claim_template_name and not is_owned_by(found, pod):
                raise Unschedulable(f'resource claim "{name}" was not created for this pod')
            claims.append(found)
        extended = self.extended_claim(pod)
        return claims + ([extended] if extended is not None else [])

    def extended_claim(self, pod: Pod) -> ResourceClaim | None:
        """The claim for the pod's extended resources that DRA classes serve: the one
        recorded in its status (or generated for it by an attempt that died before
        recording it), else a new one, not stored: the binding cycle creates it (upstream's
        PreBind), so a pod that never fits leaves no claim behind."""
        served = extended_resource_classes(self.classes().values())
        if not served:
            return None
        recorded = pod.status.extended_resource_claim_status if pod.status else None
        claims = self._cache.of(ResourceClaim)
        if recorded is not None:
            found = claims.get((pod.namespace, recorded.resource_claim_name))
            if isinstance(found, ResourceClaim):
                return found
        new = extended_resource_claim(pod, served)
        if new is None:
            return None  # asks for none: skip the scan (every pod would pay O(claims))
        for claim in claims.values():
            if isinstance(claim, ResourceClaim) and is_extended_claim_of(claim, pod):
                return claim
        return new

    def _generate(self, pod: Pod, entry: str, template_name: str) -> tuple[ResourceClaim, Pod]:
        template = self._cache.of(ResourceClaimTemplate).get((pod.namespace, template_name))
        if not isinstance(template, ResourceClaimTemplate):
            raise Unschedulable(f'resource claim template "{template_name}" not found')
        pod_entry = next(e for e in pod.spec.resource_claims if e.name == entry)
        claim = self._mine(self.store.create(generated_claim(pod, pod_entry, template)))
        pod = self._mine(self.store.update_status(with_claim_status(pod, entry, claim.name)))
        return claim, pod

    def _place(self, pod: Pod, claims: list[ResourceClaim]) -> Candidate:
        reasons: dict[str, int] = {}
        self.nodes()
        nodes = self._nodes_by_name
        for claim in claims:
            reserved = claim.status.reserved_for if claim.status else ()
            if len(reserved) >= MAX_RESERVED_FOR and all(
                r.uid != pod.metadata.uid for r in reserved
            ):
                raise Unschedulable(
                    f'resource claim "{claim.name}" is in use by {MAX_RESERVED_FOR} pods'
                )
        found: list[Candidate] = []
        misses: list[Unsatisfiable] = []  # why the allocator refused nodes, for the event
        signature = _claims_signature(pod, claims)
        constraints, needs = _node_constraints(pod), pod_requests(pod)
        equivalent = signature + constraints + msgspec.json.encode(needs, enc_hook=str)
        only = self._retry_scope(equivalent)
        fitting = self._fitting_nodes(pod, constraints, needs, nodes, reasons, only)
        unshared = self._unshared(fitting, reasons) if claims else fitting
        view = self.view()
        self.policy.prepare(pod, claims)
        infeasible = self._infeasible.setdefault(signature, set())
        ranked = self.policy.rank_nodes(view, unshared, infeasible)
        best = most_preferred(claims)  # 0 without firstAvailable: the policy alone decides
        # the same full list every time: resume at the cursor
        stable = ranked is fitting and only is None
        start = self._cursor.get(signature, 0) if stable else 0
        if start:
            reasons["cannot allocate all claims"] = start
        for index in range(start, len(ranked)):
            name = ranked[index]
            if name in infeasible:
                reasons["cannot allocate all claims"] = (
                    reasons.get("cannot allocate all claims", 0) + 1
                )
                continue
            here = self._candidates_on(pod, claims, nodes[name], reasons, misses)
            if not here:
                infeasible.add(name)
                if stable and index == self._cursor.get(signature, 0):
                    self._cursor[signature] = index + 1
            found += here
            if len(found) >= self.policy.candidates and (
                not best or any(preference(claims, c.results) == best for c in found)
            ):
                break
        if not found:
            # Bounded: diagnosing runs on failure only, but a pod can fail on many nodes.
            holders = holders_of(self._claims()) if misses else {}
            blocked = {m.node: diagnose(m, holders) for m in misses[:DIAGNOSED_NODES]}
            why = (
                Unschedulable(
                    _nowhere(len(nodes), _with_blockers(reasons, misses, blocked)),
                    _explained(misses, blocked, holders),
                )
                if only is None
                else self._failed[equivalent][0]
            )
            self._failed[equivalent] = (why, len(self._freed))
            raise Unschedulable(str(why), why.explanation)
        if best:  # the user's firstAvailable order first, then the policy's score
            score = self.policy.score
            return max(found, key=lambda c: (preference(claims, c.results), score(view, c)))
        return max(found, key=lambda c: self.policy.score(view, c))  # first best wins ties

    def _unshared(self, fitting: list[str], reasons: dict[str, int]) -> list[str]:
        """The nodes left to a pod with claims when this scheduler refuses nodes shared with
        another scheduler (devices are not API objects: two schedulers can pick the same)."""
        shared = self.shared_nodes() if self.others.refuse else {}
        if not shared:
            return fitting
        kept = [n for n in fitting if n not in shared]
        if len(kept) < len(fitting):
            reasons["node(s) where another scheduler allocates devices"] = len(fitting) - len(kept)
        return kept

    def _fitting_nodes(
        self,
        pod: Pod,
        constraints: bytes,
        needs: dict[str, Quantity],
        nodes: dict[str, Node],
        reasons: dict[str, int],
        only: set[str] | None = None,
    ) -> list[str]:
        """Nodes (of `only`, when given) that pass the non-DRA filters for a pod needing
        `needs`; the request-independent part is cached per `_node_constraints` until nodes
        change."""
        static = self._static_nodes(pod, constraints)
        excluded = len(nodes) - len(static)
        if excluded:
            reasons["node(s) didn't match Pod's node affinity/selector or taints"] = excluded
        if only is not None:
            static = [name for name in static if name in only]
        if not asks_node_resources(needs):
            return static
        if any(is_extended_resource(name) for name in needs):
            # Extended resources: node by node (rare; the kept room covers CPU and memory).
            usage, fitting = self.node_usage(), []
            for name in static:
                fit = self.node_fit(pod, nodes[name], usage.get(name, {}))
                if fit.fits:
                    fitting.append(name)
                else:
                    reasons[fit.reason] = reasons.get(fit.reason, 0) + 1
            return fitting
        # The static filters passed already: only CPU and memory are left to check.
        wants = wanted(needs)
        self._room.sync(nodes, self.node_usage())
        if only is None:
            return self._room.fitting(constraints, static, wants, reasons)
        fitting = []
        for name in static:
            reason = shortfall(wants, self._room.left(name))
            if reason:
                reasons[reason] = reasons.get(reason, 0) + 1
            else:
                fitting.append(name)
        return fitting

    def node_fit(self, pod: Pod, node: Node, used: Mapping[str, Quantity]) -> NodeFit:
        """The non-DRA filters for `pod` on `node` (extended resources that DeviceClasses
        map are left to the allocator)."""
        return filter_node(pod, node, used, extended_resource_classes(self.classes().values()))

    def _static_nodes(self, pod: Pod, constraints: bytes) -> list[str]:
        """The owned nodes a pod may go to by its node constraints alone (cached)."""
        static = self._static_fits.get(constraints)
        if static is None:
            bare = msgspec.structs.replace(
                pod, spec=msgspec.structs.replace(pod.spec, containers=(), init_containers=())
            )
            self.nodes()
            static = [
                node.name
                for node in self._nodes_by_name.values()
                if filter_node(bare, node, {}).fits
            ]
            self._static_fits[constraints] = static
        return static

    def allocator_inputs(
        self, claims: Sequence[ResourceClaim], node: Node
    ) -> tuple[
        Sequence[ResourceClaim], NodeInfo, Inventory, dict[str, DeviceClass], AllocatedState
    ]:
        """What the allocator is given for `claims` on `node` (also used by explain)."""
        info = NodeInfo(node.name, node.metadata.labels)
        return claims, info, self.inventory(), self.classes(), self.allocated()

    def allocator_options(self, namespace: str) -> dict[str, Any]:
        """The allocator's switches for a pod of `namespace` (admin access needs its labels)."""
        return {
            "namespace_labels": self._namespace_labels(namespace),
            "features": self.features,
            "strict_cel": self.strict_cel,
        }

    def _candidates_on(
        self,
        pod: Pod,
        claims: list[ResourceClaim],
        node: Node,
        reasons: dict[str, int],
        misses: list[Unsatisfiable] | None = None,
    ) -> list[Candidate]:
        """Allocate on one node once per device order the policy proposes."""
        view, out = self.view(), list[Candidate]()
        for order in self.policy.device_orders(view, node.name):
            started = time.perf_counter()
            try:
                allocation = allocate(
                    *self.allocator_inputs(claims, node),
                    **self.allocator_options(pod.namespace),
                    order=order,
                )
            except AllocationError as err:
                if self.on_allocate is not None:
                    self.on_allocate("Error", time.perf_counter() - started)
                raise Unschedulable(str(err)) from None
            if self.on_allocate is not None:
                status = "Unschedulable" if allocation.results is None else "Success"
                self.on_allocate(status, time.perf_counter() - started)
            if allocation.results is None:
                reason = allocation.unsatisfiable.summary if allocation.unsatisfiable else "no fit"
                reasons[reason] = reasons.get(reason, 0) + 1
                if misses is not None and allocation.unsatisfiable is not None:
                    misses.append(allocation.unsatisfiable)
                return out  # feasibility does not depend on the order: no other order fits
            new = [
                r for r, c in zip(allocation.results, claims, strict=True) if not _is_allocated(c)
            ]
            out.append(Candidate(node.name, allocation.results, refs_of(new)))
        return out

    def _assume(self, pod: Pod, claims: list[ResourceClaim], chosen: Candidate) -> None:
        """Reserve: the claims as they will be written (allocated, reserved for the pod) and
        the pod on its node go into the view now, before any write (upstream's in-flight
        allocations), so the next pod never gets these devices or this CPU."""
        consumer = ResourceClaimConsumerReference(
            resource="pods", name=pod.name, uid=pod.metadata.uid or ""
        )
        for claim, result in zip(claims, chosen.results, strict=True):
            status = claim.status or ResourceClaimStatus()
            if status.allocation is not None and reserved_for(claim, consumer.uid):
                continue
            finalizers = claim.metadata.finalizers
            if status.allocation is None and FINALIZER not in finalizers:
                finalizers = (*finalizers, FINALIZER)
            self._cache.assume(
                msgspec.structs.replace(
                    claim,
                    metadata=msgspec.structs.replace(claim.metadata, finalizers=finalizers),
                    status=msgspec.structs.replace(
                        status,
                        allocation=status.allocation or result,
                        reserved_for=(*status.reserved_for, consumer),
                    ),
                )
            )
            if status.allocation is None:
                self._reserve(result)
        bound = msgspec.structs.replace(
            pod, spec=msgspec.structs.replace(pod.spec, node_name=chosen.node)
        )
        self._cache.assume(bound)
        if self._usage is not None:
            add_requests(self._usage.setdefault(chosen.node, {}), pod)
            self._room.changed(chosen.node)
        self._touch(chosen.node)

    def _assume_bound(self, pod: Pod, node: str, bound: Pod | None) -> None:
        """The binding went through: the view keeps the pod on its node until the feed shows
        it (the API server answers a binding with a Status, not the pod)."""
        if bound is not None:
            self._mine(bound)
            return
        on_node = msgspec.structs.replace(
            pod, spec=msgspec.structs.replace(pod.spec, node_name=node)
        )
        self._cache.assume(
            on_node, shows=lambda seen: isinstance(seen, Pod) and seen.spec.node_name == node
        )

    def _reserve(self, result: AllocationResult) -> None:
        if self._allocated is not None:
            self._allocated.reserve(result)
        self.view().reserve(refs_of([result]))

    def _bind(self, pod: Pod, node: str) -> Pod | None:
        """Bind through the store's `pods/binding`, after the claim writes (upstream's Bind
        after PreBind). The pod's uid is the precondition: the claims are reserved for this
        pod, not for whatever pod has its name by now."""
        return bind_pod(self.store, pod, node, patience=self.patience)

    def conflict(self, pod: Pod) -> Outcome:
        """A write of the scheduling cycle raced another: back off, rebuild the views."""
        self._invalidate()
        self.queue.unschedulable(pod)
        return Outcome(_name(pod), None, "conflict: retried later", result="error")

    def _touch(self, node: str) -> None:
        """Tell the view's readers (policies with per-node indexes) that what pods use on
        `node` changed; a view built later is read afresh anyway."""
        if self._view is not None:
            self._view.touch(node)

    def _unreserve(
        self, pod: Pod, claims: list[ResourceClaim], node: str, refused: KubedraError
    ) -> Outcome:
        """Binding was refused: the pod was deleted, re-created under its name, or bound by
        someone else since its claims were written. As upstream's Unreserve, the pod's
        reservations are dropped from those claims (on the embedded store, a claim nobody
        else holds is freed, and deleted if it was generated for a pod that is gone), and the
        pod that now has the name, if any and pending, is queued afresh (the same pod backs
        off). Unless another scheduler bound this very pod to `node` from these reservations
        (as after a crash): then it is done."""
        key = pod_key(pod)
        self.refresh()
        current = self._cache.of(Pod).get(key)
        name = _name(pod)
        if (
            isinstance(current, Pod)
            and current.metadata.uid == pod.metadata.uid
            and current.spec.node_name == node
        ):
            self.queue.scheduled(key)
            return Outcome(name, None, f"bound to {node} by another scheduler", result="error")
        self._drop_reservations(pod, claims)
        self.queue.remove(key)
        self.refresh()
        current = self._cache.of(Pod).get(key)
        if isinstance(current, Pod) and self._is_pending(current):
            self.queue.add(current)
            if current.metadata.uid == pod.metadata.uid:
                self.queue.unschedulable(current)
        return Outcome(name, None, f"binding refused, retried: {refused}", result="error")

    def _drop_reservations(self, pod: Pod, claims: list[ResourceClaim]) -> None:
        pods = {p.metadata.uid: p for p in self._cache.of(Pod).values() if isinstance(p, Pod)}
        for claim in claims:
            current = self._cache.of(ResourceClaim).get(key_of(claim))
            if isinstance(current, ResourceClaim) and current.status is not None:
                held = current.status.reserved_for
                live = tuple(r for r in held if r.uid != pod.metadata.uid)
                if len(live) < len(held):
                    self._release(current, live, pods)
        self._invalidate()  # allocations changed under the cached views

    def _unschedulable(self, pod: Pod, why: Unschedulable) -> Outcome:
        """Back off; say why on the pod's PodScheduled condition, and in a FailedScheduling
        event with kubedra's explanation (both only when the reason changed)."""
        self.queue.unschedulable(pod)
        message = str(why)
        if not _has_condition(pod, message):
            self._set_condition(pod, message)
            note = f"{message} {EVENT_NOTE_DETAIL}{why.explanation}" if why.explanation else message
            self.recorder.record(Event(pod, "Warning", "FailedScheduling", "Scheduling", note))
        return Outcome(_name(pod), None, message, result="unschedulable")

    def _set_condition(self, pod: Pod, message: str) -> None:
        """PodScheduled=False with `message`, unless the pod says so already."""
        if _has_condition(pod, message):
            return
        store = self.store

        def write() -> None:
            def change(current: Pod) -> Pod | None:
                if current.spec.node_name or _has_condition(current, message):
                    return None
                stamp = now_rfc3339()
                return with_scheduled_condition(current, "False", "Unschedulable", message, stamp)

            try:
                update_status_retrying(store, pod, change)
            except KubedraError as err:  # gone, or the server away: the next attempt says it
                log.debug("condition of pod %s not written: %s", _name(pod), err)

        self.io(write)

    # --- deallocation -----------------------------------------------------------------

    def release_ended(self) -> int:
        """Drop ended or deleted pods from reservedFor; free claims nobody uses any more
        (generated claims of an ended pod are deleted, as upstream's claim controller does),
        and claims being deleted that nobody holds (their finalizer goes, so they go)."""
        pods = {p.metadata.uid: p for p in self._cache.of(Pod).values() if isinstance(p, Pod)}
        released = 0
        freed: set[str | None] = set()  # None: a node we cannot tell
        for claim in self._claims():
            reserved = claim.status.reserved_for if claim.status else ()
            live = tuple(r for r in reserved if pod_runs(pods.get(r.uid)))
            if len(live) == len(reserved) and not _abandoned(claim):
                continue
            released += 1
            if self._release(claim, live, pods):
                if self._view is not None:
                    self._view.release(_claim_refs(claim))
                # a claim nobody held any more: its devices' node is not known here
                freed |= {_node_of(pods.get(r.uid)) for r in reserved} or {None}
        if released:
            self.refresh()
            # Only what claims decide changes: devices in use, CPU in use, known misfits.
            self._allocated = self._usage = None
            if None in freed:
                self._forget_infeasible()
            else:
                self._note_freed({node for node in freed if node is not None})
            self.queue.wake_all()
        return released

    def _release(
        self,
        claim: ResourceClaim,
        live: tuple[ResourceClaimConsumerReference, ...],
        pods: dict[str | None, Pod],
    ) -> bool:
        """Write the smaller reservedFor, or free the claim; True when it was freed. The
        writes are this scheduler's own: the caller updates what depends on them. Where the
        cluster's resourceclaim controller frees claims, only the reservations go (upstream's
        Unreserve); it then frees or deletes the claim as it sees fit."""
        try:
            if (live or not self.claim_controller) and claim.status is not None:
                dropped = {r.uid for r in claim.status.reserved_for} - {r.uid for r in live}
                smaller = update_status_retrying(
                    self.store, claim, lambda c: _without_reservations(c, dropped)
                )
                if smaller is not None:
                    self._mine(smaller)
                return False
            cleared = self._mine(
                self.store.update_status(msgspec.structs.replace(claim, status=None))
            )
            meta = msgspec.structs.replace(
                cleared.metadata,
                finalizers=tuple(f for f in cleared.metadata.finalizers if f != FINALIZER),
            )
            cleared = self._mine(self.store.update(msgspec.structs.replace(cleared, metadata=meta)))
            if cleared.metadata.deletion_timestamp and not cleared.metadata.finalizers:
                return True  # it was being deleted: without the finalizer it is gone
            owners = [pods.get(o.uid) for o in cleared.metadata.owner_references if o.controller]
            if owners and all(not pod_runs(p) for p in owners):
                self.store.delete(ResourceClaim, cleared.name, cleared.namespace)
        except KubedraError as err:  # changed by someone else, or the server away: the next
            log.debug("claim %s not released: %s", claim.name, err)  # refresh sees the truth
            return False
        return True

    # --- sharing nodes with another scheduler ---------------------------------------

    def shared_nodes(self) -> dict[str, str]:
        """Owned nodes where another scheduler allocates devices (`sharing.py`)."""
        known = self.others.known()
        if known is not None:
            return known  # without listing every pod and claim (once per pod placed)
        placement = self.view().placement

        def node_of(ref: DeviceRef) -> str | None:
            where = placement.get(ref)
            return where.node if where is not None else None

        pods = {k: p for k, p in self._cache.of(Pod).items() if isinstance(p, Pod)}
        return self.others.nodes(
            pods,
            self._claims(),
            node_of,
            lambda pod: self._static_nodes(pod, _node_constraints(pod)),
        )


_FREED_LOG_LIMIT = 4096


def _nowhere(total: int, reasons: dict[str, int]) -> str:
    """The kube-scheduler's summary of why a pod fits no node."""
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
    head = f"0/{total} nodes are available"
    return f"{head}: {detail}." if detail else f"{head}."


def _node_constraints(pod: Pod) -> bytes:
    """What restricts a pod's nodes besides its requests: nodeName, selector, affinity,
    tolerations (the key of the request-independent filter cache)."""
    s = pod.spec
    return msgspec.json.encode([s.node_name, s.node_selector, s.affinity, s.tolerations])


def _node_of(pod: Pod | None) -> str | None:
    return pod.spec.node_name if pod is not None and pod.spec.node_name else None


def _claims_signature(pod: Pod, claims: Sequence[ResourceClaim]) -> bytes:
    """What makes the allocator's answer for a node: the claims' specs and allocations and
    the namespace (admin access depends on its labels)."""
    return msgspec.json.encode(
        [pod.namespace, [(c.spec, c.status.allocation if c.status else None) for c in claims]],
        enc_hook=str,
    )


def _name(obj: KubeObject) -> str:
    return f"{obj.namespace}/{obj.name}"


def _with_blockers(
    reasons: dict[str, int], misses: Sequence[Unsatisfiable], blocked: dict[str, Blockers]
) -> dict[str, int]:
    """The reasons with kubedra's blockers in brackets after the allocator's summary, for
    the refused nodes that were diagnosed (`blocked`, by node)."""
    out = dict(reasons)
    for miss in misses:
        blockers = blocked.get(miss.node)
        if not blockers or out.get(miss.summary, 0) <= 0:
            continue
        short = "; ".join(f"{b.request or b.claim}: {b.short}" for b in blockers)
        out[miss.summary] -= 1
        if not out[miss.summary]:
            del out[miss.summary]
        key = f"{miss.summary} ({short})"
        out[key] = out.get(key, 0) + 1
    return out


def _explained(
    misses: Sequence[Unsatisfiable], blocked: dict[str, Blockers], holders: Holders
) -> str:
    """kubedra's explanation of a pod that fit nowhere: on the node that came closest (the
    most devices left at the last stage), the blockers and the allocator's funnel; then
    what would make it fit (a release, else the nearest node), from the diagnosed nodes
    and that one."""
    with_funnels = [m for m in misses if m.funnels]
    if not with_funnels:
        return ""
    best = max(with_funnels, key=lambda m: sum(f.counts[-1] for f in m.funnels))
    why = blocked[best.node] if best.node in blocked else diagnose(best, holders)
    funnels = "; ".join(format_funnel(f) for f in best.funnels)
    text = f"on node {best.node}, {'; '.join(map(str, why)) or best.summary}: {funnels}"
    return "; ".join([text, *hints({**blocked, best.node: why}.items())])


def _without_reservations(claim: ResourceClaim, uids: set[str]) -> ResourceClaim | None:
    if claim.status is None:
        return None
    kept = tuple(r for r in claim.status.reserved_for if r.uid not in uids)
    if len(kept) == len(claim.status.reserved_for):
        return None
    return msgspec.structs.replace(
        claim, status=msgspec.structs.replace(claim.status, reserved_for=kept)
    )


def _is_allocated(claim: ResourceClaim) -> bool:
    return claim.status is not None and claim.status.allocation is not None


def _claim_refs(claim: ResourceClaim) -> Iterable[DeviceRef]:
    if claim.status is None or claim.status.allocation is None:
        return ()
    return [
        DeviceRef(r.driver, r.pool, r.device)
        for r in claim.status.allocation.devices.results
        if not r.admin_access
    ]


def _abandoned(claim: ResourceClaim) -> bool:
    """Being deleted, held by nobody, and still kept by the scheduler's finalizer."""
    reserved = claim.status.reserved_for if claim.status else ()
    return bool(
        claim.metadata.deletion_timestamp
        and not reserved
        and FINALIZER in claim.metadata.finalizers
    )


def _has_condition(pod: Pod, message: str) -> bool:
    conditions = pod.status.conditions if pod.status else ()
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.message == message
        for c in conditions
    )
