"""Cluster state: the `Store` protocol and its embedded SQLite backend."""

from kubedra.cluster.sqlite import SqliteStore
from kubedra.cluster.store import DEFAULT_NAMESPACE, EventType, Store, WatchEvent

__all__ = ["DEFAULT_NAMESPACE", "EventType", "SqliteStore", "Store", "WatchEvent"]
