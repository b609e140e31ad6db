"""`kubedra store check | repair | backup | restore` on real damaged files.

Repair's promise: the damaged file is kept, byte for byte; everything readable comes back at
its newest readable version; whatever is lost or older is named; and the result is a store
that opens and checks clean.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from kubedra.api.core import Node
from kubedra.api.meta import ObjectMeta
from kubedra.cluster import SqliteStore, repair
from kubedra.cluster.sqlite import SYSTEM_NAMESPACES
from kubedra.errors import StoreError
from tests.cli.test_lint import kubedra
from tests.cluster.damage import DAMAGES, NODES, healthy, make, snapshot

REPAIRABLE = sorted(set(DAMAGES) - {"directory", "foreign", "newer-schema"})


def names(path: Path) -> list[str]:
    store = SqliteStore(path)
    try:
        return [n.name for n in store.list(Node)]
    finally:
        store.close()


@pytest.mark.parametrize("kind", REPAIRABLE)
def test_check_finds_the_fault_and_repair_leaves_a_clean_store(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make(kind, path)
    before = snapshot(path)
    assert repair.check(path).problems
    report = repair.repair(path)
    assert report is not None
    assert snapshot(report.aside) == {k.replace("state.db", report.aside.name): v for k, v in before.items()}
    assert repair.check(path).problems == []
    names(path)  # opens and reads


@pytest.mark.parametrize("kind", ["log-header", "log-frame", "bad-json-row", "wrong-kind-row", "text-row"])
def test_repair_recovers_every_object_it_can_read(kind: str, tmp_path: Path) -> None:
    """A damaged log is read past its damage; a damaged row comes back from the change log."""
    path = tmp_path / "state.db"
    make(kind, path)
    report = repair.repair(path)
    assert report is not None and report.lost == [] and report.older == []
    assert names(path) == [f"node-{i:02d}" for i in range(NODES)]
    store = SqliteStore(path)
    assert store.resource_version() >= max(int(n.metadata.resource_version or 0) for n in store.list(Node))
    store.create(Node(metadata=ObjectMeta(name="after-repair")))


def test_repair_names_what_it_lost_or_brought_back_older(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    healthy(path)
    store = SqliteStore(path)
    node = store.get(Node, "node-01")
    labelled = msgspec.structs.replace(node.metadata, labels={"changed": "yes"})
    store.update(msgspec.structs.replace(node, metadata=labelled))  # a second version, logged
    store.close()
    db = sqlite3.connect(path)
    newest = db.execute("SELECT max(rv) FROM changes").fetchone()[0]
    db.execute("UPDATE objects SET data=CAST('x' AS BLOB) WHERE name IN ('node-01', 'node-02')")
    db.execute("DELETE FROM changes WHERE rv=? OR CAST(data AS TEXT) LIKE '%\"node-02\"%'", (newest,))
    db.commit()
    db.close()
    report = repair.repair(path)
    assert report is not None
    assert report.lost == ["Node node-02 (its row does not decode; no readable version logged)"]
    first = len(SYSTEM_NAMESPACES)  # a new store begins with the system namespaces
    assert report.older == [f"Node node-01 (back at resourceVersion {first + 2}, was {newest})"]
    assert [f"{a}-{b}" if a != b else str(a) for a, b in report.missing_changes] == [str(first + 3), str(newest)]
    assert "node-02" not in names(path) and "node-01" in names(path)


def test_a_healthy_store_is_not_rebuilt_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    healthy(path)
    before = snapshot(path)
    assert repair.repair(path) is None
    assert snapshot(path) == before
    forced = repair.repair(path, force=True)
    assert forced is not None and forced.objects["Node"] == NODES and forced.lines()[-1] == "lost: nothing that kubedra can tell"


def test_repair_refuses_a_store_in_use_a_directory_another_programs_database_and_a_newer_one(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make("bad-json-row", path)
    # A process that opened the store before it was damaged (kubedra refuses to open it now).
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sqlite3, sys, time
        sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM objects").fetchone()
        print("open", flush=True)
        time.sleep(60)
    """), str(path)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"open\n"
        with pytest.raises(StoreError, match="is open in another process"):
            repair.repair(path)
    finally:
        holder.kill()
        holder.wait()
    assert repair.repair(path) is not None  # once it is closed
    make("directory", tmp_path / "dir.db")
    with pytest.raises(StoreError, match="is a directory"):
        repair.repair(tmp_path / "dir.db")
    make("foreign", tmp_path / "other.db")
    with pytest.raises(StoreError, match="another program"):
        repair.repair(tmp_path / "other.db")
    make("newer-schema", tmp_path / "newer.db")
    before = snapshot(tmp_path / "newer.db")
    with pytest.raises(StoreError, match="schema version 99, newer than this kubedra's 1"):
        repair.repair(tmp_path / "newer.db")
    assert snapshot(tmp_path / "newer.db") == before


