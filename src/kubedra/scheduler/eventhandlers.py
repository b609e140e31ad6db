"""What the scheduler does with each change the feed brings (upstream's eventhandlers.go and
its queueing hints): update the cache, drop the tables and the plugins' memos that the
change can make wrong, and wake the pods it can make fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubedra.api.core import ENDED_PHASES, Node, Pod, pod_runs
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    AllocationResult,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup
from kubedra.cluster.store import WatchEvent
from kubedra.scheduler.cache import key_of
from kubedra.scheduler.claims import pod_group_of
from kubedra.scheduler.queue import pod_key

if TYPE_CHECKING:
    from kubedra.scheduler.scheduler import Scheduler

# Kinds whose change can make an unschedulable pod fit (upstream's queueing hints).
WAKING_KINDS = (ResourceSlice, ResourceClaim, DeviceClass, Node, DeviceTaintRule)


def refresh(s: Scheduler) -> None:
    """Bring the view up to date with the feed (a full load the first time)."""
    events = s.feed.sync()
    if not s.loaded:
        _load(s, events)
        return
    woken = False
    for event in events:
        obj = event.obj
        before = s.cache.of(type(obj)).get(key_of(obj))
        if not s.cache.apply(event):
            continue  # older than what this scheduler assumed: the view keeps its own
        if s.own_write(event.resource_version):
            continue  # already applied when written
        if isinstance(obj, PodGroup):
            if event.type != "DELETED":
                # pods parked until their group existed (or recorded its claims) go now
                for key in group_pods(s, key_of(obj)):
                    s.queue.activate(key)
            continue  # a group changes no node's fit: the gang plugin reads it per cycle
        if isinstance(obj, ResourceClaim):
            if s.dra is not None:
                for key in s.dra.claim_arrived(obj):
                    s.queue.activate(key)
            if not (
                _is_allocated(obj) or (isinstance(before, ResourceClaim) and _is_allocated(before))
            ):
                continue  # a claim that holds no devices, before or after, changes no choice
            after = s.cache.of(ResourceClaim).get(key_of(obj))
            woken |= _claim_changed(s, before, after)
            continue
        woken |= _note_change(s, obj, event.type == "DELETED")
    if woken:
        s.queue.wake_all()


def superseded(s: Scheduler, written: KubeObject) -> None:
    """The feed brought news of an object after this scheduler's write of it, while the
    write was in flight (the assumption kept it from the view until the write's answer was
    handled): a claim deallocated or deleted meanwhile, as when its pod was deleted right
    after its binding. The view takes it now as the change it is, and wakes the pods it may
    help, as if the event had just arrived."""
    current = s.cache.of(type(written)).get(key_of(written))
    obj = current if current is not None else written
    if isinstance(written, ResourceClaim) and not (
        _is_allocated(written) or (isinstance(current, ResourceClaim) and _is_allocated(current))
    ):
        return
    if _note_change(s, obj, current is None):
        s.queue.wake_all()


def group_pods(s: Scheduler, group: tuple[str, str]) -> list[tuple[str, str]]:
    """The pending pods of a PodGroup (namespace, name), by queue key."""
    return [
        pod_key(p)
        for p in s.cache.of(Pod).values()
        if isinstance(p, Pod) and not p.spec.node_name and pod_group_of(p) == group
    ]


def _load(s: Scheduler, events: list[WatchEvent]) -> None:
    for event in events:
        s.cache.apply(event)
    s.loaded = True
    s.invalidate()
    for obj in s.cache.of(Pod).values():
        assert isinstance(obj, Pod)
        if s.is_pending(obj):
            s.queue.add(obj)
        elif not s.others.mine(obj):
            s.others.changed(obj, pod_runs(obj))


def _note_change(s: Scheduler, obj: KubeObject, deleted: bool) -> bool:
    """Update derived state for one changed object; True if pending pods may now fit."""
    if isinstance(obj, (ResourceSlice, DeviceTaintRule, Node)):
        s.drop(inventory=True, view=True, nodes=True)
        s.framework.nodes_changed()
        s.framework.forget()
    if isinstance(obj, ResourceClaim):
        s.drop(allocated=True, view=True)
        s.others.changed()
        s.framework.forget()
    if isinstance(obj, DeviceClass):
        s.drop(classes=True)
        s.framework.forget()
    if isinstance(obj, Pod):
        ended = deleted or (obj.status is not None and obj.status.phase in ENDED_PHASES)
        if not s.others.mine(obj):
            s.others.changed(obj, not deleted and pod_runs(obj))
        if obj.spec.node_name:
            s.drop(usage=True)  # a pending pod uses nothing on any node yet
            s.touch(obj.spec.node_name)
            if ended:
                s.framework.freed({obj.spec.node_name})  # its CPU and memory
        if not deleted and s.is_pending(obj):
            s.queue.add(obj)
            s.queue.activate(pod_key(obj))  # a parked pod's claims may be recorded now
        else:
            s.queue.remove(pod_key(obj))
        return ended
    return isinstance(obj, WAKING_KINDS)


def _claim_changed(s: Scheduler, before: KubeObject | None, after: KubeObject | None) -> bool:
    """A claim that holds devices, before or after the change, changed in the cache: the
    allocated devices and the view take just that claim's change, and where it only freed
    devices on known nodes, only the misfits those nodes may now fit are forgotten."""
    freed = s.reallocated(_allocation(before), _allocation(after))
    s.others.changed()
    if freed is None:
        s.framework.forget()
    elif freed:
        s.framework.freed(freed)
    return True


def _allocation(claim: KubeObject | None) -> AllocationResult | None:
    if isinstance(claim, ResourceClaim) and claim.status is not None:
        return claim.status.allocation
    return None


def _is_allocated(claim: ResourceClaim) -> bool:
    return claim.status is not None and claim.status.allocation is not None
