"""The scheduler's view of the cluster: what its feed delivered, plus what it assumed.

Upstream's scheduler keeps informer caches and an *assume cache* on top of them: as soon as
it decides, it records the objects it is about to write (a claim with its allocation, a pod
on its node), so that the next scheduling cycle already sees those devices and CPUs taken,
long before the watch brings the writes back. An assumed object wins over older versions
that the feed delivers meanwhile; the feed's newest version is kept aside, and is what the
view goes back to when the write fails (`restore`). The assumption ends when the feed
delivers the written version or a newer one (or the object's deletion).

A deletion the feed delivers while a write is in flight ends the assumption at once (the
object is gone), and leaves a tombstone: the write's answer, handled later, must not put
the object back in the view (upstream's assume cache refuses to assume an object it no
longer has). `assume` says whether the view took the write or the feed's news was newer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubedra.api.meta import KubeObject
from kubedra.cluster.store import EventType, WatchEvent

Key = tuple[str, str]  # (namespace, name)

# What `assume` did with a write: put it in the view, found the feed had delivered this very
# version already, or found newer news there (someone else's change, or the deletion).
ASSUMED, CURRENT, SUPERSEDED = "assumed", "current", "superseded"
# Deletions remembered against late answers to writes in flight (the oldest go first).
TOMBSTONES = 4096


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
    # objects deleted while this scheduler assumed them -> the deletion's resourceVersion
    _gone: dict[tuple[str, Key], int] = field(default_factory=dict)

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
            if event.type is EventType.DELETED:
                self._bury((obj.KIND, k), event.resource_version)
        gone = self._gone.get((obj.KIND, k))
        made_again = event.type is not EventType.DELETED and event.resource_version > (gone or 0)
        if gone is not None and made_again:
            del self._gone[(obj.KIND, k)]  # an object of the name again
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
    ) -> str:
        """Put `obj` in the view now: being written (`rv` None) or written at `rv`. Returns
        ASSUMED; CURRENT when the feed delivered this very version first (it is the view's
        already); SUPERSEDED when the feed was faster with newer news, the view keeps: a
        later version, or the object's deletion (then it does not come back)."""
        k, table = key_of(obj), self.of(type(obj))
        gone = self._gone.get((obj.KIND, k))
        if gone is not None and (rv is None or rv <= gone):
            return SUPERSEDED  # deleted while it was being written
        assumed = self._assumed.get((obj.KIND, k))
        if assumed is None:
            assumed = self._assumed[(obj.KIND, k)] = _Assumed(table.get(k))
        assumed.rv, assumed.shows = rv, shows
        truth = assumed.truth
        if truth is not None and rv is not None and rv_of(truth) >= rv:
            table[k] = truth  # the feed was faster than the writer's answer
            del self._assumed[(obj.KIND, k)]
            return SUPERSEDED if rv_of(truth) > rv else CURRENT
        table[k] = obj
        return ASSUMED

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
        self._gone.clear()

    def _bury(self, k: tuple[str, Key], rv: int) -> None:
        self._gone.pop(k, None)
        self._gone[k] = rv
        while len(self._gone) > TOMBSTONES:
            del self._gone[next(iter(self._gone))]

    @staticmethod
    def _ends(assumed: _Assumed, event: WatchEvent) -> bool:
        if event.type is EventType.DELETED:
            return True
        if assumed.rv is not None and event.resource_version >= assumed.rv:
            return True
        return assumed.shows is not None and assumed.shows(event.obj)
