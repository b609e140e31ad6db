"""One pod's scheduling cycle and binding cycle around the framework (upstream's
schedule_one.go): what the scheduler does with the cache, the queue and the pod's
condition before, between and after the extension points.

Scheduling cycle (`plan`): the framework finds a candidate; the pod is assumed on its node
in the cache and the Reserve plugins assume the rest (devices, requests); Permit may make
the pod wait. Binding cycle (`write`: PreBind then Bind, with no access to the view: it may
run in another thread while the next pod is planned), then `finish`: keep what was written
in the view, or give back what was assumed and not written and, on a refused binding, do
what upstream's Unreserve does.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.cluster.events import Event
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import with_scheduled_condition
from kubedra.errors import Conflict, KubedraError, NotFound
from kubedra.scheduler.binding import update_status_retrying
from kubedra.scheduler.framework import Candidate, CycleState, PodInfo, Unschedulable, Waiting
from kubedra.scheduler.queue import pod_key

if TYPE_CHECKING:
    from kubedra.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

EVENT_NOTE_DETAIL = "kubedra: "  # what FailedScheduling adds to kube-scheduler's summary


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
    state: CycleState
    candidate: Candidate
    started: float  # perf_counter at the start of the scheduling cycle


@dataclass(frozen=True)
class Written:
    """What a binding cycle's writes left: the objects written, and where it stopped."""

    objects: list[KubeObject] = field(default_factory=list)
    bound: Pod | None = None
    stage: str = ""  # "pre-bind" or "bind" when it failed there; "" when all went through
    error: KubedraError | None = None


def plan(s: Scheduler, pod: Pod) -> Plan | Outcome:
    """The scheduling cycle: decide where the pod goes and assume it; an Outcome when it
    cannot be placed now, or waits for Permit. Raises Conflict/NotFound when a write of the
    cycle (a claim generated from a template) raced another."""
    started = time.perf_counter()
    current = s.current_pod(pod)
    if current is None:
        s.queue.remove(pod_key(pod))
        return Outcome(_name(pod), None, "pod is no longer pending", result="error")
    state = CycleState()
    try:
        s.framework.pre_enqueue(current)
        candidate = s.framework.find(state, PodInfo(current))
    except Waiting as why:
        s.queue.park(current)
        if not why.quiet:
            set_condition(s, current, str(why))
        return Outcome(_name(current), None, str(why), result="waiting")
    except Unschedulable as why:
        return unschedulable(s, current, why)
    assumed = Plan(current, state, candidate, started)
    _reserve(s, assumed)
    try:
        waits = s.framework.permit(state, current, candidate)
    except Unschedulable as why:
        _forget_assumed(s, assumed, [])
        s.invalidate()
        return unschedulable(s, current, why)
    if waits:
        s.waiting.add(pod_key(current), assumed, waits)
        message = f"waiting for permit of {', '.join(sorted(waits))}"
        return Outcome(_name(current), None, message, result="waiting")
    return assumed


def _reserve(s: Scheduler, p: Plan) -> None:
    """The pod goes on its node in the view, then the Reserve plugins assume the rest, so
    that the next pod never gets these devices or this CPU."""
    bound = msgspec.structs.replace(
        p.pod, spec=msgspec.structs.replace(p.pod.spec, node_name=p.candidate.node)
    )
    s.cache.assume(bound)
    s.framework.reserve(p.state, p.pod, p.candidate)


def write_claims(s: Scheduler, p: Plan) -> Written:
    """PreBind: the writes that must exist before the binding."""
    written, error = s.framework.pre_bind(p.state, p.pod, p.candidate)
    if error is not None:
        return Written(written, stage="pre-bind", error=error)
    return Written(written)


def bind(s: Scheduler, p: Plan, written: Written) -> Written:
    try:
        bound = s.framework.bind(p.state, p.pod, p.candidate.node)
    except KubedraError as err:
        return Written(written.objects, stage="bind", error=err)
    return Written(written.objects, bound=bound)


