"""The scheduler's view of the cluster: what its feed delivered, plus what it assumed.

Upstream's scheduler keeps informer caches and an *assume cache* on top of them: as soon as
it decides, it records the objects it is about to write (a claim with its allocation, a pod
on its node), so that the next scheduling cycle already sees those devices and CPUs taken,
long before the watch brings the writes back. An assumed object wins over older versions
that the feed delivers meanwhile; the feed's newest version is kept aside, and is what the
view goes back to when the write fails (`restore`). The assumption ends when the feed
delivers the written version or a newer one (or the object's deletion).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubedra.api.meta import KubeObject
from kubedra.cluster.store import EventType, WatchEvent

Key = tuple[str, str]  # (namespace, name)


def key_of(obj: KubeObject) -> Key:
    return (obj.namespace, obj.name)


def rv_of(obj: KubeObject) -> int:
    return int(obj.metadata.resource_version or 0)


@dataclass
class _Assumed:
    truth: KubeObject | None  # the newest version the feed delivered (None: not delivered)
    rv: int | None = None  # the resourceVersion of this scheduler's write; None while in flight
    # For a write whose answer carries no object (a binding through the API server): the
    # feed's version that shows it (the pod on its node) ends the assumption.
    shows: Callable[[KubeObject], bool] | None = None


@dataclass
class ObjectCache:
    tables: dict[str, dict[Key, KubeObject]] = field(default_factory=dict)
    _assumed: dict[tuple[str, Key], _Assumed] = field(default_factory=dict)

    def of(self, cls: type[KubeObject]) -> dict[Key, KubeObject]:
        return self.tables.setdefault(cls.KIND, {})

    def apply(self, event: WatchEvent) -> bool:
        """Take one change from the feed; False when an assumption hides it from the view
        (the change is older than what this scheduler wrote or is writing)."""
        obj = event.obj
        k = key_of(obj)
        assumed = self._assumed.get((obj.KIND, k))
        if assumed is not None:
            if not self._ends(assumed, event):
                assumed.truth = obj
                return False
            del self._assumed[(obj.KIND, k)]
        table = self.of(type(obj))
        if event.type is EventType.DELETED:
            table.pop(k, None)
        else:
            table[k] = obj
        return True

    def assume(
        self,
        obj: KubeObject,
        rv: int | None = None,
        shows: Callable[[KubeObject], bool] | None = None,
    ) -> None:
        """Put `obj` in the view now: being written (`rv` None) or written at `rv`."""
        k, table = key_of(obj), self.of(type(obj))
        assumed = self._assumed.get((obj.KIND, k))
        if assumed is None:
            assumed = self._assumed[(obj.KIND, k)] = _Assumed(table.get(k))
        assumed.rv, assumed.shows = rv, shows
        truth = assumed.truth
        if truth is not None and rv is not None and rv_of(truth) >= rv:
            table[k] = truth  # the feed was faster than the writer's answer
            del self._assumed[(obj.KIND, k)]
            return
        table[k] = obj

    def restore(self, cls: type[KubeObject], k: Key) -> None:
        """A write failed: the view goes back to the feed's newest version."""
        assumed = self._assumed.pop((cls.KIND, k), None)
        if assumed is None:
            return
        if assumed.truth is None:
            self.of(cls).pop(k, None)
        else:
            self.of(cls)[k] = assumed.truth

    def assumed(self, cls: type[KubeObject], k: Key) -> bool:
        return (cls.KIND, k) in self._assumed

    def clear(self) -> None:
        self.tables.clear()
        self._assumed.clear()

    @staticmethod
    def _ends(assumed: _Assumed, event: WatchEvent) -> bool:
        if event.type is EventType.DELETED:
            return True
        if assumed.rv is not None and event.resource_version >= assumed.rv:
            return True
        return assumed.shows is not None and assumed.shows(event.obj)
