"""Every kind the dashboard shows, kept current from any Store: an informer per kind.

One `Reflector` per kind lists it, then follows its watch (relisting after 410 Gone), each
on its own thread, as client-go's informers do; so the same code follows the embedded store
and a real API server. Every change bumps `version`; `snapshot()` freezes the objects at the
current version, and `wait()` blocks until something changes (what the live page waits on).
PodGroups (the pending view's gangs) are optional: a cluster that does not serve
scheduling.k8s.io/v1beta1 answers their listing "not found", and the mirror goes on without
them, as the scheduler does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from kubedra.api.kinds import ALL_KINDS
from kubedra.api.meta import KubeObject
from kubedra.api.scheduling import PodGroup
from kubedra.cluster.reflector import Reflector
from kubedra.cluster.store import EventType, Store, WatchEvent
from kubedra.errors import NotFound
from kubedra.web.snapshot import Key, Snapshot

log = logging.getLogger(__name__)

# Kinds shown when the store serves them (scheduling.k8s.io/v1beta1 is off by default).
OPTIONAL_KINDS: tuple[type[KubeObject], ...] = (PodGroup,)


class Mirror:
    """The objects of `kinds` in memory, brought up to date by background watches."""

    def __init__(
        self,
        store: Store,
        kinds: Sequence[type[KubeObject]] = ALL_KINDS,
        idle: float = 1.0,
        optional: Sequence[type[KubeObject]] = OPTIONAL_KINDS,
    ) -> None:
        self.idle = idle  # seconds between checks of the stop flag while a watch is quiet
        self.error: str | None = None  # why a watch stopped for good, shown on the page
        kinds = (*kinds, *(k for k in optional if k not in kinds))
        self._optional = frozenset(k.KIND for k in optional)
        self._reflectors = [Reflector(store, cls) for cls in kinds]
        self._objects: dict[str, dict[Key, KubeObject]] = {cls.KIND: {} for cls in kinds}
        self._version = 0
        self._snapshot: Snapshot | None = None
        # Each kind's table as the last snapshot froze it: a kind that did not change keeps
        # the same table object, so what was derived from it can be kept too.
        self._frozen: dict[str, dict[Key, KubeObject]] = {}
        self._dirty: set[str] = {cls.KIND for cls in kinds}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def sync(self) -> Mirror:
        """List every kind now (errors reach the caller)."""
        for reflector in list(self._reflectors):
            try:
                events = reflector.sync()
            except NotFound:
                if reflector.cls.KIND not in self._optional:
                    raise
                log.info("%s: not served; the dashboard goes on without it", reflector.cls.KIND)
                self._reflectors.remove(reflector)
                continue
            for event in events:
                self._apply(event)
        return self

    def start(self) -> Mirror:
        """`sync`, then follow every kind's watch in the background."""
        self.sync()
        for reflector in self._reflectors:
            thread = threading.Thread(
                target=self._follow, args=(reflector,), name=f"mirror-{reflector.cls.KIND}"
            )
            thread.daemon = True
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        for thread in self._threads:
            thread.join(timeout=self.idle + 5)

    @property
    def version(self) -> int:
        with self._changed:
            return self._version

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def snapshot(self) -> Snapshot:
        """The objects now; the same frozen value until the next change."""
        with self._changed:
            if self._snapshot is None:
                for kind in self._dirty:
                    self._frozen[kind] = dict(self._objects[kind])
                self._dirty.clear()
                self._snapshot = Snapshot(self._version, dict(self._frozen))
            return self._snapshot

    def wait(self, seen: int, timeout: float) -> int:
        """The version once it is past `seen`, or after `timeout` seconds, or at stop."""
        with self._changed:
            self._changed.wait_for(lambda: self._version > seen or self._stop.is_set(), timeout)
            return self._version

    def _follow(self, reflector: Reflector[KubeObject]) -> None:
        try:
            for event in reflector.events(self._stop, self.idle):
                self._apply(event)
        except Exception as err:  # a bug or an unreadable object: say so on the page
            log.exception("watch of %s stopped", reflector.cls.KIND)
            with self._changed:
                self.error = f"watch of {reflector.cls.KIND} stopped: {err}"
                self._bump()

    def _apply(self, event: WatchEvent) -> None:
        obj = event.obj
        with self._changed:
            table = self._objects[obj.KIND]
            key = (obj.namespace, obj.name)
            if event.type is EventType.DELETED:
                table.pop(key, None)
            else:
                table[key] = obj
            self._dirty.add(obj.KIND)
            self._bump()

    def _bump(self) -> None:
        """A change: a new version, a new snapshot when asked, waiters woken (lock held)."""
        self._version += 1
        self._snapshot = None
        self._changed.notify_all()
