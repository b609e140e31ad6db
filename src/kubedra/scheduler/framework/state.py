"""What one scheduling cycle carries from one extension point to the next.

`CycleState` is upstream's: each plugin keeps what it computed for the pod under its own
key (a plugin reads another's entry only through that plugin's module), and the binding
cycle gets the same object, so what PreBind writes is what Reserve assumed. `PodInfo` holds
what several plugins derive from the pod (its requests, its node constraints), computed
once. `Diagnosis` counts why nodes were refused, in the words of the kube-scheduler's
"0/N nodes are available" message.
"""

from __future__ import annotations

import functools
from collections.abc import Set as AbstractSet
from typing import TypeVar

from kubedra.api.core import Pod
from kubedra.api.quantity import Quantity
from kubedra.scheduler.nodes import Wanted, node_constraints, pod_requests, wanted

T = TypeVar("T")


class CycleState:
    """Per-pod, per-cycle data of the plugins, by key."""

    __slots__ = ("_data", "joined", "scope")

    def __init__(self) -> None:
        self._data: dict[str, object] = {}
        # Upstream's PreFilterResult: the only nodes worth trying (None: all of them).
        self.scope: AbstractSet[str] | None = None
        # Devices of claims the pod joined (allocated before, for another pod), for the
        # outcome; set by the plugin that allocates.
        self.joined: tuple[str, ...] = ()

    def write(self, key: str, value: object) -> None:
        self._data[key] = value

    def read(self, key: str, cls: type[T]) -> T:
        """The entry `key`, which must be a `cls` (KeyError when no plugin wrote it)."""
        value = self._data[key]
        assert isinstance(value, cls), (key, type(value))
        return value

    def get(self, key: str, cls: type[T]) -> T | None:
        value = self._data.get(key)
        assert value is None or isinstance(value, cls), (key, type(value))
        return value


class PodInfo:
    """A pod and what the plugins derive from it, each computed on first use."""

    def __init__(self, pod: Pod) -> None:
        self.pod = pod

    @functools.cached_property
    def requests(self) -> dict[str, Quantity]:
        """Effective requests: the containers' sum, or the largest init container's."""
        return pod_requests(self.pod)

    @functools.cached_property
    def constraints(self) -> bytes:
        """What restricts the pod's nodes besides its requests (nodeName, selector,
        affinity, tolerations), encoded: the key of request-independent node filters."""
        return node_constraints(self.pod)

    @functools.cached_property
    def wanted(self) -> Wanted:
        """The accounted resources (CPU, memory) the pod requests, as the room checks them."""
        return wanted(self.requests)


class Diagnosis:
    """Why nodes were refused, counted by reason in the order reasons first appeared."""

    __slots__ = ("reasons", "total")

    def __init__(self, total: int) -> None:
        self.total = total  # the nodes the scheduler owns
        self.reasons: dict[str, int] = {}

    def add(self, reason: str, count: int = 1) -> None:
        self.reasons[reason] = self.reasons.get(reason, 0) + count

    def summary(self) -> str:
        """The kube-scheduler's summary of why a pod fits no node (most nodes first)."""
        detail = ", ".join(f"{n} {r}" for r, n in sorted(self.reasons.items(), key=lambda x: -x[1]))
        head = f"0/{self.total} nodes are available"
        return f"{head}: {detail}." if detail else f"{head}."
