"""Every command sees a damaged store the same way: checked whole when it is opened.

Damage inside the file (garbage over a page, a row that is not JSON, a row of another kind)
used to show only to the commands that happened to read that part: `get` served a store
that `apply` refused, and the reverse. So opening runs one check of the whole store, the
same for every command: SQLite's b-tree check (`quick_check`) and, in SQL, that every row
of the objects table and the change log is JSON of the kind its row says. A damaged store
is then refused by every command in one line that points at `kubedra store check|repair`.

The check costs about 2 ms per MB of store (25 ms at 1,500 nodes, 300 ms at 5,000 x 8
GPUs), so a clean result is remembered beside the store (`.<name>.verified`: the file's and
the write-ahead log's identity, size and modification time taken before the check): a store
unchanged since is not checked again. Any write changes the log's stamp, so the next open
checks again. A stamp that cannot be written (a read-only folder) only costs the check.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from kubedra.cluster import wal

# Rows whose data is not JSON, or JSON of another kind than their row's: what `store check`
# would find by decoding each, found by SQLite's own JSON functions at C speed.
_BAD_ROWS = {
    "objects": "SELECT kind, namespace, name FROM objects WHERE NOT json_valid(data) "
    "OR json_extract(data, '$.kind') IS NOT kind LIMIT 1",
    "changes": "SELECT rv, type, kind FROM changes WHERE NOT json_valid(data) "
    "OR json_extract(data, '$.kind') IS NOT kind LIMIT 1",
}


def stamp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified")


def fingerprint(path: Path) -> list[int]:
    """What changes when anything writes the store: its file's and its log's identity,
    size and modification time. An empty log counts as none: connections make one and the
    last to close removes it, with nothing written."""
    out: list[int] = []
    for file in (path, wal.log_path(path)):
        try:
            st = file.stat()
        except FileNotFoundError:
            st = None
        if st is None or (file != path and st.st_size == 0):
            out += [0, 0, 0, 0]
        else:
            out += [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
    return out


def verified_before(path: Path, seen: list[int]) -> bool:
    """Whether the store was checked clean in exactly this state."""
    try:
        return bool(json.loads(stamp_path(path).read_text()) == seen)
    except (OSError, ValueError):
        return False


def remember(path: Path, seen: list[int]) -> None:
    """Record a clean check of the state `seen`, unless the store changed during it."""
    if fingerprint(path) != seen:
        return
    stamp = stamp_path(path)
    scratch = stamp.with_name(f"{stamp.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        scratch.write_text(json.dumps(seen))
        os.replace(scratch, stamp)


@contextlib.contextmanager
def read_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """Reads that see one state of the store. A failed read's error is the one raised: the
    transaction it left (or never began: a full disk refuses the shared-memory file) is
    ended quietly rather than by a COMMIT whose own error would hide the cause."""
    db.execute("BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def first_fault(db: sqlite3.Connection) -> str | None:
    """What is wrong with the store open on `db` (read-only), or None; one read
    transaction, so it sees one state of a store that others may be writing."""
    with read_transaction(db):
        (structure,) = db.execute("PRAGMA quick_check(1)").fetchone()
        if structure != "ok":
            return f"SQLite's check finds {' '.join(str(structure).split())}"
        for table, query in _BAD_ROWS.items():
            row = db.execute(query).fetchone()
            if row is not None:
                return f"a row of table {table} is not a readable object ({_named(table, row)})"
        return None


def _named(table: str, row: tuple[object, ...]) -> str:
    if table == "objects":
        kind, namespace, name = row
        return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    rv, change, kind = row
    return f"change {rv}, {kind} {change}"
