"""The `Store` protocol: what the scheduler, drivers and CLI need of cluster state.

It is the subset of the Kubernetes API server's semantics that DRA relies on: objects
keyed by kind/namespace/name, a cluster-wide resourceVersion that orders every write,
optimistic concurrency (a stale resourceVersion is a `Conflict`, never a silent overwrite),
spec and status written separately, finalizers, ownerReference cascade, and a watch that
replays every change after a given resourceVersion.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

import msgspec

from kubedra.api.core import Pod, PodCondition, PodStatus
from kubedra.api.meta import KubeObject

T = TypeVar("T", bound=KubeObject)

DEFAULT_NAMESPACE = "default"


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change: the object as it was after the change (before it, for DELETED)."""

    type: EventType
    resource_version: int
    obj: KubeObject


class Store(Protocol):
    def get(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T: ...

    def list(
        self,
        cls: type[T],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[T]: ...

    def create(self, obj: T) -> T: ...

    def update(self, obj: T) -> T: ...

    def update_status(self, obj: T) -> T: ...

    def delete(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T: ...

    def bind(self, pod: Pod, node: str) -> Pod | None:
        """`pods/binding`: the bound pod where the backend returns it (the API server
        answers with a Status, so KubeStore returns None)."""
        ...

    def resource_version(self) -> int: ...

    def changes(
        self, since: int, kinds: Iterable[type[KubeObject]] | None = None
    ) -> builtins.list[WatchEvent]: ...

    def watch(
        self,
        since: int,
        kinds: Iterable[type[KubeObject]] | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]: ...


def atomic(store: Store) -> contextlib.AbstractContextManager[Any]:
    """All-or-nothing where the backend can: the embedded store's transaction. The API
    server has no transaction over several objects, so there each write stands alone."""
    transaction = getattr(store, "transaction", None)
    return transaction() if callable(transaction) else contextlib.nullcontext()


def with_scheduled_condition(pod: Pod, status: str, reason: str, message: str, stamp: str) -> Pod:
    """The pod with its PodScheduled condition set (others kept; phase Pending if unset)."""
    st = pod.status or PodStatus()
    condition = PodCondition(
        type="PodScheduled",
        status=status,
        reason=reason or None,
        message=message or None,
        last_transition_time=stamp,
    )
    others = tuple(c for c in st.conditions if c.type != "PodScheduled")
    phase = st.phase or "Pending"
    return msgspec.structs.replace(
        pod, status=msgspec.structs.replace(st, phase=phase, conditions=(*others, condition))
    )
