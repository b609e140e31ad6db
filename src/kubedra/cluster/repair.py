"""Checking, backing up, repairing and restoring the embedded store (`kubedra store ...`).

- check: every fault kubedra can see, changing nothing: the file as opening checks it, a
  full read of the write-ahead log, SQLite's integrity_check, every row decoded.
- repair: the damaged file and its log are copied aside and left as they were. What can
  still be read is read from a scratch copy, row by row, stepping over stretches SQLite
  cannot read, from both tables: the change log holds every version of every object, so an
  object whose row is lost usually comes back from it. Each object returns at its newest
  readable version (a newer DELETED change means it is gone); the report names every
  object lost or brought back older. The new store is built aside and renamed into place.
- backup / restore: SQLite's online backup to a new file; a restore checks the backup and
  installs a copy of it as repair installs its result (the replaced store is kept aside).

Repair and restore refuse while another process has the store open.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedra.api.meta import KubeObject
from kubedra.cluster import storefile, wal
from kubedra.cluster.sqlite import (
    DECODE_ERRORS,
    SqliteStore,
    decode_stored,
    display_name,
    object_row,
)
from kubedra.cluster.store import EventType
from kubedra.errors import StoreError

Key = tuple[str, str, str]  # kind, namespace, name
Row = tuple[Any, ...]
_MAX_SKIPS = 10_000  # unreadable stretches stepped over per table before giving up


@dataclass
class CheckReport:
    problems: list[str] = field(default_factory=list)
    objects: int = 0
    changes: int = 0
    log_frames: int = 0


@dataclass(frozen=True, slots=True)
class Version:
    """One readable version of an object: from its row, or from a change-log row."""

    key: Key
    rv: int
    deleted: bool
    obj: KubeObject
    data: bytes


@dataclass
class RepairReport:
    aside: Path
    objects: Counter[str] = field(default_factory=Counter)  # kind -> objects recovered
    changes: int = 0
    lost: list[str] = field(default_factory=list)
    older: list[str] = field(default_factory=list)
    undecodable: int = 0  # rows read but not decodable
    unreadable: list[str] = field(default_factory=list)  # tables SQLite could not read whole
    missing_changes: list[tuple[int, int]] = field(default_factory=list)  # rv ranges
    log_problem: str | None = None
    log_frames_dropped: int = 0

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.objects.items()))
        total = sum(self.objects.values())
        out = [
            f"the damaged store is kept as {self.aside}",
            f"recovered: {total} object(s){f' ({kinds})' if kinds else ''}, "
            f"{self.changes} change-log row(s)",
        ]
        if self.log_problem:
            out.append(
                f"write-ahead log: {self.log_problem}; read past it by dropping "
                f"{self.log_frames_dropped} damaged frame(s) (their pages are older)"
            )
        out += [f"unreadable: {problem}" for problem in self.unreadable]
        if self.undecodable:
            out.append(f"unreadable: {self.undecodable} row(s) that do not decode")
        if self.missing_changes:
            runs = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in self.missing_changes[:5])
            more = ", ..." if len(self.missing_changes) > 5 else ""
            out.append(
                f"missing change-log rows at resourceVersions {runs}{more}: an object last "
                "written there whose own row is unreadable too is lost without a name"
            )
        out += [f"lost: {who}" for who in self.lost]
        out += [f"older: {who}" for who in self.older]
        if not (self.lost or self.older or self.unreadable or self.missing_changes):
            out.append("lost: nothing that kubedra can tell")
        return out


# --- check --------------------------------------------------------------------------------


def check(path: Path) -> CheckReport:
    """Every fault kubedra can find in the store at `path`, without changing it."""
    report = CheckReport()
    try:
        storefile.check_file(path)
    except StoreError as err:
        report.problems.append(str(err))
        return report
    _check_log(path, report)
    try:
        with closing(storefile.open_connection(path, "ro")) as db:
            storefile.check_identity(db, path)
            integrity = [row[0] for row in db.execute("PRAGMA integrity_check(20)")]
            objects = readable_rows(db, "objects", "kind, namespace, name, data")
            changes = readable_rows(db, "changes", "rv, type, kind, data")
    except StoreError as err:
        report.problems.append(str(err))
        return report
    except sqlite3.Error as err:
        report.problems.append(str(storefile.translate(path, err)))
        return report
    if integrity != ["ok"]:
        report.problems += [f"integrity_check: {line}" for line in integrity]
    report.objects, report.changes = len(objects.rows), len(changes.rows)
    report.problems += [p for p in (objects.problem(), changes.problem()) if p]
    for kind, namespace, name, data in objects.rows:
        report.problems += _undecodable(display_name(kind, namespace, name), kind, data)
    for rv, change, kind, data in changes.rows:
        report.problems += _undecodable(f"change {rv} ({kind} {change})", kind, data)
    return report


def _check_log(path: Path, report: CheckReport) -> None:
    report.log_frames, problem = log_finding(path)
    if problem:
        report.problems.append(f"write-ahead log {wal.log_path(path)}: {problem}")


def log_finding(path: Path) -> tuple[int, str | None]:
    """The store's write-ahead log read frame by frame, as SQLite's recovery reads it: how
    many frames, and what is wrong with it (None: nothing, or no log)."""
    log = wal.log_path(path)
    if not log.exists() or not log.stat().st_size:
        return 0, None
    found = wal.full_report(log)
    if isinstance(found, str):
        return 0, found
    return found.frames, found.problem()


def _undecodable(who: str, kind: str, data: object) -> list[str]:
    try:
        decode_stored(kind, data)
    except DECODE_ERRORS as err:
        return [f"{who}: cannot be read: {str(err).splitlines()[0]}"]
    return []


@dataclass
class Readout:
    """What could be read of one table."""

    table: str
    rows: list[Row] = field(default_factory=list)
    skipped: int = 0  # stretches of rows SQLite could not read
    error: str = ""  # the first thing SQLite said

    def problem(self) -> str | None:
        if not self.skipped:
            return None
        return f"table {self.table}: {self.skipped} stretch(es) SQLite cannot read ({self.error})"


def readable_rows(db: sqlite3.Connection, table: str, columns: str) -> Readout:
    """The rows of a table in rowid order, stepping over stretches SQLite cannot read."""
    out = Readout(table)
    last = 0
    query = f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid"
    while True:
        try:
            for rowid, *values in db.execute(query, (last,)):
                out.rows.append(tuple(values))
                last = rowid
            return out
        except sqlite3.DatabaseError as err:
            out.skipped += 1
            out.error = out.error or str(err)
            resume = _resume_after(db, table, last)
            if resume is None or out.skipped > _MAX_SKIPS:
                return out
            last = resume


def _resume_after(db: sqlite3.Connection, table: str, last: int) -> int | None:
    """A rowid past `last` from which reading may go on: probes ever farther ahead (at
    least one row past the failure, so every step makes progress); None if no row follows."""
    for power in range(1, 63):
        try:
            row = db.execute(
                f"SELECT rowid FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT 1",
                (last + 2**power,),
            ).fetchone()
        except sqlite3.DatabaseError:
            continue
        return None if row is None else int(row[0]) - 1
    return None


# --- repair -------------------------------------------------------------------------------


def repair(path: Path, force: bool = False) -> RepairReport | None:
    """Keep the damaged store aside, recover what can be read, install a new store; None
    (nothing done) when `check` finds no fault, unless `force`."""
    _refuse_unrepairable(path)
    if not force and not check(path).problems:
        return None
    report = RepairReport(aside=keep_aside(path, "damaged"))
    _, report.log_problem = log_finding(report.aside)
    versions, changes = _salvage(report.aside, report)
    rebuilt = storefile.scratch_path(path, "repaired")
    try:
        _write_store(rebuilt, versions, changes)
        report.changes = len(changes)
        for version in versions:
            report.objects[version.obj.KIND] += 1
        install(rebuilt, path)
    finally:
        storefile.remove_with_log(rebuilt)
    return report


def _refuse_unrepairable(path: Path) -> None:
    if not path.exists():
        raise StoreError(f"store {path} does not exist: nothing to repair")
    if path.is_dir():
        raise StoreError(f"store {path} is a directory, not a store file: move it away")
    if storefile.in_use(path):
        raise StoreError(
            f"store {path} is open in another process: stop the kubedra schedulers, drivers "
            "and commands that use it first"
        )
    try:
        with closing(storefile.open_connection(path, "ro")) as db:
            (owner,) = db.execute("PRAGMA application_id").fetchone()
            (version,) = db.execute("PRAGMA user_version").fetchone()
    except (StoreError, sqlite3.Error):
        return  # unreadable: repairable
    if owner not in (0, storefile.APPLICATION_ID):
        raise StoreError(
            f"{path} is an SQLite database of another program (application_id {owner:#x}): "
            "kubedra does not repair it"
        )
    if version > storefile.SCHEMA_VERSION:
        raise StoreError(
            f"store {path} has schema version {version}, newer than this kubedra's "
            f"{storefile.SCHEMA_VERSION}: repair it with the kubedra that made it"
        )


def keep_aside(path: Path, label: str) -> Path:
    """Copy the store (and its log) to `<store>.<label>-<UTC time>`; returns the copy."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.{label}-{stamp}")
    shutil.copy2(path, aside)
    log = wal.log_path(path)
    if log.exists() and log.stat().st_size:
        shutil.copy2(log, wal.log_path(aside))
    return aside


