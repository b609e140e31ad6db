"""The README, run as a new user runs it: every `sh` block in order, from a fresh copy of
what a clone holds at its root (Makefile, pyproject.toml, examples/), on a fresh store; and
every `text` block right under a `sh` block compared with what that block printed.

In an expected output, a line `...` stands for any number of lines, and `...` inside a
line for any text. Commands this test cannot run are listed in NOT_RUN with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubedra.devcluster.binaries import binaries
from tests.conftest import REPO

NOT_RUN = {"make test": "this test is part of `make test`"}
# A block starting a dev cluster needs upstream's binaries: tests/e2e/test_readme_cluster.py
# runs those, in `make e2e`.
REAL_CLUSTER = "kubedra dev-cluster up"
# A block for the reader's own cluster (their kubeconfig, helm) or for a driver running on
# their node cannot run here; it is checked for shell syntax only (e2e tests run the same
# commands: tests/driver/test_health.py, tests/e2e/test_real_node.py).
YOUR_CLUSTER = ("~/.kube/config", "helm install", "kubedra driver fault")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, for messages
    script: str
    expected: str | None  # the `text` block right under it


def readme_blocks(text: str) -> list[Block]:
    fences = list(FENCE.finditer(text))
    out = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "sh":
            continue
        after = fences[i + 1] if i + 1 < len(fences) else None
        close = after is not None and after.group(1) == "text"
        close = close and not text[fence.end() : after.start()].strip()  # type: ignore[union-attr]
        out.append(Block(text.count("\n", 0, fence.start()) + 1, fence.group(2),
                         after.group(2) if close and after is not None else None))
    return out


def matches(expected: str, actual: str) -> bool:
    pattern = ""
    for line in expected.splitlines():
        if line.strip() == "...":
            pattern += r"(?:.*\n)*?"
        else:
            pattern += ".*?".join(map(re.escape, line.split("..."))) + r"\n"
    return re.fullmatch(pattern, actual) is not None


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A directory like a fresh clone's root, whose `.venv` is the one running the tests,
    and the environment of a new shell there: kubedra not on PATH (the README says how to
    put it there), a home of its own (the per-user store and config), no store or cluster
    of the caller's."""
    if not (Path(sys.prefix) / ".installed").exists() or shutil.which("make") is None:
        pytest.skip("needs make and the project's .venv (run it through `make test`)")
    root = tmp_path / "clone"
    root.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)
    for folder in ("examples", "deploy"):
        shutil.copytree(REPO / folder, root / folder)
    (root / ".venv").symlink_to(sys.prefix)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KUBEDRA_", "KUBECONFIG", "XDG_", "VIRTUAL_ENV"))}  # fmt: skip
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["HOME"] = str(tmp_path / "home")
    env["KUBEDRA_DEV_CLUSTER_DIR"] = str(tmp_path / "dev-cluster")
    env["KUBEDRA_CACHE"] = str(binaries().folder.parents[2])  # the built binaries, if any
    return root, env


def run_block(block: Block, root: Path, env: dict[str, str]) -> None:
    """One block in a shell of its own (the cluster blocks: each starts what it uses)."""
    run_session([block], root, env)


def run_session(blocks: list[Block], root: Path, env: dict[str, str]) -> None:
    """The blocks in order in one shell, as a reader types them into one terminal (what a
    block sets, like the PATH, holds for the next); each block's output compared with the
    `text` block under it."""
    script = []
    for i, block in enumerate(blocks):
        lines = [line for line in block.script.splitlines() if _command(line) not in NOT_RUN]
        script += [f"echo {_MARK}{i}; echo {_MARK}{i} >&2", *lines]
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(script)], cwd=root,
                         env=env, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    outputs = _split(run.stdout, len(blocks))
    errors = _split(run.stderr, len(blocks))
    reached = max(i for i, out in enumerate(outputs) if out is not None)
    where = f"README.md:{blocks[reached].line}"
    assert run.returncode == 0, f"{where}: exit {run.returncode}\n{errors[reached]}"
    for block, out, err in zip(blocks, outputs, errors, strict=True):
        assert "Traceback" not in (err or ""), f"README.md:{block.line}\n{err}"
        if block.expected is not None:
            assert matches(block.expected, out or ""), (
                f"README.md:{block.line}: the output shown is not what the block prints:\n{out}")


_MARK = "@@kubedra-readme-block-"


def _split(text: str, count: int) -> list[str | None]:
    """Each block's part of an output (None for a block the shell never reached)."""
    parts: list[str | None] = [None] * count
    current = None
    for line in text.splitlines(keepends=True):
        if line.startswith(_MARK):
            current = int(line[len(_MARK):])
            parts[current] = ""
        elif current is not None:
            parts[current] = (parts[current] or "") + line
    return parts


def _command(line: str) -> str:
    return line.split("#", 1)[0].strip()


def test_readme_blocks_run_in_order(clone: tuple[Path, dict[str, str]]) -> None:
    root, env = clone
    blocks = [b for b in readme_blocks((REPO / "README.md").read_text())
              if REAL_CLUSTER not in b.script and not _for_your_cluster(b)]
    assert len(blocks) >= 4 and sum(b.expected is not None for b in blocks) >= 3
    run_session(blocks, root, env)
    # make demo's store in the clone; the session's in the reader's home, nowhere else
    assert (root / ".kubedra" / "demo.db").exists()
    assert (Path(env["HOME"]) / ".local" / "share" / "kubedra" / "state.db").exists()
    assert not (root / ".kubedra" / "state.db").exists()


def _for_your_cluster(block: Block) -> bool:
    return any(marker in block.script for marker in YOUR_CLUSTER)


def test_readme_blocks_for_your_cluster_are_valid_shell() -> None:
    blocks = [b for b in readme_blocks((REPO / "README.md").read_text()) if _for_your_cluster(b)]
    assert blocks
    for block in blocks:
        run = subprocess.run(["bash", "-n", "-c", block.script], capture_output=True, text=True,
                             check=False)
        assert run.returncode == 0, f"README.md:{block.line}: {run.stderr}"


@pytest.mark.parametrize(("expected", "actual", "ok"), [
    ("a\nb\n", "a\nb\n", True),
    ("a\n...\nd\n", "a\nb\nc\nd\n", True),
    ("a\n...\nd\n", "a\nd\n", True),
    ("x: ... y\n", "x: anything here y\n", True),
    ("a\nb\n", "a\nb\nc\n", False),
    ("x: ... y\n", "x: z\n", False),
    ("lint shows 3\n", "lint shows 4\n", False),
])
def test_expected_output_matching(expected: str, actual: str, ok: bool) -> None:
    assert matches(expected, actual) is ok


def test_readme_needs_nothing_outside_the_repository() -> None:
    text = (REPO / "README.md").read_text()
    for doc in [text, *(p.read_text() for p in (REPO / "docs").glob("*.md"))]:
        assert "../shared" not in doc and "/work/" not in doc
    for link in re.findall(r"`((?:docs|examples|scripts)/[\w./-]+)`", text):
        assert (REPO / link).exists(), link
