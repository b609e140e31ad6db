"""Damaged stores made from healthy ones: each kind of fault kubedra must name, not trip on.

`make(kind, path)` leaves a damaged store at `path`. Healthy stores hold NODES Nodes named
`node-00`...; `LOGGED` kinds damage a store whose writes are still in its write-ahead log
(as a kill -9 leaves it), the rest a store whose writes are all in the database file.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from kubedra.api.core import Node
from kubedra.api.meta import ObjectMeta
from kubedra.cluster import SqliteStore
from kubedra.cluster.wal import FRAME_HEADER_SIZE, HEADER_SIZE, log_path

NODES = 20
PAGE = 4096


def node(i: int) -> Node:
    return Node(metadata=ObjectMeta(name=f"node-{i:02d}", labels={"i": str(i), "pad": "x" * 300}))


def healthy(path: Path, nodes: int = NODES, in_log: bool = False) -> None:
    """A store of `nodes` Nodes at `path`; with `in_log`, every write after creation is left
    in the write-ahead log, not yet checkpointed into the file (copied while still open)."""
    source = path.with_name(path.name + ".source")
    store = SqliteStore(source)
    store._db.execute("PRAGMA wal_autocheckpoint=0")  # keep the writes in the log
    for i in range(nodes):
        store.create(node(i))
    if in_log:
        shutil.copy(source, path)
        shutil.copy(log_path(source), log_path(path))
        store.close()
        return
    store.close()
    shutil.copy(source, path)


def snapshot(path: Path) -> dict[str, str]:
    """Digests of the store's file and log, to prove a command changed nothing (an empty
    log is the same as none: a read-only connection leaves one)."""
    files = {}
    for file in (path, log_path(path)):
        if file.is_file() and (file == path or file.stat().st_size):
            files[file.name] = hashlib.sha256(file.read_bytes()).hexdigest()
    return files


def sql(path: Path, *statements: str) -> None:
    """Run SQL on the store file directly (as a damaging tool or editor would)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def _overwrite(file: Path, offset: int, data: bytes) -> None:
    with open(file, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _noise(n: int, seed: int = 25) -> bytes:
    return random.Random(seed).randbytes(n)


def _frame_offset(number: int) -> int:
    return HEADER_SIZE + (number - 1) * (FRAME_HEADER_SIZE + PAGE)


def empty(path: Path) -> None:
    path.write_bytes(b"")


def garbage(path: Path) -> None:
    path.write_bytes(_noise(40_000))


def text(path: Path) -> None:
    path.write_text("apiVersion: v1\nkind: Node\n")


def truncated(path: Path) -> None:
    healthy(path)
    path.write_bytes(path.read_bytes()[: 3 * PAGE + 100])


def directory(path: Path) -> None:
    path.mkdir()


def foreign(path: Path) -> None:
    sql(path, "PRAGMA application_id=1234", "CREATE TABLE t (x)")


def no_tables(path: Path) -> None:
    sql(path, "PRAGMA user_version=0", "CREATE TABLE other (x)", "DROP TABLE other")


def other_schema(path: Path) -> None:
    sql(path, "CREATE TABLE objects (a, b)", "CREATE TABLE changes (c)")


def newer_schema(path: Path) -> None:
    healthy(path, nodes=1)
    sql(path, "PRAGMA user_version=99")


def bad_json_row(path: Path) -> None:
    healthy(path)
    sql(path, "UPDATE objects SET data=CAST('{\"kind\": 3' AS BLOB) WHERE name='node-03'")


def wrong_kind_row(path: Path) -> None:
    healthy(path)
    data = '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}'
    sql(path, f"UPDATE objects SET data=CAST('{data}' AS BLOB) WHERE name='node-04'")


def text_row(path: Path) -> None:
    healthy(path)
    sql(path, "UPDATE objects SET data='not json' WHERE name='node-05'")


def damaged_pages(path: Path) -> None:
    healthy(path, nodes=200)
    size = path.stat().st_size
    _overwrite(path, (size // PAGE // 2) * PAGE, _noise(3 * PAGE))


def page_two(path: Path) -> None:
    """Garbage over the second page: the root of a table, read by every command."""
    healthy(path)
    _overwrite(path, PAGE, _noise(PAGE))


def log_header(path: Path) -> None:
    healthy(path, in_log=True)
    _overwrite(log_path(path), 0, b"XXXX")


def log_garbage(path: Path) -> None:
    healthy(path, in_log=True)
    log_path(path).write_bytes(_noise(log_path(path).stat().st_size))


def log_frame(path: Path) -> None:
    healthy(path, in_log=True)
    _overwrite(log_path(path), _frame_offset(3) + 100, _noise(PAGE))


DAMAGES: dict[str, Callable[[Path], None]] = {
    "empty": empty,
    "garbage": garbage,
    "text": text,
    "truncated": truncated,
    "directory": directory,
    "foreign": foreign,
    "no-tables": no_tables,
    "other-schema": other_schema,
    "newer-schema": newer_schema,
    "bad-json-row": bad_json_row,
    "wrong-kind-row": wrong_kind_row,
    "text-row": text_row,
    "damaged-pages": damaged_pages,
    "page-two": page_two,
    "log-header": log_header,
    "log-garbage": log_garbage,
    "log-frame": log_frame,
}
LOGGED = ("log-header", "log-garbage", "log-frame")


def make(kind: str, path: Path) -> None:
    DAMAGES[kind](path)