def install(new: Path, path: Path) -> None:
    """Put a complete store file in place of `path` in one rename. The old file's log and
    index go first: SQLite would replay a log onto whatever file has the store's name."""
    wal.log_path(path).unlink(missing_ok=True)
    wal.index_path(path).unlink(missing_ok=True)
    new.replace(path)


def _salvage(aside: Path, report: RepairReport) -> tuple[list[Version], dict[int, Row]]:
    """Every object's newest readable version, and the readable change-log rows."""
    scratch = storefile.scratch_path(aside, "read")
    shutil.copy2(aside, scratch)
    if wal.log_path(aside).exists():
        shutil.copy2(wal.log_path(aside), wal.log_path(scratch))
        if report.log_problem:
            report.log_frames_dropped = wal.rechain(wal.log_path(scratch), _page_size(aside))
    try:
        with closing(sqlite3.connect(scratch, isolation_level=None)) as db:
            objects = readable_rows(db, "objects", "kind, namespace, name, rv, data")
            changes = readable_rows(db, "changes", "rv, type, kind, data")
    finally:
        storefile.remove_with_log(scratch)
    report.unreadable += [p for p in (objects.problem(), changes.problem()) if p]
    logged = sorted(row[0] for row in changes.rows if isinstance(row[0], int))
    stored = [row[3] for row in objects.rows if isinstance(row[3], int)]  # even undecodable
    report.missing_changes = _gaps(logged, max([*logged, *stored], default=0))
    return _newest(objects.rows, changes.rows, report)


