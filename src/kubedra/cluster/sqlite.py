"""`SqliteStore`: the embedded cluster state, one SQLite file shared by several processes.

Every write is one `BEGIN IMMEDIATE` transaction that checks the resourceVersion, writes
the object and appends to the change log; SQLite's WAL journal makes it all-or-nothing
when a process dies mid-write, and lets readers (and watchers in other processes) go on
while one writer commits. The change log's row id is the cluster-wide resourceVersion.

Decoding a stored object costs more than the read itself, and a store mostly reads back
what it has just written (a scheduler's feed, the object an update replaces): objects are
remembered by resourceVersion (`_Decoded`). A committed resourceVersion names one version
of one object for good, so a remembered object is that row's decoding; the numbers a
transaction took are forgotten when it rolls back, since another writer may take them.
"""

from __future__ import annotations

import builtins
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.codec import decode_json, to_json
from kubedra.api.core import Namespace, Pod
from kubedra.api.defaults import with_defaults
from kubedra.api.kinds import BY_KIND, with_type_meta
from kubedra.api.meta import KubeObject, ObjectMeta
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate
from kubedra.api.scheduling import HIGHEST_USER_PRIORITY, PodGroup
from kubedra.api.validation import ref_of
from kubedra.api.validation.meta import unique_owner_references
from kubedra.api.validation.resource import ADMIN_ACCESS_LABEL
from kubedra.api.validation.update import check_update
from kubedra.cluster import storefile
from kubedra.cluster.selectors import parse_field_selector, parse_label_selector
from kubedra.cluster.store import (
    DEFAULT_NAMESPACE,
    EventType,
    T,
    WatchEvent,
    with_scheduled_condition,
)
from kubedra.cluster.strategy import prepared_for_create, prepared_for_update
from kubedra.errors import (
    AlreadyExists,
    Conflict,
    KubedraError,
    NotFound,
    Problem,
    StoreError,
    ValidationError,
)

# Kubernetes' generateName suffix alphabet: no vowels (no words), no look-alike characters.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# The namespaces the API server creates at start (and re-creates if deleted).
SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


def generated_name(prefix: str) -> str:
    """A name as the API server makes one from generateName: the prefix, 5 random characters."""
    return prefix + "".join(random.choices(_SUFFIX_ALPHABET, k=5))


_STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_last_stamp: tuple[float, str] = (-1.0, "")  # (UTC second, its text): writes stamp often


def now_rfc3339(now: datetime | None = None) -> str:
    """The time as the API server writes it (RFC 3339, seconds, UTC). Formatting costs more
    than a write's other bookkeeping; the text of the last UTC second is reused."""
    global _last_stamp
    now = now or datetime.now(UTC)
    if now.tzinfo is not UTC:
        return now.strftime(_STAMP_FORMAT)
    second = now.timestamp() // 1
    if _last_stamp[0] != second:
        _last_stamp = (second, now.strftime(_STAMP_FORMAT))
    return _last_stamp[1]


# Objects remembered by resourceVersion (written or decoded by this store); enough for the
# changes a feed has not read yet, and the objects a transaction reads before replacing them.
DECODED_KEPT = 8192


class _Decoded:
    """resourceVersion -> the object stored at it, for the last DECODED_KEPT ones. Callers
    hold the store's lock to add or forget."""

    __slots__ = ("in_tx", "objects")

    def __init__(self) -> None:
        self.objects: dict[int, KubeObject] = {}
        self.in_tx: builtins.list[int] = []  # taken by the open write transaction

    def get(self, rv: int, cls: type[T] | None) -> T | None:
        obj = self.objects.get(rv)
        return obj if obj is not None and type(obj) is cls else None

    def add(self, rv: int, obj: KubeObject, in_tx: bool) -> None:
        objects = self.objects
        objects[rv] = obj
        if in_tx:
            self.in_tx.append(rv)
        if len(objects) > DECODED_KEPT:
            del objects[next(iter(objects))]

    def rolled_back(self) -> None:
        for rv in self.in_tx:
            self.objects.pop(rv, None)
        self.in_tx.clear()


