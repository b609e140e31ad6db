"""kill -9 of `kubedra apply` inside its transaction: all of its objects or none, always.

Each round applies a fresh set of Nodes. The test waits until apply holds the store's write
lock (it is then inside its transaction: taking the lock without waiting fails), kills it
after a random delay, and checks: the round's objects are all there or none, the earlier
rounds' objects are untouched, the store opens and checks clean.

`make test` runs a few kills; KUBEDRA_APPLY_KILLS=N runs N.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kubedra.api.core import Node
from kubedra.cluster import SqliteStore, repair

KILLS = int(os.environ.get("KUBEDRA_APPLY_KILLS", "4"))
OBJECTS = 1500


def manifests(path: Path, round_: int) -> Path:
    docs = [{"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": f"r{round_}-n{i:04d}", "labels": {"round": str(round_)}}}
            for i in range(OBJECTS)]
    file = path / f"round-{round_}.yaml"
    file.write_text(yaml.safe_dump_all(docs))
    return file


def locked(probe: sqlite3.Connection) -> bool:
    """Whether another connection holds the write lock (so is inside a write transaction)."""
    try:
        probe.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return True
    probe.execute("ROLLBACK")
    return False


def kill_inside_transaction(store: Path, file: Path, rng: random.Random) -> bool:
    """Run apply, kill it once it holds the write lock; False if it finished first."""
    proc = subprocess.Popen([sys.executable, "-m", "kubedra", "--store", str(store), "apply", "-f", str(file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    probe = sqlite3.connect(store, timeout=0, isolation_level=None)
    try:
        while proc.poll() is None:
            if locked(probe):
                time.sleep(rng.uniform(0, 0.05))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.002)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        return False
    finally:
        probe.close()
        if proc.stderr:
            proc.stderr.close()


@dataclass
class ApplyKills:
    rounds: int = 0
    rolled_back: int = 0  # killed inside the transaction: nothing of the round stored
    committed: int = 0  # killed after the commit, or finished: all of it stored
    violations: list[str] = field(default_factory=list)


def run_apply_kills(workdir: Path, rounds: int, seed: int = 25) -> ApplyKills:
    store_path = workdir / "state.db"
    SqliteStore(store_path).close()
    rng = random.Random(seed)
    expected: dict[str, int] = {}
    report = ApplyKills()
    for round_ in range(rounds):
        kill_inside_transaction(store_path, manifests(workdir, round_), rng)
        store = SqliteStore(store_path)
        counts = {r: len(store.list(Node, label_selector=f"round={r}")) for r in [*expected, str(round_)]}
        store.close()
        got = counts[str(round_)]
        if got not in (0, OBJECTS):
            report.violations.append(f"round {round_}: {got} of {OBJECTS} objects stored")
        if {r: counts[r] for r in expected} != expected:
            report.violations.append(f"round {round_}: earlier rounds changed")
        expected[str(round_)] = got
        report.rounds += 1
        report.rolled_back += got == 0
        report.committed += got == OBJECTS
    report.violations += [f"store check: {p}" for p in repair.check(store_path).problems]
    return report


def test_apply_killed_inside_its_transaction_is_all_or_nothing(tmp_path: Path) -> None:
    report = run_apply_kills(tmp_path, KILLS)
    assert report.violations == []
    assert report.rolled_back >= 1  # kills did land inside transactions


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="kd-apply-kill-") as workdir:
        found = run_apply_kills(Path(workdir), int(sys.argv[1]) if len(sys.argv) > 1 else 100)
        print(f"apply kills: {found.rounds}, rolled back whole: {found.rolled_back}, "
              f"committed whole: {found.committed}, violations: {len(found.violations)}")
        for violation in found.violations:
            print("VIOLATION", violation)
