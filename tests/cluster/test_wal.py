"""Reading SQLite's write-ahead log: a writer killed between its commit frame and SQLite's
index update is an interrupted write, not damage (found as a rare failure of the kill test:
the store then refused to open after an ordinary kill -9)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kubedra.cluster import wal

INDEX_HEAD = 136  # the wal-index's two header copies and its checkpoint information


def test_a_commit_the_index_never_recorded_is_not_damage(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    keeper = sqlite3.connect(path, isolation_level=None)  # keeps the log and index alive
    keeper.execute("PRAGMA journal_mode=WAL")
    keeper.execute("PRAGMA wal_autocheckpoint=0")
    keeper.execute("CREATE TABLE t (x BLOB)")
    for i in range(20):
        keeper.execute("INSERT INTO t VALUES (?)", (bytes([i]) * 3000,))
    before = wal.index_path(path).read_bytes()[:INDEX_HEAD]
    frames_before = wal.log_path(path).stat().st_size
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("INSERT INTO t VALUES (?)", (b"z" * 3000,))  # commits: log, then index
    writer.close()
    assert wal.log_path(path).stat().st_size > frames_before
    assert wal.quick_problem(path) is None
    # The writer as if killed after its commit frame, before the index update.
    with open(wal.index_path(path), "r+b") as index:
        index.write(before)
    assert wal.quick_problem(path) is None
    report = wal.full_report(wal.log_path(path))
    assert not isinstance(report, str) and report.lost == 0
    keeper.close()


def test_a_damaged_frame_before_later_commits_is_still_found(tmp_path: Path) -> None:
    """The same log with a frame overwritten in the middle: commits after it are cut off."""
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE t (x BLOB)")
    for i in range(20):
        db.execute("INSERT INTO t VALUES (?)", (bytes([i]) * 3000,))
    log = wal.log_path(path).read_bytes()
    db.close()  # would checkpoint and delete the log: put the copy back, then damage it
    damaged = bytearray(log)
    step = wal.FRAME_HEADER_SIZE + wal.read_header(log).page_size  # type: ignore[union-attr]
    at = wal.HEADER_SIZE + 3 * step + wal.FRAME_HEADER_SIZE + 100
    damaged[at : at + 50] = b"\xff" * 50
    wal.log_path(path).write_bytes(bytes(damaged))
    report = wal.full_report(wal.log_path(path))
    assert not isinstance(report, str)
    assert report.first_bad == 4 and report.lost > 0