def test_backup_is_consistent_while_a_writer_goes_on_and_restore_installs_it(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    healthy(path)
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, itertools
        from kubedra.api.core import Node
        from kubedra.api.meta import ObjectMeta
        from kubedra.cluster import SqliteStore
        store = SqliteStore(sys.argv[1])
        for i in itertools.count():
            store.create(Node(metadata=ObjectMeta(name=f"w{i:06d}")))
    """), str(path)])
    try:
        time.sleep(1.5)
        report = repair.backup(path, tmp_path / "backup.db")
    finally:
        writer.kill()
        writer.wait()
    assert report.problems == [] and report.objects > NODES
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("backup")) == ["backup.db"]
    with pytest.raises(StoreError, match="exists already"):
        repair.backup(path, tmp_path / "backup.db")
    backed_up = names(tmp_path / "backup.db")
    assert backed_up[:NODES] == [f"node-{i:02d}" for i in range(NODES)]
    written = [n for n in backed_up if n.startswith("w")]
    assert written == [f"w{i:06d}" for i in range(len(written))]  # a prefix of the writes: consistent
    aside = repair.restore(tmp_path / "backup.db", path)
    assert aside is not None and aside.exists()
    assert names(path) == backed_up


def test_a_damaged_store_is_not_backed_up(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make("damaged-pages", path)
    with pytest.raises(StoreError, match=r"fails its check .*: repair it first"):
        repair.backup(path, tmp_path / "backup.db")
    assert not (tmp_path / "backup.db").exists()
    shutil.copy(path, tmp_path / "bad-backup.db")
    with pytest.raises(StoreError, match="fails its check"):
        repair.restore(tmp_path / "bad-backup.db", tmp_path / "other.db")


def test_the_store_commands_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make("log-frame", path)
    check = kubedra("--store", str(path), "store", "check")
    assert check.returncode == 1 and "problem: write-ahead log" in check.stdout
    fixed = kubedra("--store", str(path), "store", "repair")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[0] == f"store {path} repaired"
    assert "  recovered: 24 object(s) (4 Namespace, 20 Node), 24 change-log row(s)" in fixed.stdout.splitlines()
    again = kubedra("--store", str(path), "store", "check")
    assert again.returncode == 0 and again.stdout.endswith("no faults found\n")
    assert kubedra("--store", str(path), "store", "backup", str(tmp_path / "b.db")).returncode == 0
    restored = kubedra("--store", str(tmp_path / "new.db"), "store", "restore", str(tmp_path / "b.db"))
    assert restored.returncode == 0 and restored.stdout == f"store {tmp_path / 'new.db'} restored from {tmp_path / 'b.db'}\n"


BUSY_WRITER = textwrap.dedent("""
    import sys, itertools
    from kubedra.api.core import Node
    from kubedra.api.meta import ObjectMeta
    from kubedra.cluster import SqliteStore
    store = SqliteStore(sys.argv[1])
    store._db.execute("PRAGMA wal_autocheckpoint=20")  # the log restarts often
    for i in itertools.count():
        store.create(Node(metadata=ObjectMeta(name=f"w{i:06d}", labels={"pad": "x" * 3000})))
""")


def test_check_of_a_live_store_finds_nothing(tmp_path: Path) -> None:
    """Regression: check read the log frame by frame while a writer restarted it, and took
    the mix of old and new frames for damage (seen when backing up a busy store)."""
    path = tmp_path / "state.db"
    healthy(path)
    writer = subprocess.Popen([sys.executable, "-c", BUSY_WRITER, str(path)])
    try:
        time.sleep(1.0)
        deadline, checks = time.monotonic() + 5, 0
        while time.monotonic() < deadline:
            assert repair.check(path).problems == []
            checks += 1
    finally:
        writer.kill()
        writer.wait()
    assert checks > 3 and len(names(path)) > NODES + 100
