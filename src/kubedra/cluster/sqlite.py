"""`SqliteStore`: the embedded cluster state, one SQLite file shared by several processes.

Every write is one `BEGIN IMMEDIATE` transaction that checks the resourceVersion, writes
the object and appends to the change log; SQLite's WAL journal makes it all-or-nothing
when a process dies mid-write, and lets readers (and watchers in other processes) go on
while one writer commits. The change log's row id is the cluster-wide resourceVersion.
"""

from __future__ import annotations

import builtins
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.codec import decode_json, to_dict
from kubedra.api.kinds import BY_KIND, with_type_meta
from kubedra.api.meta import KubeObject, ObjectMeta
from kubedra.api.validation.update import check_update
from kubedra.cluster.selectors import parse_field_selector, parse_label_selector
from kubedra.cluster.store import DEFAULT_NAMESPACE, EventType, T, WatchEvent
from kubedra.errors import AlreadyExists, Conflict, NotFound

DEFAULT_PATH = ".kubedra/state.db"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    uid TEXT NOT NULL, rv INTEGER NOT NULL, node_name TEXT, driver TEXT, data BLOB NOT NULL,
    PRIMARY KEY (kind, namespace, name));
CREATE INDEX IF NOT EXISTS objects_node ON objects (kind, node_name);
CREATE INDEX IF NOT EXISTS objects_driver ON objects (kind, driver);
CREATE TABLE IF NOT EXISTS owners (
    owner_uid TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS owners_uid ON owners (owner_uid);
CREATE TABLE IF NOT EXISTS changes (
    rv INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, kind TEXT NOT NULL,
    data BLOB NOT NULL);
"""
# Kubernetes' generateName suffix alphabet: no vowels (no words), no look-alike characters.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


class SqliteStore:
    """The embedded Store. Thread-safe; open one per process on the same file."""

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        poll_interval: float = 0.05,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """`clock` stamps creation and deletion times (the wall clock unless given: the
        simulator passes its own, so the queue's creation-time order is arrival order)."""
        self.path = Path(path)
        self._clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.poll_interval = poll_interval
        self._lock = threading.RLock()
        self._depth = 0
        self._rv_in_tx: int | None = None  # last resourceVersion taken in this transaction
        self._db = sqlite3.connect(
            self.path, timeout=60, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=60000")
        with self._write():
            for statement in filter(str.strip, _SCHEMA.split(";")):
                self._db.execute(statement)

    def _timestamp(self) -> str:
        return now_rfc3339(self._clock() if self._clock is not None else None)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- reads ------------------------------------------------------------------------

    def get(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T:
        row = self._db_read(
            "SELECT data FROM objects WHERE kind=? AND namespace=? AND name=?",
            (cls.KIND, _ns(cls, namespace), name),
        )
        if not row:
            raise NotFound(f'{cls.KIND} "{name}" not found')
        return _decode(cls, row[0][0])

    def list(
        self,
        cls: type[T],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[T]:
        """Objects of a kind, sorted by namespace and name (kubectl's order)."""
        where, args = ["kind=?"], [cls.KIND]  # both lists of str
        if namespace is not None and cls.NAMESPACED:
            where.append("namespace=?")
            args.append(namespace)
        for column, value in parse_field_selector(field_selector or "").items():
            where.append(f"{column}=?")
            args.append(value)
        rows = self._db_read(
            f"SELECT data FROM objects WHERE {' AND '.join(where)} ORDER BY namespace, name", args
        )
        objects = [_decode(cls, data) for (data,) in rows]
        if label_selector:
            selector = parse_label_selector(label_selector)
            objects = [o for o in objects if selector.matches(o.metadata.labels)]
        return objects

    def resource_version(self) -> int:
        row = self._db_read("SELECT COALESCE(MAX(rv), 0) FROM changes", ())
        return int(row[0][0])

    def changes(
        self, since: int, kinds: Iterable[type[KubeObject]] | None = None
    ) -> builtins.list[WatchEvent]:
        """Every change after resourceVersion `since`, oldest first."""
        names = sorted({k.KIND for k in kinds}) if kinds is not None else None
        query = "SELECT rv, type, kind, data FROM changes WHERE rv > ?"
        args: builtins.list[object] = [since]
        if names is not None:
            query += f" AND kind IN ({','.join('?' * len(names))})"
            args += names
        rows = self._db_read(query + " ORDER BY rv", args)
        return [WatchEvent(EventType(t), rv, _decode(BY_KIND[k], d)) for rv, t, k, d in rows]

    def watch(
        self,
        since: int,
        kinds: Iterable[type[KubeObject]] | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """Changes after `since` as they happen (also those of other processes); stops
        after `timeout` seconds without one, or never when timeout is None."""
        kinds = list(kinds) if kinds is not None else None
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            events = self.changes(since, kinds)
            for event in events:
                since = event.resource_version
                yield event
            if events and timeout is not None:
                deadline = time.monotonic() + timeout
            if not events:
                time.sleep(self.poll_interval)

    # --- writes -----------------------------------------------------------------------

    def create(self, obj: T) -> T:
        """Store a new object: name from generateName, uid, creationTimestamp, rv."""
        meta = obj.metadata
        namespace = _ns(type(obj), meta.namespace or DEFAULT_NAMESPACE)
        if not meta.name and not meta.generate_name:
            raise ValueError(f"{obj.KIND}: metadata.name or metadata.generateName is required")
        with self._write():
            name = meta.name or self._free_name(obj.KIND, namespace, meta.generate_name or "")
            if self._row(obj.KIND, namespace, name):
                raise AlreadyExists(f'{obj.KIND} "{name}" already exists')
            fresh = msgspec.structs.replace(
                meta,
                name=name,
                generate_name=meta.generate_name,
                namespace=namespace if type(obj).NAMESPACED else None,
                uid=str(uuid.uuid4()),
                creation_timestamp=self._timestamp(),
                resource_version=None,
                deletion_timestamp=None,
                generation=1 if meta.generation is None else meta.generation,
            )
            return self._put(msgspec.structs.replace(obj, metadata=fresh), EventType.ADDED)

    def update(self, obj: T) -> T:
        """Replace everything but status (a resourceVersion, when given, must be current)."""
        return self._replace(obj, keep_status=True)

    def update_status(self, obj: T) -> T:
        """Replace only the status (the `/status` subresource)."""
        return self._replace(obj, keep_status=False)

    def delete(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T:
        """Delete (or, while finalizers remain, mark deleted); owned objects follow."""
        with self._write():
            stored = self._stored(cls, _ns(cls, namespace), name)
            if stored.metadata.finalizers:
                if stored.metadata.deletion_timestamp:
                    return stored
                stamp = self._timestamp()
                meta = msgspec.structs.replace(stored.metadata, deletion_timestamp=stamp)
                marked = msgspec.structs.replace(stored, metadata=meta)
                return self._put(marked, EventType.MODIFIED, stored)
            self._remove(stored)
            return stored

    # --- internals --------------------------------------------------------------------

    def _replace(self, obj: T, keep_status: bool) -> T:
        cls, meta = type(obj), obj.metadata
        namespace = _ns(cls, meta.namespace or DEFAULT_NAMESPACE)
        with self._write():
            stored = self._stored(cls, namespace, meta.name or "")
            if meta.resource_version and meta.resource_version != stored.metadata.resource_version:
                raise Conflict(
                    f'Operation cannot be fulfilled on {cls.KIND} "{meta.name}": the object has '
                    "been modified; please apply your changes to the latest version and try again"
                )
            merged = _merge(stored, obj, keep_status)
            if keep_status:  # an update, not a status write: the API server's update rules
                check_update(stored, merged)
            if merged.metadata.deletion_timestamp and not merged.metadata.finalizers:
                self._remove(merged)
                return merged
            return self._put(merged, EventType.MODIFIED, stored)

    def _put(self, obj: T, event: EventType, previous: KubeObject | None = None) -> T:
        """Write the object at the next resourceVersion and log the change (3 statements
        for a plain write: the change, the object, its owners only when there are any)."""
        rv = self._next_rv()
        obj = msgspec.structs.replace(
            with_type_meta(obj),
            metadata=msgspec.structs.replace(obj.metadata, resource_version=str(rv)),
        )
        data = msgspec.json.encode(to_dict(obj))
        spec = getattr(obj, "spec", None)
        key = (obj.KIND, obj.metadata.namespace or "", obj.metadata.name or "")
        self._db.execute(
            "INSERT INTO changes (rv, type, kind, data) VALUES (?,?,?,?)",
            (rv, event.value, obj.KIND, data),
        )
        self._db.execute(
            "INSERT OR REPLACE INTO objects VALUES (?,?,?,?,?,?,?,?)",
            (
                *key,
                obj.metadata.uid,
                rv,
                getattr(spec, "node_name", None),
                getattr(spec, "driver", None),
                data,
            ),
        )
        owners = [ref.uid for ref in obj.metadata.owner_references]
        before = [ref.uid for ref in previous.metadata.owner_references] if previous else []
        if owners != before:
            self._db.execute("DELETE FROM owners WHERE kind=? AND namespace=? AND name=?", key)
            self._db.executemany(
                "INSERT INTO owners VALUES (?,?,?,?)", [(uid, *key) for uid in owners]
            )
        return obj

    def _remove(self, obj: KubeObject) -> None:
        rv = self._next_rv()
        key = (obj.KIND, obj.metadata.namespace or "", obj.metadata.name)
        self._db.execute("DELETE FROM objects WHERE kind=? AND namespace=? AND name=?", key)
        self._db.execute("DELETE FROM owners WHERE kind=? AND namespace=? AND name=?", key)
        self._db.execute(
            "INSERT INTO changes (rv, type, kind, data) VALUES (?,?,?,?)",
            (rv, EventType.DELETED.value, obj.KIND, msgspec.json.encode(to_dict(obj))),
        )
        # Background cascade of upstream's garbage collector: dependents go with their owner.
        owned = self._db.execute(
            "SELECT kind, namespace, name FROM owners WHERE owner_uid=?", (obj.metadata.uid,)
        ).fetchall()
        for kind, namespace, name in owned:
            row = self._row(kind, namespace, name)
            if row:
                self._remove(_decode(BY_KIND[kind], row))

    def _next_rv(self) -> int:
        """The next resourceVersion. Only called inside a write transaction, which holds
        SQLite's write lock: no other process can take the same number."""
        if self._rv_in_tx is None:
            row = self._db.execute("SELECT COALESCE(MAX(rv), 0) FROM changes").fetchone()
            self._rv_in_tx = int(row[0])
        self._rv_in_tx += 1
        return self._rv_in_tx

    def _row(self, kind: str, namespace: str, name: str) -> bytes | None:
        row = self._db.execute(
            "SELECT data FROM objects WHERE kind=? AND namespace=? AND name=?",
            (kind, namespace, name),
        ).fetchone()
        return None if row is None else bytes(row[0])

    def _stored(self, cls: type[T], namespace: str, name: str) -> T:
        row = self._row(cls.KIND, namespace, name)
        if row is None:
            raise NotFound(f'{cls.KIND} "{name}" not found')
        return _decode(cls, row)

    def _free_name(self, kind: str, namespace: str, prefix: str) -> str:
        for _ in range(100):
            name = prefix + "".join(random.choices(_SUFFIX_ALPHABET, k=5))
            if not self._row(kind, namespace, name):
                return name
        raise AlreadyExists(f"{kind}: no free name for generateName {prefix!r}")

    def _db_read(self, query: str, args: Iterable[Any]) -> builtins.list[Any]:
        with self._lock:
            return self._db.execute(query, tuple(args)).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several reads and writes into one atomic step: other processes' writes wait
        until it ends, and if this process dies inside it, none of it happened. The scheduler
        uses it so that two schedulers never allocate from the same stale view."""
        with self._write():
            yield

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            if self._depth:  # nested in transaction(): the outer one commits
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0
                self._rv_in_tx = None
            self._db.execute("COMMIT")


def _ns(cls: type[KubeObject], namespace: str) -> str:
    return namespace if cls.NAMESPACED else ""


def _decode(cls: type[T], data: bytes) -> T:
    obj = decode_json(bytes(data)).obj
    assert isinstance(obj, cls)
    return obj


def _merge(stored: T, new: T, keep_status: bool) -> T:
    """The object a write leaves: identity fields from the store; spec or status from `new`."""
    identity = dict(
        uid=stored.metadata.uid,
        creation_timestamp=stored.metadata.creation_timestamp,
        namespace=stored.metadata.namespace,
        name=stored.metadata.name,
        deletion_timestamp=stored.metadata.deletion_timestamp,
    )
    if not keep_status:
        return (
            msgspec.structs.replace(stored, status=getattr(new, "status", None))
            if hasattr(stored, "status")
            else stored
        )
    meta: ObjectMeta = msgspec.structs.replace(new.metadata, **identity)
    merged = msgspec.structs.replace(new, metadata=meta)
    if hasattr(stored, "status"):
        merged = msgspec.structs.replace(merged, status=getattr(stored, "status", None))
    return merged