class SqliteStore:
    """The embedded Store. Thread-safe; open one per process on the same file."""

    def __init__(
        self,
        path: str | Path,
        *,
        poll_interval: float = 0.05,
        clock: Callable[[], datetime] | None = None,
        create: bool = True,
    ) -> None:
        """`clock` stamps creation and deletion times (the wall clock unless given: the
        simulator passes its own, so the queue's creation-time order is arrival order).
        `create=False`: a missing store is an error (commands that only read or change
        what exists never leave a new store behind a mistyped path)."""
        self.path = Path(path)
        self._clock = clock
        self.poll_interval = poll_interval
        self._lock = threading.RLock()
        self._depth = 0
        self._rv_in_tx: int | None = None  # last resourceVersion taken in this transaction
        self._decoded = _Decoded()
        if create:
            storefile.create(self.path)  # only where no file is: see storefile's rule
        elif not (self.path.exists() or self.path.is_symlink()):
            raise storefile.missing(self.path)
        self._db = storefile.connect(self.path)  # reads only: never waits for a writer
        self._system_namespaces()

    def _timestamp(self) -> str:
        return now_rfc3339(self._clock() if self._clock is not None else None)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def backup_to(self, dest: Path) -> None:
        """Copy the store to the new file `dest` through SQLite's online backup: a
        consistent snapshot while writers go on."""
        if dest.exists():
            raise StoreError(f"{dest} exists already: a backup never replaces a file")
        try:
            with closing(sqlite3.connect(dest)) as target:
                with self._lock:
                    self._db.backup(target)
                target.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as err:
            raise storefile.translate(self.path, err) from None

    # --- reads ------------------------------------------------------------------------

    def get(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T:
        namespace = _ns(cls, namespace)
        row = self._db_read(
            "SELECT rv, data FROM objects WHERE kind=? AND namespace=? AND name=?",
            (cls.KIND, namespace, name),
        )
        if not row:
            raise NotFound(f'{cls.KIND} "{name}" not found')
        ((rv, data),) = row
        (obj,) = self._decode_rows(
            "object", [(display_name(cls.KIND, namespace, name), cls, data, rv)]
        )
        return obj

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
            f"SELECT namespace, name, data, rv FROM objects WHERE {' AND '.join(where)} "
            "ORDER BY namespace, name",
            args,
        )
        objects = self._decode_rows(
            "object",
            [(display_name(cls.KIND, ns, n), cls, data, rv) for ns, n, data, rv in rows],
            keep=False,  # a listing is read once: it would only push out what is read again
        )
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
        objects = self._decode_rows(
            "change-log row",
            [
                (f"change {rv} ({kind} {change})", BY_KIND.get(kind), d, rv)
                for rv, change, kind, d in rows
            ],
        )
        return [
            WatchEvent(EventType(change), rv, obj)
            for (rv, change, _, _), obj in zip(rows, objects, strict=True)
        ]

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
        """Store a new object: name from generateName, uid, creationTimestamp, rv. As the
        API server: into an existing namespace only, never with a resourceVersion (a pasted
        uid or timestamps are replaced, repeated owner references dropped)."""
        return self._create(obj)

    def _create(self, obj: T) -> T:
        """`create`, also for the store's own objects (not through a subclass's override)."""
        meta = obj.metadata
        namespace = _ns(type(obj), meta.namespace or DEFAULT_NAMESPACE)
        if not meta.name and not meta.generate_name:
            raise ValueError(f"{obj.KIND}: metadata.name or metadata.generateName is required")
        if meta.resource_version:
            raise StoreError(
                f'{obj.KIND} "{meta.name or meta.generate_name}": resourceVersion should not be '
                "set on objects to be created"
            )
        with self._write():
            if namespace:
                self._admit(obj, namespace)
                obj = _pod_group_priority(obj)
            name = meta.name or self._free_name(obj.KIND, namespace, meta.generate_name or "")
            if self._row(obj.KIND, namespace, name) is not None:
                raise AlreadyExists(f'{obj.KIND} "{name}" already exists')
            obj = prepared_for_create(with_defaults(obj, self._timestamp()))
            fresh = msgspec.structs.replace(
                obj.metadata,
                name=name,
                generate_name=meta.generate_name,
                namespace=namespace if type(obj).NAMESPACED else None,
                uid=str(uuid.uuid4()),
                creation_timestamp=self._timestamp(),
                resource_version=None,
                deletion_timestamp=None,
                deletion_grace_period_seconds=None,
                owner_references=unique_owner_references(meta.owner_references),
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
            return self._delete_stored(self._stored(cls, _ns(cls, namespace), name))

    def bind(self, pod: Pod, node: str) -> Pod:
        """Bind a pod to a node, as the API server's `pods/binding` does: the pod's uid is a
        precondition (a pod re-created under the same name is not bound in the old one's
        place), a pod being deleted or already bound is refused, and `spec.nodeName` and
        the PodScheduled=True condition are written together."""
        with self._write():
            stored = self._stored(Pod, _ns(Pod, pod.namespace or DEFAULT_NAMESPACE), pod.name)
            refusal = _binding_refusal(pod, stored)
            if refusal:
                raise Conflict(
                    f'Operation cannot be fulfilled on pods/binding "{pod.name}": {refusal}'
                )
            bound = msgspec.structs.replace(
                stored, spec=msgspec.structs.replace(stored.spec, node_name=node)
            )
            return self._put(
                with_scheduled_condition(bound, "True", "", "", self._timestamp()),
                EventType.MODIFIED,
                stored,
            )

    # --- internals --------------------------------------------------------------------

    def _system_namespaces(self) -> None:
        """Create the namespaces the API server starts with, where this store lacks any (a
        new store, or one made before they were created): one read when all are there."""
        if all(self._row(Namespace.KIND, "", n) is not None for n in SYSTEM_NAMESPACES):
            return
        with self._write():
            for name in SYSTEM_NAMESPACES:
                if self._row(Namespace.KIND, "", name) is None:
                    self._create(Namespace(metadata=ObjectMeta(name=name)))

    def _admit(self, obj: KubeObject, namespace: str) -> None:
        """The API server's admission of a new namespaced object: its namespace exists and
        is not being deleted (NamespaceLifecycle); admin access only where it is allowed."""
        try:
            ns = self._stored(Namespace, "", namespace)
        except NotFound:
            raise NotFound(f'namespaces "{namespace}" not found') from None
        if ns.metadata.deletion_timestamp:
            raise StoreError(
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated"
            )
        _admin_access(obj, ns.metadata.labels)

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
            merged = _merge(stored, with_defaults(obj, self._timestamp()), keep_status)
            if keep_status:  # an update, not a status write: the API server's update rules
                check_update(stored, merged)
                merged = prepared_for_update(stored, merged)
            if _unchanged(stored, merged):
                return stored  # as the API server: a write that changes nothing is not one
            if merged.metadata.deletion_timestamp and not merged.metadata.finalizers:
                self._remove(merged)
                return merged
            return self._put(merged, EventType.MODIFIED, stored)

    def _put(self, obj: T, event: EventType, previous: KubeObject | None = None) -> T:
        """Write the object at the next resourceVersion and log the change (2 statements
        for a plain write: the change, the object; its owners only when they changed). A
        stored object's row is updated in place, not replaced: a replaced row moves, and
        every index entry of it is rewritten, which a commit then writes out page by page."""
        rv = self._next_rv()
        obj = msgspec.structs.replace(
            with_type_meta(obj),
            metadata=msgspec.structs.replace(obj.metadata, resource_version=str(rv)),
        )
        data = to_json(obj)
        self._decoded.add(rv, obj, in_tx=True)
        row = object_row(obj, rv, data)
        self._db.execute(
            "INSERT INTO changes (rv, type, kind, data) VALUES (?,?,?,?)",
            (rv, event.value, obj.KIND, data),
        )
        if previous is None or not self._update_row(row, previous):
            self._db.execute("INSERT OR REPLACE INTO objects VALUES (?,?,?,?,?,?,?,?)", row)
        owners = [ref.uid for ref in obj.metadata.owner_references]
        before = [ref.uid for ref in previous.metadata.owner_references] if previous else []
        if owners != before:
            key = row[:3]
            self._db.execute("DELETE FROM owners WHERE kind=? AND namespace=? AND name=?", key)
            self._db.executemany(
                "INSERT INTO owners VALUES (?,?,?,?)", [(uid, *key) for uid in owners]
            )
        return obj

    def _update_row(self, row: tuple[Any, ...], previous: KubeObject) -> bool:
        """Update a stored object's row in place; False when there is none. The indexed
        columns (node name, driver) are set only when they change: SQLite rewrites the
        index entry of every indexed column an UPDATE names, even to the same value, and
        each index page so dirtied is one more page for the commit to write."""
        if indexed_columns(previous) == row[5:7]:
            cursor = self._db.execute(_UPDATE_DATA, (row[3], row[4], row[7], *row[:3]))
        else:
            cursor = self._db.execute(_UPDATE_OBJECT, (*row[3:], *row[:3]))
        return bool(cursor.rowcount)

    def _delete_stored(self, stored: T) -> T:
        """Upstream's deletion: an object with finalizers is only marked (deletionTimestamp,
        deletionGracePeriodSeconds 0, generation bumped) and stays until an update removes
        the last finalizer; one without is removed at once. Deleting it again changes
        nothing."""
        meta = stored.metadata
        if not meta.finalizers:
            self._remove(stored)
            return stored
        if meta.deletion_timestamp:
            return stored
        marked = msgspec.structs.replace(
            meta,
            deletion_timestamp=self._timestamp(),
            deletion_grace_period_seconds=0,
            generation=meta.generation + 1 if meta.generation else meta.generation,
        )
        return self._put(
            msgspec.structs.replace(stored, metadata=marked), EventType.MODIFIED, stored
        )

    def _remove(self, obj: KubeObject) -> None:
        rv = self._next_rv()
        self._decoded.add(rv, obj, in_tx=True)  # the change's object: the one removed
        key = (obj.KIND, obj.metadata.namespace or "", obj.metadata.name)
        self._db.execute("DELETE FROM objects WHERE kind=? AND namespace=? AND name=?", key)
        self._db.execute("DELETE FROM owners WHERE kind=? AND namespace=? AND name=?", key)
        self._db.execute(
            "INSERT INTO changes (rv, type, kind, data) VALUES (?,?,?,?)",
            (rv, EventType.DELETED.value, obj.KIND, to_json(obj)),
        )
        owned = self._db.execute(
            "SELECT kind, namespace, name FROM owners WHERE owner_uid=?", (obj.metadata.uid,)
        ).fetchall()
        for kind, namespace, name in owned:
            if self._row(kind, namespace, name) is not None:
                self._collect(self._stored(BY_KIND[kind], namespace, name), obj.metadata.uid)

    def _collect(self, dependent: KubeObject, gone: str | None) -> None:
        """Background cascade, as upstream's garbage collector does it once an owner is
        gone: a dependent that still has another owner only loses the dangling reference;
        otherwise it is deleted like any object (so one with finalizers is marked and waits
        for them)."""
        refs = dependent.metadata.owner_references
        others = [ref for ref in refs if ref.uid != gone]
        if any(self._uid_exists(ref.uid) for ref in others):
            meta = msgspec.structs.replace(dependent.metadata, owner_references=tuple(others))
            self._put(
                msgspec.structs.replace(dependent, metadata=meta), EventType.MODIFIED, dependent
            )
            return
        self._delete_stored(dependent)

    def _uid_exists(self, uid: str | None) -> bool:
        row = self._db.execute("SELECT 1 FROM objects WHERE uid=? LIMIT 1", (uid,)).fetchone()
        return row is not None

    def _next_rv(self) -> int:
        """The next resourceVersion. Only called inside a write transaction, which holds
        SQLite's write lock: no other process can take the same number."""
        if self._rv_in_tx is None:
            row = self._db.execute("SELECT COALESCE(MAX(rv), 0) FROM changes").fetchone()
            self._rv_in_tx = int(row[0])
        self._rv_in_tx += 1
        return self._rv_in_tx

    def _row(self, kind: str, namespace: str, name: str) -> int | None:
        """The stored object's resourceVersion, or None where there is none (its data is
        not read: callers ask whether it exists, or read it only when not remembered)."""
        row = self._db.execute(
            "SELECT rv FROM objects WHERE kind=? AND namespace=? AND name=?",
            (kind, namespace, name),
        ).fetchone()
        return None if row is None else row[0]

    def _stored(self, cls: type[T], namespace: str, name: str) -> T:
        """The stored object, in a write transaction (its data is read only when the
        object at its resourceVersion is not remembered)."""
        rv = self._row(cls.KIND, namespace, name)
        if rv is None:
            raise NotFound(f'{cls.KIND} "{name}" not found')
        known = self._decoded.get(rv, cls)
        if known is not None:
            return known
        (data,) = self._db.execute(
            "SELECT data FROM objects WHERE kind=? AND namespace=? AND name=?",
            (cls.KIND, namespace, name),
        ).fetchone()
        (obj,) = self._decode_rows(
            "object", [(display_name(cls.KIND, namespace, name), cls, data, rv)]
        )
        return obj

    def _decode_rows(
        self,
        what: str,
        rows: Iterable[tuple[str, type[T] | None, Any, int]],
        keep: bool = True,
    ) -> builtins.list[T]:
        """Decode stored rows (name, class, data, resourceVersion), each named (`who`) so
        that a damaged one is reported as that object, never as a traceback; all damaged
        rows are named at once. An object remembered at the row's resourceVersion is not
        decoded again; with `keep`, those decoded are remembered."""
        objects: builtins.list[T] = []
        damaged = []
        decoded = self._decoded
        for who, cls, data, rv in rows:
            known = decoded.get(rv, cls)
            if known is not None:
                objects.append(known)
                continue
            try:
                obj = _decode(cls, data)
            except DECODE_ERRORS as err:
                damaged.append(f"{who}: {str(err).splitlines()[0]}")
                continue
            objects.append(obj)
            if keep:
                with self._lock:
                    decoded.add(rv, obj, in_tx=self._depth > 0)
        if damaged:
            listed = "; ".join(damaged[:3]) + (
                f"; and {len(damaged) - 3} more" if len(damaged) > 3 else ""
            )
            plural = "s" if len(damaged) > 1 else ""
            raise storefile.damaged(
                self.path, f"cannot read {len(damaged)} stored {what}{plural}: {listed}"
            )
        return objects

    def _free_name(self, kind: str, namespace: str, prefix: str) -> str:
        for _ in range(100):
            name = generated_name(prefix)
            if self._row(kind, namespace, name) is None:
                return name
        raise AlreadyExists(f"{kind}: no free name for generateName {prefix!r}")

    def _db_read(self, query: str, args: Iterable[Any]) -> builtins.list[Any]:
        with self._lock:
            try:
                return self._db.execute(query, tuple(args)).fetchall()
            except sqlite3.Error as err:
                raise storefile.translate(self.path, err) from None

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
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._depth = 1
                try:
                    yield
                except BaseException:
                    with suppress(sqlite3.Error):  # a damaged file may refuse this too
                        self._db.execute("ROLLBACK")
                    self._decoded.rolled_back()
                    raise
                finally:
                    self._depth = 0
                    self._rv_in_tx = None
                try:
                    self._db.execute("COMMIT")
                except BaseException:
                    with suppress(sqlite3.Error):  # not committed: nothing of it stays
                        self._db.execute("ROLLBACK")
                    self._decoded.rolled_back()
                    raise
                self._decoded.in_tx.clear()
            except sqlite3.Error as err:
                raise storefile.translate(self.path, err) from None


def _admin_access(obj: KubeObject, namespace_labels: dict[str, str]) -> None:
    """Admin access to devices is granted only in a namespace labelled for it (upstream's
    claim and template strategies; the path is upstream's for both kinds)."""
    if isinstance(obj, ResourceClaim):
        requests = obj.spec.devices.requests
    elif isinstance(obj, ResourceClaimTemplate):
        requests = obj.spec.spec.devices.requests
    else:
        return
    wanted = [i for i, q in enumerate(requests) if q.exactly and q.exactly.admin_access]
    if wanted and namespace_labels.get(ADMIN_ACCESS_LABEL) != "true":
        message = (
            f"Forbidden: admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` "
            "label on the containing namespace"
        )
        path = f"spec.devices.requests[{wanted[0]}].adminAccess"
        raise ValidationError([Problem(message, path, ref_of(obj))])


# The priority classes every API server has (it creates them at start); kubedra has no
# PriorityClass kind, so these are the only ones it knows the values of.
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000,
                           "system-node-critical": 2_000_001_000}  # fmt: skip