def _page_size(path: Path) -> int:
    """The page size in a database file's header (4096, SQLite's default, if unreadable)."""
    with open(path, "rb") as f:
        head = f.read(18)
    size = int.from_bytes(head[16:18], "big") if head.startswith(storefile.SQLITE_MAGIC) else 0
    return 65536 if size == 1 else size if size >= 512 else 4096


def _gaps(logged: list[int], highest: int) -> list[tuple[int, int]]:
    """Runs of resourceVersions up to `highest` missing from the (sorted) change log read:
    the log is dense, every write takes the next number."""
    gaps, expected = [], 1
    for rv in [*logged, highest + 1]:
        if rv > expected:
            gaps.append((expected, rv - 1))
        expected = max(expected, rv + 1)
    return gaps


def _newest(
    object_rows: Iterable[Row], change_rows: Iterable[Row], report: RepairReport
) -> tuple[list[Version], dict[int, Row]]:
    newest: dict[Key, Version] = {}
    damaged: dict[Key, int] = {}  # objects whose own row does not decode -> its rv
    changes: dict[int, Row] = {}

    def offer(version: Version) -> None:
        known = newest.get(version.key)
        if known is None or version.rv > known.rv:
            newest[version.key] = version

    for kind, namespace, name, rv, data in object_rows:
        version = _version(kind, data, None, False)
        if version is None:
            report.undecodable += 1
            damaged[(str(kind), str(namespace), str(name))] = int(rv) if isinstance(rv, int) else 0
        else:
            offer(version)
    for rv, change, kind, data in change_rows:
        version = _version(kind, data, rv, change == EventType.DELETED.value)
        if version is None or change not in set(EventType):
            report.undecodable += 1
            continue
        changes[rv] = (change, kind, version.data)
        offer(version)
    for key, rv in sorted(damaged.items()):
        who = display_name(*key)
        found = newest.get(key)
        if found is None or (found.deleted and found.rv < rv):
            report.lost.append(f"{who} (its row does not decode; no readable version logged)")
            newest.pop(key, None)
        elif found.rv < rv:
            report.older.append(f"{who} (back at resourceVersion {found.rv}, was {rv})")
    return [v for v in newest.values() if not v.deleted], changes


