"""Pods that Permit holds: reserved in the view, not yet bound, until allowed or rejected.

Upstream's waiting pods: a Permit plugin that answers Wait names a timeout; the pod keeps
what Reserve assumed and its binding cycle does not start until every plugin that made it
wait allows it (a gang plugin allows all of a gang's pods once the last is reserved), one
rejects it, or its time runs out (then it is unreserved and backs off like a pod that did
not fit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kubedra.scheduler.queue import PodKey

P = TypeVar("P")


@dataclass
class WaitingPod(Generic[P]):
    plan: P
    deadline: float
    waiting_on: set[str]  # the plugins that have not allowed it yet
    rejected: str = ""


@dataclass
class WaitingPods(Generic[P]):
    clock: Callable[[], float]
    _pods: dict[PodKey, WaitingPod[P]] = field(default_factory=dict)

    def add(self, key: PodKey, plan: P, timeouts: dict[str, float]) -> None:
        """Hold `plan` for the plugins (name -> timeout in s) that answered Wait."""
        deadline = self.clock() + min(timeouts.values())
        self._pods[key] = WaitingPod(plan, deadline, set(timeouts))

    def allow(self, key: PodKey, plugin: str) -> bool:
        """`plugin` lets the pod go on; False when the pod is not waiting."""
        waiting = self._pods.get(key)
        if waiting is None:
            return False
        waiting.waiting_on.discard(plugin)
        return True

    def reject(self, key: PodKey, reason: str) -> bool:
        waiting = self._pods.get(key)
        if waiting is None:
            return False
        waiting.rejected = reason or "rejected"
        return True

    def __contains__(self, key: PodKey) -> bool:
        return key in self._pods

    def __iter__(self) -> Iterator[PodKey]:
        return iter(list(self._pods))

    def __len__(self) -> int:
        return len(self._pods)

    def settled(self) -> tuple[list[P], list[tuple[P, str]]]:
        """Remove and return the pods allowed by every plugin, and those rejected or timed
        out (with why)."""
        now = self.clock()
        allowed: list[P] = []
        refused: list[tuple[P, str]] = []
        for key, waiting in list(self._pods.items()):
            if waiting.rejected:
                refused.append((waiting.plan, waiting.rejected))
            elif not waiting.waiting_on:
                allowed.append(waiting.plan)
            elif now >= waiting.deadline:
                on = ", ".join(sorted(waiting.waiting_on))
                refused.append((waiting.plan, f"timed out waiting for permit of {on}"))
            else:
                continue
            del self._pods[key]
        return allowed, refused

    def ready(self) -> bool:
        """Whether a pod is allowed by every plugin or rejected: `settled` has work now
        (a loop should not sleep before taking it)."""
        return any(w.rejected or not w.waiting_on for w in self._pods.values())

    def next_due(self) -> float | None:
        return min((w.deadline for w in self._pods.values()), default=None)
