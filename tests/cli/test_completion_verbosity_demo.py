"""Shell completion of kinds, names and profiles; what -v/-vv show; the demo's own store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_lint import kubedra
from tests.conftest import REPO


def complete(words: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> list[str]:
    """What bash completion offers after `kubedra WORDS` (a trailing space: a new word)."""
    typed = ["kubedra", *words.split()]
    cword = len(typed) if words.endswith(" ") or not words else len(typed) - 1
    environ = {**os.environ, **(env or {}), "_KUBEDRA_COMPLETE": "bash_complete",
               "COMP_WORDS": " ".join(typed) + (" " if words.endswith(" ") else ""),
               "COMP_CWORD": str(cword)}
    run = subprocess.run([sys.executable, "-m", "kubedra"], env=environ, cwd=cwd,
                         capture_output=True, text=True, timeout=60, check=True)
    return [line.split(",", 1)[1] for line in run.stdout.splitlines() if "," in line]


@pytest.fixture
def store(tmp_path: Path, seed_dir: Path) -> str:
    path = str(tmp_path / "s.db")
    kubedra("--store", path, "cluster", "create", "--node-profile", "l4x4=2")
    kubedra("--store", path, "apply", "-f", str(seed_dir))
    return path


def test_completes_kinds_object_names_nodes_and_profiles(store: str) -> None:
    env = {"KUBEDRA_STORE": store}
    assert complete("get rc", env) == ["rc", "rct"]
    assert {"pods", "po", "resourceclaims", "dc", "ns"} <= set(complete("get ", env))
    assert complete("get pods ", env) == ["vllm-inference"]
    assert complete("describe rc v", env) == ["vllm-gpu-claim"]
    assert complete("explain claim ", env) == ["vllm-gpu-claim"]
    assert complete("get no l4x4-", env) == ["l4x4-0", "l4x4-1"]
    assert complete("delete dc ", env) == ["high-memory-gpu"]
    assert complete("get po -n other ", env) == []
    assert complete("devices --node ", env) == ["l4x4-0", "l4x4-1"]
    assert complete("cluster create --node-profile h", env) == ["h100x8=", "h200x8=", "h100x8-mig="]
    assert complete("schedule --policy f", env) == ["first-fit", "fragmentation", "fragmentation-lookahead", "fragmentation-pack",
                                                    "fragmentation-priced"]
    assert complete(f"--store {store} get dc ") == ["high-memory-gpu"]


def test_completion_never_creates_a_store_nor_fails(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert complete("get pods ", {"KUBEDRA_STORE": str(missing)}) == []
    assert not missing.exists()
    (tmp_path / "junk.db").write_bytes(b"not a store")
    assert complete("get pods ", {"KUBEDRA_STORE": str(tmp_path / "junk.db")}) == []
    assert complete("get widgets ", {"KUBEDRA_STORE": str(tmp_path / "junk.db")}) == []


def test_verbosity_is_visible_on_stderr_and_leaves_stdout_alone(store: str, seed_dir: Path) -> None:
    plain = kubedra("--store", store, "get", "rc")
    once = kubedra("-v", "--store", store, "get", "rc")
    twice = kubedra("-vv", "--store", store, "get", "rc")
    assert plain.stdout.split()[:2] == once.stdout.split()[:2] == twice.stdout.split()[:2]
    assert plain.stderr == ""
    assert f"INFO kubedra: working on embedded store {store}" in once.stderr.splitlines()
    assert "INFO kubedra: get done in " in once.stderr and "DEBUG" not in once.stderr
    assert "DEBUG kubedra: store list ResourceClaim in default: 1 object(s) in " in twice.stderr
    for args in (["lint", str(seed_dir)], ["convert", "-f", str(seed_dir)], ["cluster", "profiles"]):
        run = kubedra("-v", *args)
        assert run.returncode == 0 and f"INFO kubedra: {args[0]} done in " in run.stderr


def test_demo_uses_its_own_store_and_the_readme_sequence_still_works(tmp_path: Path) -> None:
    demo = subprocess.run([sys.executable, "-m", "kubedra", "demo"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert demo.returncode == 0, demo.stderr
    assert (tmp_path / ".kubedra" / "demo.db").exists()
    assert not (tmp_path / ".kubedra" / "state.db").exists()
    assert demo.stdout.splitlines()[-1].startswith("next: kubedra --store .kubedra/demo.db explain pod")
    created = subprocess.run(
        [sys.executable, "-m", "kubedra", "cluster", "create", "--node-profile", "h100x8=1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert created.returncode == 0, created.stderr


def test_demo_asks_before_replacing_a_store_it_was_given(store: str, tmp_path: Path) -> None:
    refused = kubedra("--store", store, "demo")  # stdin is no terminal: it cannot ask
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr == (f"error: {store} holds 7 object(s); the demo replaces the whole "
                              "store: pass --yes to agree, or give another --store\n")
    assert kubedra("--store", store, "get", "no", "l4x4-1").returncode == 0  # left as it was
    agreed = kubedra("--store", store, "demo", "--yes")
    assert agreed.returncode == 0 and agreed.stdout.startswith("cluster: 6 nodes (") and store in agreed.stdout
    fresh = kubedra("--store", str(tmp_path / "new.db"), "demo")
    assert fresh.returncode == 0, fresh.stderr


def test_makefile_demo_runs_the_demo_command() -> None:
    """The README test runs `make demo` as this command; keep the two the same."""
    makefile = (REPO / "Makefile").read_text()
    assert "demo: $(STAMP)\n\t$(BIN)/kubedra demo\n" in makefile
