"""The device taint eviction controller: deletes running pods whose devices carry a NoExecute
taint they do not tolerate (KEP-5055; kube-controller-manager's
`device-taint-eviction-controller`), over the Store protocol, so it runs on the embedded
store and on a real cluster alike.

Each `sync` brings the controller's cache up to date with its feed (the embedded store's
change log, or watches on the API server), works out when each pod must go
(`evictions.py`), and then, as upstream does:
- sets each DeviceTaintRule's `EvictionInProgress` condition, first before evicting for a
  new rule generation and then at most every `status_period` seconds (`rule_status.py`);
- for a pod that is due: a `DeviceTaintManagerEviction` event "Marking for deletion", the
  pod's `DisruptionTarget` condition (reason `DeletionByDeviceTaintManager`), then the
  deletion, of that very pod (its uid), not of a pod that took its name since;
- for a pod no longer due (taint removed, toleration changed): "Cancelling deletion".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

import msgspec

from kubedra.api.core import Pod, PodCondition, PodStatus
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    Condition,
    DeviceTaintRule,
    DeviceTaintRuleStatus,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.cluster.events import Event, Recorder, recorder_for
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import Store
from kubedra.controllers.evictions import (
    NO_EXECUTE,
    Eviction,
    Key,
    pod_evictions,
    seconds_of,
)
from kubedra.controllers.rule_status import EVICTION_IN_PROGRESS, eviction_condition
from kubedra.errors import KubedraError, NotFound
from kubedra.scheduler.binding import update_status_retrying
from kubedra.scheduler.cache import ObjectCache
from kubedra.scheduler.feed import Feed, LogFeed, WatchFeed

log = logging.getLogger(__name__)

NAME = "device-taint-eviction-controller"
EVENT_REASON = "DeviceTaintManagerEviction"
DISRUPTION_TARGET = "DisruptionTarget"
DISRUPTION_REASON = "DeletionByDeviceTaintManager"
DISRUPTION_MESSAGE = "Device Taint manager: deleting due to NoExecute taint"
RULE_STATUS_PERIOD_S = 10.0  # upstream's shortest time between two status updates of a rule
KINDS = (ResourceSlice, DeviceTaintRule, ResourceClaim, Pod)
T = TypeVar("T", bound=KubeObject)


@dataclass
class SyncResult:
    """What one sync did: pods deleted, pods waiting for their time, evictions cancelled,
    rule statuses written (names)."""

    evicted: list[str] = field(default_factory=list)
    pending: dict[str, float] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)


class DeviceTaintEvictionController:
    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
        feed: Feed | None = None,
        status_period: float = RULE_STATUS_PERIOD_S,
        identity: str = NAME,
    ) -> None:
        """`clock`: wall-clock seconds (taints carry wall-clock `timeAdded`)."""
        self.store, self.clock, self.status_period = store, clock, status_period
        self.recorder = recorder or recorder_for(store, NAME, identity)
        self.feed = feed or (
            WatchFeed(store, KINDS) if isinstance(store, KubeStore) else LogFeed(store, KINDS)
        )
        self.cache = ObjectCache()
        self._pending: dict[Key, tuple[str, float]] = {}  # pod -> (uid, when)
        self._evicted_uids: set[str] = set()
        self._evicted_by_rule: dict[str, int] = {}  # rule uid -> pods deleted for it

    def sync(self) -> SyncResult:
        for event in self.feed.sync():
            self.cache.apply(event)
        now, result = self.clock(), SyncResult()
        every = self._objects(Pod)
        # Deleted pods stay out until the feed shows them gone, then need no memory.
        self._evicted_uids &= {p.metadata.uid or "" for p in every}
        pods = [p for p in every if p.metadata.uid not in self._evicted_uids]
        rules = {r.metadata.uid for r in self._all_rules()}
        self._evicted_by_rule = {u: n for u, n in self._evicted_by_rule.items() if u in rules}
        evictions = pod_evictions(pods, self._objects(ResourceClaim), self._slices(), self._rules())
        self._cancel(evictions, result)
        self._write_statuses({k: e for k, (_, e) in evictions.items()}, now, result)
        for key, (pod, eviction) in sorted(evictions.items()):
            if eviction.when > now:
                self._pending[key] = (pod.metadata.uid or "", eviction.when)
                result.pending[_name(key)] = eviction.when
            elif self._evict(pod, eviction):
                self._pending.pop(key, None)
                result.evicted.append(_name(key))
        return result

    def next_due(self) -> float | None:
        """The earliest time a pending pod must go (to sleep until then at most)."""
        return min((when for _, when in self._pending.values()), default=None)

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Sync until `stop` is set, at least every `interval` seconds."""
        try:
            while not stop.is_set():
                wait = interval
                try:
                    self.sync()
                    due = self.next_due()
                    if due is not None:
                        wait = min(interval, max(due - self.clock(), 0.0))
                except KubedraError as err:  # the server away: the next round tries again
                    log.warning("device taint eviction: %s", err)
                stop.wait(wait)
        finally:
            self.feed.close()
            self.recorder.close()

    # --- pods -------------------------------------------------------------------------

    def _cancel(self, evictions: dict[Key, tuple[Pod, Eviction]], result: SyncResult) -> None:
        """Pods that were waiting for their time and no longer need to go."""
        table = self.cache.of(Pod)
        for key in [k for k in self._pending if k not in evictions]:
            uid, _ = self._pending.pop(key)
            pod = table.get(key)
            if isinstance(pod, Pod) and pod.metadata.uid == uid and not _gone(pod):
                self._event(pod, "Cancelling deletion")
                result.cancelled.append(_name(key))

    def _evict(self, pod: Pod, eviction: Eviction) -> bool:
        """Condition, event and deletion of this very pod; False if it is gone already."""
        try:
            current = self.store.get(Pod, pod.name, pod.namespace)
        except NotFound:
            return False
        if current.metadata.uid != pod.metadata.uid or current.metadata.deletion_timestamp:
            return False
        self._event(current, "Marking for deletion")
        stamp = now_rfc3339(datetime.fromtimestamp(self.clock(), UTC))
        try:
            update_status_retrying(self.store, current, lambda p: _disrupted(p, stamp))
            again = self.store.get(Pod, pod.name, pod.namespace)
            if again.metadata.uid != pod.metadata.uid:
                return False  # replaced in between: upstream's uid precondition
            self.store.delete(Pod, pod.name, pod.namespace)
        except NotFound:
            return False
        log.info("evicted pod %s/%s: %s", pod.namespace, pod.name, _reasons(eviction))
        self._evicted_uids.add(pod.metadata.uid or "")
        for rule in self._rules():
            if rule.name in eviction.rules():
                uid = rule.metadata.uid or ""
                self._evicted_by_rule[uid] = self._evicted_by_rule.get(uid, 0) + 1
        return True

    def _event(self, pod: Pod, note: str) -> None:
        self.recorder.record(Event(pod, "Normal", EVENT_REASON, "Eviction", note))

    # --- rule statuses ----------------------------------------------------------------

    def _write_statuses(self, pending: dict[Key, Eviction], now: float, result: SyncResult) -> None:
        for rule in self._all_rules():
            if not self._status_due(rule, now):
                continue
            condition = eviction_condition(
                rule,
                pending,
                self._simulated(rule) if rule.spec.taint.effect == "None" else {},
                self._slices(),
                self._objects(ResourceClaim),
                self._evicted_by_rule.get(rule.metadata.uid or "", 0),
            )
            if not _same(_condition_of(rule), condition) and self._write_status(
                rule, condition, now
            ):
                result.statuses.append(rule.name)

    def _write_status(self, rule: DeviceTaintRule, condition: Condition, now: float) -> bool:
        stamp = now_rfc3339(datetime.fromtimestamp(now, UTC))
        stamped = msgspec.structs.replace(condition, last_transition_time=stamp)
        uid = rule.metadata.uid
        try:
            written = update_status_retrying(
                self.store, rule, lambda r: _with_condition(r, stamped, uid)
            )
        except KubedraError as err:  # gone, or the server away: the next round tries again
            log.debug("status of DeviceTaintRule %s not written: %s", rule.name, err)
            return False
        if written is None:
            return False
        self.cache.assume(written, int(written.metadata.resource_version or 0))
        return True

    def _status_due(self, rule: DeviceTaintRule, now: float) -> bool:
        """A new generation at once; then, for NoExecute only, at most every period."""
        existing = _condition_of(rule)
        if existing is None or existing.observed_generation != rule.metadata.generation:
            return True
        if rule.spec.taint.effect != NO_EXECUTE:
            return False
        return now - seconds_of(existing.last_transition_time) >= self.status_period

    def _simulated(self, rule: DeviceTaintRule) -> dict[Key, Eviction]:
        """What the rule would evict with the NoExecute effect."""
        evicting = msgspec.structs.replace(
            rule,
            spec=msgspec.structs.replace(
                rule.spec, taint=msgspec.structs.replace(rule.spec.taint, effect=NO_EXECUTE)
            ),
        )
        others = [r for r in self._rules() if r.name != rule.name]
        found = pod_evictions(
            self._objects(Pod), self._objects(ResourceClaim), self._slices(), [*others, evicting]
        )
        return {k: e for k, (_, e) in found.items()}

    # --- the cache --------------------------------------------------------------------

    def _objects(self, cls: type[T]) -> list[T]:
        return [o for o in self.cache.of(cls).values() if isinstance(o, cls)]

    def _slices(self) -> list[ResourceSlice]:
        return self._objects(ResourceSlice)

    def _all_rules(self) -> list[DeviceTaintRule]:
        return sorted(self._objects(DeviceTaintRule), key=lambda r: r.name)

    def _rules(self) -> list[DeviceTaintRule]:
        return [r for r in self._all_rules() if r.spec.taint.effect == NO_EXECUTE]


