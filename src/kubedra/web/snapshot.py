"""The cluster frozen at one version, served back as a read-only `Store`.

The views read a snapshot, never the live store: a page and its JSON see one consistent
state, and the scheduler (for explanations) runs on it without a second list of the cluster
or any write. Every write method raises: the dashboard cannot change the cluster.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.cluster.selectors import parse_field_selector, parse_label_selector
from kubedra.cluster.store import DEFAULT_NAMESPACE, T, WatchEvent
from kubedra.errors import KubedraError, NotFound

Key = tuple[str, str]  # (namespace, name)

# The embedded store's selectable fields (`selectors.FIELD_PATHS` columns), as getters.
_FIELDS: dict[str, Callable[[Any], str]] = {
    "name": lambda o: o.name,
    "namespace": lambda o: o.namespace,
    "node_name": lambda o: getattr(o.spec, "node_name", None) or "",
    "driver": lambda o: getattr(o.spec, "driver", None) or "",
}


class ReadOnly(KubedraError):
    """A write through the dashboard's snapshot: the web UI never changes the cluster."""


@dataclass(frozen=True)
class Snapshot:
    """Every mirrored object at `version` (the mirror's change count), by kind."""

    version: int
    objects: Mapping[str, Mapping[Key, KubeObject]]

    def of(self, cls: type[T]) -> builtins.list[T]:
        """The objects of a kind, by namespace and name (kubectl's order)."""
        table = self.objects.get(cls.KIND, {})
        return [o for _, o in sorted(table.items()) if isinstance(o, cls)]


class SnapshotStore:
    """The read half of the Store protocol over a snapshot; writes raise `ReadOnly`."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def get(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T:
        key = (namespace if cls.NAMESPACED else "", name)
        found = self.snapshot.objects.get(cls.KIND, {}).get(key)
        if not isinstance(found, cls):
            raise NotFound(f'{cls.KIND} "{name}" not found')
        return found

    def list(
        self,
        cls: type[T],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[T]:
        out = self.snapshot.of(cls)
        if namespace is not None and cls.NAMESPACED:
            out = [o for o in out if o.namespace == namespace]
        if label_selector:
            labels = parse_label_selector(label_selector)
            out = [o for o in out if labels.matches(o.metadata.labels)]
        for column, value in parse_field_selector(field_selector or "").items():
            out = [o for o in out if _FIELDS[column](o) == value]
        return out

    def resource_version(self) -> int:
        return self.snapshot.version

    def changes(
        self, since: int, kinds: Iterable[type[KubeObject]] | None = None
    ) -> builtins.list[WatchEvent]:
        return []  # a snapshot never changes

    def watch(
        self,
        since: int,
        kinds: Iterable[type[KubeObject]] | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        return iter(())

    def create(self, obj: T) -> T:
        raise ReadOnly(f"the web UI is read-only: cannot create {obj.KIND} {obj.name}")

    def update(self, obj: T) -> T:
        raise ReadOnly(f"the web UI is read-only: cannot update {obj.KIND} {obj.name}")

    def update_status(self, obj: T) -> T:
        raise ReadOnly(f"the web UI is read-only: cannot update {obj.KIND} {obj.name}")

    def delete(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T:
        raise ReadOnly(f"the web UI is read-only: cannot delete {cls.KIND} {name}")

    def bind(self, pod: Pod, node: str) -> Pod | None:
        raise ReadOnly(f"the web UI is read-only: cannot bind pod {pod.name}")
