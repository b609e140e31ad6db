"""Where the scheduler's view comes from: one feed of changes per store.

`sync()` answers the full state (as ADDED events) the first time, then every change since
the previous call, oldest first per kind. Two feeds, one contract:
- `LogFeed` reads the store's change log when asked: for the embedded store, a local
  read that is current inside the scheduler's transaction;
- `WatchFeed` keeps one reflector per kind (list, then watch; relist after 410; reconnect
  with backoff) running in the background, as an informer does: for the API server, where
  asking is a network round trip and the watch is the way to stay current.

Some kinds are optional (`OPTIONAL_KINDS`: scheduling.k8s.io/v1beta1 PodGroups, which a
cluster without that API version does not serve): "not found" (or "forbidden": a role
without them) when listing one counts as an empty list, so the scheduler starts without
it, and the listing is tried again every `OPTIONAL_RETRY_S` (the API may be enabled
later), as upstream's informers for a disabled API are simply not started.
"""

from __future__ import annotations

import builtins
import logging
import queue
import threading
from collections.abc import Sequence
from typing import Protocol

from kubedra.api.meta import KubeObject
from kubedra.api.scheduling import PodGroup, Workload
from kubedra.cluster.reflector import Reflector
from kubedra.cluster.rest import ClusterError, Forbidden
from kubedra.cluster.store import EventType, Store, WatchEvent
from kubedra.errors import NotFound
from kubedra.scheduler.cache import rv_of

log = logging.getLogger(__name__)
RESTART_DELAY_S = 1.0  # after an unexpected error in a reflector, before it goes on
WATCH_IDLE_S = 60.0  # a watch request quiet this long is renewed (bookmarks keep it alive)
OPTIONAL_RETRY_S = 60.0  # an optional kind the server did not serve is listed again after
# Kinds the server may not serve: listed as empty when it answers "not found".
OPTIONAL_KINDS: tuple[type[KubeObject], ...] = (PodGroup, Workload)


class Feed(Protocol):
    def sync(self) -> builtins.list[WatchEvent]: ...

    def close(self) -> None: ...


class FeedStopped(Exception):
    """The feed was closed before its first full listing arrived."""


class LogFeed:
    """The change log of a store, read on demand."""

    def __init__(
        self,
        store: Store,
        kinds: Sequence[type[KubeObject]],
        optional: Sequence[type[KubeObject]] = OPTIONAL_KINDS,
    ) -> None:
        self.store, self.kinds = store, tuple(kinds)
        self.optional = frozenset(optional)
        self.rv: int | None = None

    def sync(self) -> builtins.list[WatchEvent]:
        if self.rv is None:
            rv = self.store.resource_version()  # before listing: a change between is seen twice
            events = []
            for cls in self.kinds:
                try:
                    listed = self.store.list(cls)
                except NotFound:
                    if cls not in self.optional:
                        raise
                    self.kinds = tuple(k for k in self.kinds if k is not cls)
                    log.info("%s: not served; going on without it", cls.KIND)
                    continue
                events += [WatchEvent(EventType.ADDED, rv_of(obj), obj) for obj in listed]
            self.rv = rv
            return events
        events = self.store.changes(self.rv, self.kinds)
        if events:
            self.rv = events[-1].resource_version
        return events

    def close(self) -> None:
        pass


class WatchFeed:
    """Reflectors in background threads; `sync()` drains what they delivered."""

    def __init__(
        self,
        store: Store,
        kinds: Sequence[type[KubeObject]],
        wake: threading.Event | None = None,
        idle: float = WATCH_IDLE_S,
        optional: Sequence[type[KubeObject]] = OPTIONAL_KINDS,
    ) -> None:
        self.store, self.kinds = store, tuple(kinds)
        self.optional = frozenset(optional)
        self.wake = wake or threading.Event()
        self.idle = idle
        self.reflectors = [Reflector(store, cls) for cls in self.kinds]
        self._inbox: queue.SimpleQueue[WatchEvent] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._threads: builtins.list[threading.Thread] = []
        self._listed: set[str] = set()

    @property
    def relists(self) -> int:
        """How often a watch expired and a kind was listed again."""
        return sum(r.relists for r in self.reflectors)

    @property
    def synced(self) -> bool:
        """Every kind's first listing is in the inbox."""
        return len(self._listed) == len(self.reflectors)

    def start(self) -> None:
        if self._threads:
            return
        for reflector in self.reflectors:
            thread = threading.Thread(
                target=self._pump, args=(reflector,), daemon=True, name=f"feed-{reflector.cls.KIND}"
            )
            thread.start()
            self._threads.append(thread)

    def sync(self) -> builtins.list[WatchEvent]:
        """Everything delivered so far; the first call waits for every kind's first list."""
        if not self._threads:
            self.start()
            while not self.synced:
                if self._stop.wait(0.05):
                    raise FeedStopped("closed before the caches were filled")
        events = []
        while True:
            try:
                events.append(self._inbox.get_nowait())
            except queue.Empty:
                return events

    def close(self) -> None:
        self._stop.set()

    def _pump(self, reflector: Reflector[KubeObject]) -> None:
        """One kind's events into the inbox until closed: its first listing as a whole,
        then the watch. An error is logged and the reflector goes on from where it was."""
        while not self._stop.is_set():
            try:
                if not reflector.synced:
                    for event in reflector.sync():
                        self._inbox.put(event)
                    self._listed.add(reflector.cls.KIND)
                    self.wake.set()
                for event in reflector.events(self._stop, idle=self.idle):
                    self._inbox.put(event)
                    self.wake.set()
            except (NotFound, Forbidden) as err:
                if reflector.synced or reflector.cls not in self.optional:
                    log.warning("%s: %s (retrying)", reflector.cls.KIND, err)
                    self._stop.wait(RESTART_DELAY_S)
                    continue
                # an API the server does not serve (or this scheduler may not list): empty
                # for now, looked for again later
                if reflector.cls.KIND not in self._listed:
                    log.warning("%s: %s; going on without it", reflector.cls.KIND, err)
                    self._listed.add(reflector.cls.KIND)
                    self.wake.set()
                self._stop.wait(OPTIONAL_RETRY_S)
            except ClusterError as err:  # the first listing: the server away or refusing
                log.warning("%s: %s (retrying)", reflector.cls.KIND, err)
                self._stop.wait(RESTART_DELAY_S)
            except Exception:
                log.exception("%s feed failed; going on", reflector.cls.KIND)
                self._stop.wait(RESTART_DELAY_S)