def _version(kind: object, data: object, rv: object, deleted: bool) -> Version | None:
    try:
        obj = decode_stored(str(kind), data)
    except DECODE_ERRORS:
        return None
    raw = data.encode() if isinstance(data, str) else data if isinstance(data, bytes) else b""
    at = rv if isinstance(rv, int) else int(obj.metadata.resource_version or 0)
    key = (obj.KIND, obj.metadata.namespace or "", obj.metadata.name or "")
    return Version(key, at, deleted, obj, raw)


def _write_store(path: Path, versions: list[Version], changes: dict[int, Row]) -> None:
    """A new store holding `versions` and the change log; an object whose own version is
    missing from the log gets a MODIFIED row at its resourceVersion, so the store's
    resourceVersion is never behind an object's."""
    storefile.build(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("BEGIN")
        logged = dict(changes)
        for version in versions:
            logged.setdefault(
                version.rv, (EventType.MODIFIED.value, version.obj.KIND, version.data)
            )
        db.executemany(
            "INSERT INTO changes (rv, type, kind, data) VALUES (?,?,?,?)",
            [(rv, *row) for rv, row in sorted(logged.items())],
        )
        db.executemany(
            "INSERT INTO objects VALUES (?,?,?,?,?,?,?,?)",
            [object_row(v.obj, v.rv, v.data) for v in versions],
        )
        db.executemany(
            "INSERT INTO owners VALUES (?,?,?,?)",
            [(ref.uid, *v.key) for v in versions for ref in v.obj.metadata.owner_references],
        )
        db.execute("COMMIT")


# --- backup and restore -------------------------------------------------------------------


def backup(path: Path, dest: Path) -> CheckReport:
    """A consistent copy of a healthy store as the new file `dest`, checked."""
    if not path.exists():
        raise StoreError(f"store {path} does not exist: nothing to back up")
    _checked(path, "store", "repair it first (or copy the files as they are)")
    copy = storefile.scratch_path(dest, "backup")
    try:
        store = SqliteStore(path)
        try:
            store.backup_to(copy)
        finally:
            store.close()
        report = _checked(copy, "the backup", "")
        os.link(copy, dest)
    except FileExistsError:
        raise StoreError(f"{dest} exists already: a backup never replaces a file") from None
    finally:
        storefile.remove_with_log(copy)
    return report


def restore(backup_file: Path, path: Path) -> Path | None:
    """Install a copy of a checked backup as the store; returns where the replaced store
    was kept (None when there was none)."""
    if backup_file.is_dir():
        raise StoreError(
            f"backup {backup_file} is a folder: name the backup file itself "
            "(`kubedra store backup FILE` writes one file)"
        )
    if not backup_file.is_file():
        raise StoreError(f"backup {backup_file} does not exist")
    _checked(backup_file, "backup", "")
    if path.exists() and storefile.in_use(path):
        raise StoreError(
            f"store {path} is open in another process: stop the kubedra schedulers, drivers "
            "and commands that use it first"
        )
    aside = keep_aside(path, "replaced") if path.exists() else None
    copy = storefile.scratch_path(path, "restored")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(backup_file, copy)
        install(copy, path)
    finally:
        storefile.remove_with_log(copy)
    return aside


def _checked(path: Path, what: str, advice: str) -> CheckReport:
    report = check(path)
    if report.problems:
        found = report.problems[0].split("; ")[0]  # without its own advice
        raise StoreError(
            f"{what} {path} fails its check ({found}){f': {advice}' if advice else ''}"
        )
    return report