def finish(s: Scheduler, p: Plan, written: Written) -> Outcome:
    """After the binding cycle: keep what was written in the view, give back what was
    assumed and not written, and on failure do what upstream's Unreserve does."""
    pod, node = p.pod, p.candidate.node
    for obj in written.objects:
        s.mine(obj)
    if not written.stage:
        _assume_bound(s, pod, node, written.bound)
        s.queue.scheduled(pod_key(pod))
        s.framework.post_bind(p.state, pod, p.candidate)
        note = f"Successfully assigned {_name(pod)} to {node}"
        s.recorder.record(Event(pod, "Normal", "Scheduled", "Binding", note))
        devices = tuple(str(r) for r in p.candidate.refs)
        return Outcome(_name(pod), node, devices=devices, joined=p.state.joined)
    _forget_assumed(s, p, written.objects)
    s.invalidate()  # the devices, CPU and memory assumed are given back
    assert written.error is not None
    if written.stage == "bind":
        return _binding_refused(s, p, written.error)
    s.framework.rollback(p.state, pod)
    s.queue.unschedulable(pod)
    if isinstance(written.error, (Conflict, NotFound)):
        return Outcome(_name(pod), None, "conflict: retried later", result="error")
    return Outcome(_name(pod), None, f"error: {written.error}", result="error")


def _forget_assumed(s: Scheduler, p: Plan, written: list[KubeObject]) -> None:
    s.framework.unreserve(p.state, p.pod, p.candidate, written)
    s.cache.restore(Pod, pod_key(p.pod))


def refuse_waiting(s: Scheduler, p: Plan, why: str) -> Outcome:
    """Permit rejected a waiting pod, or its time ran out: unreserve it, back off."""
    _forget_assumed(s, p, [])
    s.invalidate()
    return unschedulable(s, p.pod, Unschedulable(why))


def _assume_bound(s: Scheduler, pod: Pod, node: str, bound: Pod | None) -> None:
    """The binding went through: the view keeps the pod on its node until the feed shows
    it (the API server answers a binding with a Status, not the pod)."""
    if bound is not None:
        s.mine(bound)
        return
    on_node = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))
    s.cache.assume(
        on_node, shows=lambda seen: isinstance(seen, Pod) and seen.spec.node_name == node
    )


def conflict(s: Scheduler, pod: Pod) -> Outcome:
    """A write of the scheduling cycle raced another: back off, rebuild the views."""
    s.invalidate()
    s.queue.unschedulable(pod)
    return Outcome(_name(pod), None, "conflict: retried later", result="error")


def _binding_refused(s: Scheduler, p: Plan, refused: KubedraError) -> Outcome:
    """Binding was refused: the pod was deleted, re-created under its name, or bound by
    someone else since its claims were written. As upstream's Unreserve, the pod's
    reservations are dropped from those claims (on the embedded store, a claim nobody
    else holds is freed, and deleted if it was generated for a pod that is gone), and the
    pod that now has the name, if any and pending, is queued afresh (the same pod backs
    off). Unless another scheduler bound this very pod to its node from these
    reservations (as after a crash): then it is done."""
    pod, node = p.pod, p.candidate.node
    key = pod_key(pod)
    s.refresh()
    current = s.cache.of(Pod).get(key)
    name = _name(pod)
    if (
        isinstance(current, Pod)
        and current.metadata.uid == pod.metadata.uid
        and current.spec.node_name == node
    ):
        s.queue.scheduled(key)
        return Outcome(name, None, f"bound to {node} by another scheduler", result="error")
    s.framework.rollback(p.state, pod)
    s.queue.remove(key)
    s.refresh()
    current = s.cache.of(Pod).get(key)
    if isinstance(current, Pod) and s.is_pending(current):
        s.queue.add(current)
        if current.metadata.uid == pod.metadata.uid:
            s.queue.unschedulable(current)
    return Outcome(name, None, f"binding refused, retried: {refused}", result="error")


def unschedulable(s: Scheduler, pod: Pod, why: Unschedulable) -> Outcome:
    """Back off; say why on the pod's PodScheduled condition, and in a FailedScheduling
    event with kubedra's explanation (both only when the reason changed)."""
    s.queue.unschedulable(pod)
    message = str(why)
    if not _has_condition(pod, message):
        set_condition(s, pod, message)
        note = f"{message} {EVENT_NOTE_DETAIL}{why.explanation}" if why.explanation else message
        s.recorder.record(Event(pod, "Warning", "FailedScheduling", "Scheduling", note))
    return Outcome(_name(pod), None, message, result="unschedulable")


def set_condition(s: Scheduler, pod: Pod, message: str) -> None:
    """PodScheduled=False with `message`, unless the pod says so already."""
    if _has_condition(pod, message):
        return
    store = s.store

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

    s.io(write)


def _name(obj: KubeObject) -> str:
    return f"{obj.namespace}/{obj.name}"


def _has_condition(pod: Pod, message: str) -> bool:
    conditions = pod.status.conditions if pod.status else ()
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.message == message
        for c in conditions
    )
