"""The README's blocks that start a dev cluster, run as a reader runs them (each in a new
shell, from a fresh copy of the clone's root, outputs compared with the `text` under them):
upstream's control plane with kube-scheduler and the seed, kubedra's scheduler on a node pool
of its own, and the real node with kubedra's image and chart (root only)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kubedra.devcluster.binaries import Binaries
from tests.conftest import REPO
from tests.readme.test_readme import REAL_CLUSTER, Block, clone, readme_blocks, run_block

__all__ = ["clone"]  # the fixture, shared with tests/readme

BLOCKS = [b for b in readme_blocks((REPO / "README.md").read_text()) if REAL_CLUSTER in b.script]
# A reader comes to these blocks in the shell of "A first session", where the README had
# them put kubedra on PATH; each block here starts a new shell, so it begins that way too.
ACTIVATE = ". .venv/bin/activate"


def test_the_readme_has_its_cluster_blocks() -> None:
    assert len(BLOCKS) == 3
    first_session = next(b for b in readme_blocks((REPO / "README.md").read_text())
                         if ACTIVATE in b.script)  # what the reader's shell did
    assert first_session.line < min(b.line for b in BLOCKS)
    assert sum("--real-node" in b.script for b in BLOCKS) == 1


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_readme_cluster_block(
    block: Block, clone: tuple[Path, dict[str, str]], control_plane: Binaries
) -> None:
    if "--real-node" in block.script and os.geteuid() != 0:
        pytest.skip("a real node needs root")
    root, env = clone
    try:
        run_block(replace(block, script=f"{ACTIVATE}\n{block.script}"), root, env)
    finally:
        subprocess.run([sys.executable, "-m", "kubedra", "dev-cluster", "down"], env=env,
                       capture_output=True, timeout=300, check=False)  # fmt: skip
