"""A kind's objects kept current from any Store: list once, then watch, relist after 410.

This is client-go's reflector and informer store in one small piece. A watch can fall
behind what the server remembers (etcd compacts its history; the API server's watch cache
holds only recent events): it then ends with 410 Gone, and events in the gap are lost.
The reflector lists again and reports the difference from what it knew as ordinary events
(ADDED, MODIFIED, and DELETED for what disappeared meanwhile), so a consumer sees every
object's final state and every deletion, whatever it missed.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Generic

from kubedra.cluster.rest import ClusterError, Expired
from kubedra.cluster.store import EventType, Store, T, WatchEvent

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, name)
RETRY_MAX = 30.0  # seconds between reconnects at most (doubling from 0.5)


class Reflector(Generic[T]):
    """The objects of one kind in `items`, brought up to date by `events()`."""

    def __init__(self, store: Store, cls: type[T]) -> None:
        self.store, self.cls = store, cls
        self.items: dict[Key, T] = {}
        self.resource_version = 0
        self.relists = 0  # how often a watch expired and the kind was listed again
        self.synced = False

    def sync(self) -> builtins.list[WatchEvent]:
        """List the kind now; the changes from what was known, as events."""
        listed, rv = _list_with_version(self.store, self.cls)
        fresh = {(o.namespace, o.name): o for o in listed}
        events = []
        for key, gone in self.items.items():
            if key not in fresh:
                events.append(WatchEvent(EventType.DELETED, rv, gone))
        for key, obj in fresh.items():
            known = self.items.get(key)
            if known is None:
                events.append(WatchEvent(EventType.ADDED, _rv(obj), obj))
            elif known.metadata.resource_version != obj.metadata.resource_version:
                events.append(WatchEvent(EventType.MODIFIED, _rv(obj), obj))
        self.items, self.resource_version, self.synced = fresh, rv, True
        return events

    def apply(self, event: WatchEvent) -> None:
        obj = event.obj
        assert isinstance(obj, self.cls)
        key = (obj.namespace, obj.name)
        if event.type is EventType.DELETED:
            self.items.pop(key, None)
        else:
            self.items[key] = obj
        self.resource_version = max(self.resource_version, event.resource_version)

    def events(
        self, stop: threading.Event | None = None, idle: float = 1.0
    ) -> Iterator[WatchEvent]:
        """Every change, applied to `items` before it is yielded: the first list (as ADDED
        events) unless `sync()` ran already, then the watch from there; runs until `stop` is
        set (checked at least every `idle` seconds). Connection failures are retried with
        backoff."""
        stop = stop or threading.Event()
        if not self.synced:
            yield from self.sync()  # sync() holds the new items; its events are the difference
        backoff = 0.5
        while not stop.is_set():
            try:
                for event in self.store.watch(self.resource_version, [self.cls], timeout=idle):
                    self.apply(event)
                    yield event
                    backoff = 0.5
                    if stop.is_set():
                        return
            except Expired:
                self.relists += 1
                log.info("%s watch expired at %s: relisting", self.cls.KIND, self.resource_version)
                yield from self.sync()
            except ClusterError as err:
                log.warning("%s watch failed: %s (retrying in %.1f s)", self.cls.KIND, err, backoff)
                stop.wait(backoff)
                backoff = min(RETRY_MAX, backoff * 2)


def _list_with_version(store: Store, cls: type[T]) -> tuple[builtins.list[T], int]:
    """The list and the resourceVersion to watch from: one answer where the backend can."""
    listing: Callable[[type[T]], tuple[builtins.list[T], int]] | None = getattr(
        store, "list_with_version", None
    )
    if listing is not None:
        return listing(cls)
    rv = store.resource_version()  # before the list: a change between them is seen twice,
    return store.list(cls), rv  # never missed


def _rv(obj: object) -> int:
    meta = getattr(obj, "metadata", None)
    return int(getattr(meta, "resource_version", 0) or 0)