def _pod_group_priority(obj: T) -> T:
    """The API server's Priority admission of a new PodGroup: its priority is the one of
    its priority class (0 without one, there being no global default class here), and a
    different value in the manifest is refused. A class other than the system ones is
    kept without a priority (kubedra has no PriorityClass objects to resolve it)."""
    if not isinstance(obj, PodGroup):
        return obj
    spec = obj.spec
    if spec.priority_class_name and spec.priority_class_name not in SYSTEM_PRIORITY_CLASSES:
        return obj
    computed = SYSTEM_PRIORITY_CLASSES.get(spec.priority_class_name or "", 0)
    if spec.priority is not None and spec.priority != computed:
        message = (
            f"Forbidden: priority set in the pod group ({spec.priority}) must match the "
            f"priority computed ({computed}) based on the priority class set in the spec"
        )
        raise ValidationError([Problem(message, "spec.priority", ref_of(obj))])
    if computed > HIGHEST_USER_PRIORITY:  # the server's validation, after admission
        message = (
            f"Invalid value: {computed}: must be less than or equal to {HIGHEST_USER_PRIORITY}"
        )
        raise ValidationError([Problem(message, "spec.priority", ref_of(obj))])
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(spec, priority=computed))


def _unchanged(stored: T, merged: T) -> bool:
    version = stored.metadata.resource_version
    same_version = msgspec.structs.replace(merged.metadata, resource_version=version)
    return msgspec.structs.replace(merged, metadata=same_version) == stored


