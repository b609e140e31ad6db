"""Cluster state: the `Store` protocol and its embedded SQLite backend."""

from kubedra.cluster.sqlite import DEFAULT_PATH, SqliteStore
from kubedra.cluster.store import DEFAULT_NAMESPACE, EventType, Store, WatchEvent

__all__ = ["DEFAULT_NAMESPACE", "DEFAULT_PATH", "EventType", "SqliteStore", "Store", "WatchEvent"]
