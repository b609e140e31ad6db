"""One policy for a damaged or missing store, the same for every command.

A damaged store is refused at open by every command in one line naming the file and
`kubedra store check|repair`, whatever part is damaged (before, `get` served a store with
garbage mid-file that `apply` refused, and `apply` a store with a bad row that `get`
refused). A missing store is made only by the commands that put a cluster's first objects
in it; every other command says it does not exist and leaves no file or folder behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubedra.cli.main import cli
from kubedra.cluster import SqliteStore
from kubedra.cluster.verify import stamp_path
from tests.cli.test_lint import kubedra
from tests.cluster.damage import DAMAGES, healthy, make, snapshot, sql
from tests.conftest import REPO

SEED = str(REPO / "examples" / "seed")
# Every command that opens the store, reading or writing (the dashboard is tried below).
COMMANDS = [
    ("get", "pods"), ("get", "nodes"), ("get", "rc", "-o", "yaml"), ("describe", "node", "node-00"),
    ("apply", "-f", SEED), ("apply", "-f", SEED, "--dry-run=server"), ("diff", "-f", SEED),
    ("delete", "node", "node-00"), ("schedule",), ("devices",), ("explain", "pod", "x"),
    ("cluster", "create", "--node-profile", "l4x4=1"),
]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("kind", sorted(set(DAMAGES) - {"directory", "foreign", "newer-schema"}))
def test_every_command_refuses_a_damaged_store_in_the_same_line(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make(kind, path)
    before = snapshot(path)
    lines = set()
    for command in COMMANDS:
        code, output = run("--store", str(path), *command)
        errors = [line for line in output.splitlines() if "warning:" not in line]  # the seed's lint
        assert code == (2 if command[0] == "diff" else 1) and len(errors) == 1, (command, output)
        assert errors[0].startswith(f"error: store {path} is damaged: "), (command, output)
        assert "store check" in errors[0] and "store repair" in errors[0]
        lines.add(errors[0])
    assert len(lines) == 1  # the same words from every command
    assert snapshot(path) == before


def test_the_dashboard_refuses_a_damaged_store_too(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make("page-two", path)
    ui = kubedra("--store", str(path), "ui", "--port", "0")
    assert ui.returncode == 1 and "Traceback" not in ui.stderr
    assert ui.stderr.startswith(f"error: store {path} is damaged: ") and ui.stderr.count("\n") == 1


def test_a_clean_check_is_remembered_until_anything_writes(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    healthy(path)
    SqliteStore(path).close()
    assert stamp_path(path).is_file()  # checked clean once: not checked again while unchanged
    sql(path, "UPDATE objects SET data=CAST('[' AS BLOB) WHERE name='node-01'")
    code, output = run("--store", str(path), "get", "pods")
    assert code == 1 and "a row of table objects is not a readable object (Node node-01)" in output
    stamp_path(path).unlink()
    code, _ = run("--store", str(path), "get", "pods")
    assert code == 1 and not stamp_path(path).exists()  # a damaged store is never stamped


READS = [("get", "pods"), ("describe", "node", "n"), ("schedule",), ("devices",),
         ("explain", "pod", "p"), ("delete", "pod", "p"), ("apply", "-f", SEED, "--dry-run=client"),
         ("apply", "-f", SEED, "--dry-run=server"), ("diff", "-f", SEED)]  # fmt: skip


@pytest.mark.parametrize("command", READS, ids=[" ".join(c[:2]) for c in READS])
def test_commands_that_do_not_make_stores_leave_none_behind(command: tuple[str, ...], tmp_path: Path) -> None:
    path = tmp_path / "typo" / "state.db"
    code, output = run("--store", str(path), *command)
    assert not (tmp_path / "typo").exists()
    if command[0] in ("apply", "diff"):  # a dry run previews against an empty cluster
        assert code in (0, 1) and ("created" in output or "+" in output), output
        return
    assert code == 1 and output == (
        f"error: store {path} does not exist: kubedra makes a store only on `kubedra --store "
        f"{path} cluster create`, `kubedra --store {path} apply` (and `demo`, `driver run`); "
        "check the path\n"
    )


def test_the_dashboard_on_a_mistyped_path_makes_nothing(tmp_path: Path) -> None:
    ui = kubedra("--store", str(tmp_path / "typo" / "state.db"), "ui", "--port", "0")
    assert ui.returncode == 1 and "does not exist" in ui.stderr
    assert not (tmp_path / "typo").exists()


def test_apply_and_cluster_create_make_the_store(tmp_path: Path) -> None:
    for i, command in enumerate([("apply", "-f", SEED), ("cluster", "create", "--node-profile", "l4x4=1")]):
        path = tmp_path / str(i) / "state.db"
        code, output = run("--store", str(path), *command)
        assert code == 0, output
        assert path.is_file()


def test_a_store_whose_folder_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    code, output = run("--store", str(tmp_path / "file" / "state.db"), "cluster", "create", "--node-profile", "l4x4=1")
    assert (code, output) == (
        1, f"error: store {tmp_path}/file/state.db cannot be created: {tmp_path}/file is a file, not a folder\n")


def test_restore_from_a_folder_says_so(tmp_path: Path) -> None:
    code, output = run("--store", str(tmp_path / "state.db"), "store", "restore", str(tmp_path))
    assert code == 1 and f"backup {tmp_path} is a folder: name the backup file itself" in output


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a full disk is a small tmpfs mounted in a private mount namespace (root)")
def test_a_full_disk_is_named_as_such(tmp_path: Path) -> None:
    """SQLite reports a full disk as "disk I/O error" when the log's shared memory cannot be
    made; the message says the disk is full, and the store keeps what it had."""
    script = f"""
set -e
mount -t tmpfs -o size=400k tmpfs {tmp_path}
cd {tmp_path}
{sys.executable} -m kubedra --store s.db cluster create --node-profile l4x4=1 >/dev/null
head -c 1000000 /dev/zero > fill 2>/dev/null || true
{sys.executable} -m kubedra --store s.db get nodes || true
{sys.executable} -m kubedra --store s.db apply -f {SEED} || true
rm fill
{sys.executable} -m kubedra --store s.db get nodes -o name
"""
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    full = "error: store s.db: the disk holding it is full"
    assert done.stderr.count(full) == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.splitlines()[-1] == "node/l4x4-0"
