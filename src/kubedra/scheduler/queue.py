"""The scheduling queue: priority then age, with backoff that wakes on relevant changes.

Like the kube-scheduler's queue: active pods are taken by descending priority, then by
creation time; a pod that could not be placed waits in backoff (1 s doubling to 10 s, the
kube-scheduler defaults) and goes back to the active queue early when something that could
make it fit changes (a slice, claim, class, node, or a pod ending).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubedra.api.core import Pod

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 10.0

PodKey = tuple[str, str]  # (namespace, name)


def pod_key(pod: Pod) -> PodKey:
    return (pod.namespace, pod.name)


def priority_order(pod: Pod) -> tuple[int, str, str, str]:
    """Higher priority first, then the older pod, then namespace and name."""
    return (
        -(pod.spec.priority or 0),
        pod.metadata.creation_timestamp or "",
        pod.namespace,
        pod.name,
    )


@dataclass
class SchedulingQueue:
    """Active heap plus a backoff area; `clock` is injectable for tests and the simulator;
    `order`: the QueueSort plugin's key (smaller first)."""

    clock: Callable[[], float]
    order: Callable[[Pod], Any] = priority_order
    _active: list[tuple[Any, PodKey]] = field(default_factory=list)
    _pods: dict[PodKey, Pod] = field(default_factory=dict)
    _attempts: dict[PodKey, int] = field(default_factory=dict)
    _backoff_until: dict[PodKey, float] = field(default_factory=dict)
    _parked: set[PodKey] = field(default_factory=set)

    def add(self, pod: Pod) -> None:
        """Add or refresh a pending pod (stays in backoff if it is there)."""
        key = pod_key(pod)
        known = key in self._pods
        self._pods[key] = pod
        if not known and key not in self._backoff_until:
            heapq.heappush(self._active, (self.order(pod), key))

    def remove(self, key: PodKey) -> None:
        self._pods.pop(key, None)
        self._attempts.pop(key, None)
        self._backoff_until.pop(key, None)
        self._parked.discard(key)

    def pop(self) -> Pod | None:
        """The next pod to try, or None; backed-off pods whose time has come rejoin first."""
        self._expire_backoff()
        while self._active:
            _, key = heapq.heappop(self._active)
            pod = self._pods.get(key)
            if pod is not None and key not in self._backoff_until:
                return pod
        return None

    def unschedulable(self, pod: Pod) -> float:
        """Put a pod that did not fit into backoff; returns how long it waits."""
        key = pod_key(pod)
        attempts = self._attempts.get(key, 0) + 1
        self._attempts[key] = attempts
        # The exponent is capped: the wait stops growing at MAX_BACKOFF_S long before 2.0**n
        # overflows (a pod retried after every release can fail thousands of times).
        doublings = min(attempts - 1, 64)
        wait: float = min(INITIAL_BACKOFF_S * 2.0**doublings, MAX_BACKOFF_S)
        self._backoff_until[key] = self.clock() + wait
        return wait

    def park(self, pod: Pod) -> None:
        """Hold a pod that cannot be tried yet (a claim it needs does not exist: upstream's
        PreEnqueue gate) until `activate`, or the longest backoff as a safety net. Not a
        failed attempt: its backoff does not grow."""
        key = pod_key(pod)
        self._pods[key] = pod
        self._parked.add(key)
        self._backoff_until[key] = self.clock() + MAX_BACKOFF_S

    def activate(self, key: PodKey) -> bool:
        """What a parked pod waited for happened: try it now. False if it was not parked."""
        if key not in self._parked:
            return False
        self._parked.discard(key)
        self._backoff_until.pop(key, None)
        pod = self._pods.get(key)
        if pod is not None:
            heapq.heappush(self._active, (self.order(pod), key))
        return True

    def hurry(self, key: PodKey) -> bool:
        """Try a parked or backed-off pod now (a gang's pods are tried together). False
        when it is neither."""
        if key not in self._backoff_until:
            return False
        self._parked.discard(key)
        del self._backoff_until[key]
        pod = self._pods.get(key)
        if pod is not None:
            heapq.heappush(self._active, (self.order(pod), key))
        return True

    def scheduled(self, key: PodKey) -> None:
        self.remove(key)

    def wake_all(self) -> int:
        """A relevant change happened: every backed-off pod may fit now."""
        woken = list(self._backoff_until)
        self._parked.clear()
        for key in woken:
            del self._backoff_until[key]
            pod = self._pods.get(key)
            if pod is not None:
                heapq.heappush(self._active, (self.order(pod), key))
        return len(woken)

    def _expire_backoff(self) -> None:
        now = self.clock()
        for key in [k for k, until in self._backoff_until.items() if until <= now]:
            del self._backoff_until[key]
            self._parked.discard(key)
            pod = self._pods.get(key)
            if pod is not None:
                heapq.heappush(self._active, (self.order(pod), key))

    def __len__(self) -> int:
        return len(self._pods)

    @property
    def waiting(self) -> int:
        """Pods in backoff or parked."""
        return len(self._backoff_until)

    @property
    def parked(self) -> int:
        return len(self._parked)

    def next_due(self) -> float | None:
        """When the first backed-off pod is due (the clock's time), or None."""
        return min(self._backoff_until.values(), default=None)
