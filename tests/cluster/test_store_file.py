"""The store's file: created whole, never reinitialised, every damaged one named in one line.

The guard for the class: each kind of damage in `damage.DAMAGES` is refused by opening or
reading the store, by the CLI (exit 1, one `error:` line naming the file, no traceback), and
leaves the file and its log exactly as they were.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from kubedra.api.core import Node
from kubedra.cluster import SqliteStore, storefile
from kubedra.cluster.wal import log_path
from kubedra.errors import DamagedStore, StoreError
from tests.cli.test_lint import kubedra
from tests.cluster.damage import DAMAGES, LOGGED, NODES, healthy, make, node, snapshot, sql


def use(path: Path) -> None:
    """What a command does: open the store, list a kind, read one object."""
    store = SqliteStore(path)
    try:
        store.list(Node)
        store.get(Node, "node-00")
    finally:
        store.close()


@pytest.mark.parametrize("kind", sorted(DAMAGES))
def test_every_damaged_store_is_refused_in_one_line_naming_the_file(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make(kind, path)
    before = snapshot(path)
    with pytest.raises(StoreError) as refused:
        use(path)
    message = str(refused.value)
    assert message.startswith(f"store {path}") and "\n" not in message
    assert snapshot(path) == before  # never reinitialised, never checkpointed over
    with pytest.raises(StoreError):
        use(path)  # and it stays refused: the evidence is still there


@pytest.mark.parametrize("kind", sorted(DAMAGES))
def test_the_cli_prints_one_error_line_and_exits_1(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make(kind, path)
    before = snapshot(path)
    run = kubedra("--store", str(path), "get", "nodes")
    assert run.returncode == 1, run.stdout
    assert run.stderr.startswith(f"error: store {path}") and run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert snapshot(path) == before


@pytest.mark.parametrize("kind", sorted(set(DAMAGES) - {"directory", "foreign", "newer-schema"}))
def test_damage_messages_point_at_repair(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make(kind, path)
    with pytest.raises(DamagedStore, match=f"kubedra --store {path} store repair"):
        use(path)


def test_messages_say_what_is_wrong(tmp_path: Path) -> None:
    expected = {
        "empty": "the file is empty (0 bytes)",
        "garbage": "not an SQLite database",
        "truncated": "truncated to 12388 bytes; its header says",
        "directory": "is a directory, not a store file",
        "foreign": "an SQLite database of another program (application_id 0x4d2)",
        "no-tables": "an SQLite database without kubedra's tables",
        "other-schema": "table objects is a, b, not (kind, namespace, name, uid, rv,",
        "newer-schema": "has schema version 99; this kubedra knows up to 1",
        "log-header": "write-ahead log",
        "log-frame": "committed transaction(s) in it would be silently dropped",
    }
    for kind, words in expected.items():
        path = tmp_path / kind / "state.db"
        path.parent.mkdir()
        make(kind, path)
        with pytest.raises(StoreError) as refused:
            use(path)
        assert words in str(refused.value), (kind, str(refused.value))


def test_a_row_damaged_under_a_running_process_is_named_and_the_others_still_read(tmp_path: Path) -> None:
    """Opening refuses a damaged store; a process that opened it before (a scheduler, the
    dashboard) names the damaged row where it reads it and goes on with the rest."""
    path = tmp_path / "state.db"
    healthy(path)
    store = SqliteStore(path)
    sql(path, "UPDATE objects SET data=CAST('{\"kind\": 3' AS BLOB) WHERE name='node-03'")
    with pytest.raises(DamagedStore, match="cannot read 1 stored object: Node node-03: Input data was truncated"):
        store.list(Node)
    with pytest.raises(DamagedStore, match="Node node-03"):
        store.get(Node, "node-03")
    with pytest.raises(DamagedStore, match="Node node-03"):
        store.delete(Node, "node-03")
    assert store.get(Node, "node-02").name == "node-02"
    node = store.get(Node, "node-02")
    labelled = msgspec.structs.replace(node.metadata, labels={"changed": "yes"})
    store.update(msgspec.structs.replace(node, metadata=labelled))  # other objects' writes go on
    assert len(store.changes(0, [Node])) == NODES + 1  # the change log is intact


def test_every_damaged_row_of_a_list_is_named(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    healthy(path)
    store = SqliteStore(path)
    sql(path, "UPDATE objects SET data=CAST('[' AS BLOB) WHERE name IN ('node-01', 'node-07')")
    with pytest.raises(DamagedStore, match=r"cannot read 2 stored objects: Node node-01: .*; Node node-07: "):
        store.list(Node)


def test_a_damaged_change_log_row_is_named(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    healthy(path)
    store = SqliteStore(path)
    sql(path, "UPDATE changes SET data=CAST('{' AS BLOB) WHERE rv=5")
    with pytest.raises(DamagedStore, match=r"change-log row: change 5 \(Node ADDED\)"):
        store.changes(0)


def test_a_missing_store_is_created_complete_and_an_empty_file_is_not(tmp_path: Path) -> None:
    path = tmp_path / "new" / "state.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == storefile.APPLICATION_ID
    assert db.execute("PRAGMA user_version").fetchone()[0] == storefile.SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    # no scratch left; the stamp of its clean check beside it
    assert sorted(p.name for p in path.parent.iterdir()) == [".state.db.verified", "state.db"]
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(DamagedStore, match="empty"):
        SqliteStore(empty)
    assert empty.stat().st_size == 0


def test_a_store_made_before_the_owner_index_gets_it_on_open_and_keeps_its_data(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    healthy(path)
    before = [n.metadata.name for n in SqliteStore(path).list(Node)]
    sql(path, "DROP INDEX owners_object")  # as stores made before the index was added
    plan = "EXPLAIN QUERY PLAN DELETE FROM owners WHERE kind='Pod' AND namespace='a' AND name='b'"
    store = SqliteStore(path)
    store.close()
    db = sqlite3.connect(path)
    uses = " ".join(str(row[-1]) for row in db.execute(plan))
    db.close()
    assert "USING INDEX owners_object" in uses  # removing an object's owner rows: no scan
    assert [n.metadata.name for n in SqliteStore(path).list(Node)] == before != []


CREATE = textwrap.dedent("""
    import sys, time
    from kubedra.api.core import Node
    from kubedra.api.meta import ObjectMeta
    from kubedra.cluster import SqliteStore
    time.sleep(float(sys.argv[2]) - time.time())
    store = SqliteStore(sys.argv[1])
    store.create(Node(metadata=ObjectMeta(name=sys.argv[3])))