_UPDATE_DATA = "UPDATE objects SET uid=?, rv=?, data=? WHERE kind=? AND namespace=? AND name=?"
_UPDATE_OBJECT = (
    "UPDATE objects SET uid=?, rv=?, node_name=?, driver=?, data=? "
    "WHERE kind=? AND namespace=? AND name=?"
)


def _ns(cls: type[KubeObject], namespace: str) -> str:
    return namespace if cls.NAMESPACED else ""


def object_row(obj: KubeObject, rv: int, data: bytes) -> tuple[Any, ...]:
    """The `objects` row of an object stored at resourceVersion `rv` as `data`."""
    meta = obj.metadata
    return (
        obj.KIND,
        meta.namespace or "",
        meta.name or "",
        meta.uid,
        rv,
        *indexed_columns(obj),
        data,
    )


def indexed_columns(obj: KubeObject) -> tuple[str | None, str | None]:
    """The object's indexed columns of its row: node name and driver (None where absent)."""
    spec = getattr(obj, "spec", None)
    return getattr(spec, "node_name", None), getattr(spec, "driver", None)


DECODE_ERRORS = (ValueError, TypeError, msgspec.MsgspecError, KubedraError)


def decode_stored(kind: str, data: object) -> KubeObject:
    """A stored row's object; raises one of DECODE_ERRORS when it cannot be read."""
    return _decode(BY_KIND.get(kind), data)


def _decode(cls: type[T] | None, data: object) -> T:
    if cls is None:
        raise ValueError("not a kind kubedra knows")
    if not isinstance(data, bytes | str):
        raise TypeError(f"stored as {type(data).__name__}, not JSON")
    obj = decode_json(data.encode() if isinstance(data, str) else data).obj
    if not isinstance(obj, cls):
        raise ValueError(f"holds a {obj.KIND}, not a {cls.KIND}")
    return obj


def _binding_refusal(pod: Pod, stored: Pod) -> str:
    """Why the API server would refuse to bind `stored` for a scheduler that saw `pod`."""
    if pod.metadata.uid and pod.metadata.uid != stored.metadata.uid:
        return (
            f"Precondition failed: UID in precondition: {pod.metadata.uid}, "
            f"UID in object meta: {stored.metadata.uid}"
        )
    if stored.metadata.deletion_timestamp:
        return f"pod {pod.name} is being deleted, cannot be assigned to a host"
    if stored.spec.node_name:
        return f'pod {pod.name} is already assigned to node "{stored.spec.node_name}"'
    return ""


def display_name(kind: str, namespace: str, name: str) -> str:
    """`Kind namespace/name`, or `Kind name` for a cluster-scoped object."""
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


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