def _name(key: Key) -> str:
    return f"{key[0]}/{key[1]}"


def _gone(pod: Pod) -> bool:
    return bool(pod.metadata.deletion_timestamp)


def _reasons(eviction: Eviction) -> str:
    return ", ".join(str(r) for r in eviction.reasons)


def _disrupted(pod: Pod, stamp: str) -> Pod | None:
    """The pod with DisruptionTarget=True by this controller (None if it says so already)."""
    status = pod.status or PodStatus()
    if any(
        c.type == DISRUPTION_TARGET and c.status == "True" and c.reason == DISRUPTION_REASON
        for c in status.conditions
    ):
        return None
    condition = PodCondition(
        type=DISRUPTION_TARGET,
        status="True",
        reason=DISRUPTION_REASON,
        message=DISRUPTION_MESSAGE,
        last_transition_time=stamp,
    )
    others = tuple(c for c in status.conditions if c.type != DISRUPTION_TARGET)
    return msgspec.structs.replace(
        pod, status=msgspec.structs.replace(status, conditions=(*others, condition))
    )


def _condition_of(rule: DeviceTaintRule) -> Condition | None:
    conditions = rule.status.conditions if rule.status else ()
    return next((c for c in conditions if c.type == EVICTION_IN_PROGRESS), None)


def _same(existing: Condition | None, new: Condition) -> bool:
    """Equal but for the transition time (which any change bumps, as upstream's)."""
    if existing is None:
        return False
    return msgspec.structs.replace(existing, last_transition_time=None) == new


def _with_condition(
    rule: DeviceTaintRule, condition: Condition, uid: str | None
) -> DeviceTaintRule | None:
    """The rule with `condition` in place of its EvictionInProgress condition; None when the
    rule was replaced by another of its name (upstream applies the status with the uid)."""
    if rule.metadata.uid != uid:
        return None
    status = rule.status or DeviceTaintRuleStatus()
    others = tuple(c for c in status.conditions if c.type != EVICTION_IN_PROGRESS)
    return msgspec.structs.replace(
        rule, status=msgspec.structs.replace(status, conditions=(*others, condition))
    )