""")


def test_processes_creating_one_new_store_at_once_all_use_the_same_store(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    start = time.time() + 3  # all of them open at this instant
    procs = [subprocess.Popen([sys.executable, "-c", CREATE, str(path), str(start), f"n{i}"],
                              stderr=subprocess.PIPE) for i in range(6)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    assert sorted(n.name for n in SqliteStore(path).list(Node)) == [f"n{i}" for i in range(6)]


def test_a_store_made_before_the_identity_marker_still_opens(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(storefile.SCHEMA)  # an older kubedra: the tables, application_id 0
    db.close()
    store = SqliteStore(path)
    store.create(node(1))
    assert [n.name for n in store.list(Node)] == ["node-01"]


def test_opening_and_reading_never_wait_for_a_writer(tmp_path: Path) -> None:
    """Opening used to create the schema in a write transaction, so a read-only command
    queued behind every writer. Now a writer holding the lock does not delay a reader."""
    path = tmp_path / "state.db"
    healthy(path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE objects SET rv=rv WHERE name='node-00'")
    try:
        start = time.monotonic()
        store = SqliteStore(path)
        assert len(store.list(Node)) == NODES
        store.get(Node, "node-01")
        store.close()
        assert time.monotonic() - start < 5  # the busy timeout is 60 s
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize("kind", LOGGED)
def test_a_damaged_log_survives_the_refusing_process(kind: str, tmp_path: Path) -> None:
    """Closing the last connection makes SQLite checkpoint and delete the log: a refusal
    must not do that, or the next command would find a healthy-looking, shorter store."""
    path = tmp_path / "state.db"
    make(kind, path)
    size = log_path(path).stat().st_size
    for _ in range(2):
        assert kubedra("--store", str(path), "get", "nodes").returncode == 1
    assert log_path(path).stat().st_size == size


def test_a_log_written_to_by_live_writers_is_never_taken_for_damage(tmp_path: Path) -> None:
    """The quick log check compares the log with SQLite's index of it; a commit in flight
    must not look like damage to a process opening the store meanwhile."""
    path = tmp_path / "state.db"
    healthy(path, nodes=1)
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, itertools
        from kubedra.api.core import Node
        from kubedra.api.meta import ObjectMeta
        from kubedra.cluster import SqliteStore
        store = SqliteStore(sys.argv[1])
        for i in itertools.count():
            store.create(Node(metadata=ObjectMeta(name=f"w{i}", labels={"pad": "x" * 2000})))
    """), str(path)])
    try:
        deadline = time.monotonic() + 5
        opened = 0
        while time.monotonic() < deadline:
            use(path)  # raises DamagedStore on a false alarm
            opened += 1
        assert opened > 10
    finally:
        writer.kill()
        writer.wait()
    written = len(SqliteStore(path).list(Node)) - 1
    assert written > 100, "the writer wrote too little for the test to mean anything"
