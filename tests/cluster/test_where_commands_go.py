"""Where commands go, as kubectl's kubeconfig habit has it: one per-user default store, the
same from every folder; named contexts, one current; never a store made by a read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubedra.cluster.connect import Backend
from kubedra.cluster.userconfig import Context, config_path, default_store, load
from kubedra.errors import KubedraError


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment with a home of its own and nothing set by the caller."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KUBEDRA_", "KUBECONFIG", "XDG_"))}  # fmt: skip
    env["HOME"] = str(tmp_path / "home")
    return env


def kubedra(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "kubedra", *args], env=env, cwd=cwd,
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_the_default_store_is_the_users_from_every_folder(home: dict[str, str], tmp_path: Path) -> None:
    created = kubedra(home, tmp_path / "a", "cluster", "create", "--node-profile", "l4x4=1")
    assert created.returncode == 0, created.stderr
    listed = kubedra(home, tmp_path / "b" / "elsewhere", "get", "nodes", "-o", "name")
    assert listed.stdout == "node/l4x4-0\n"
    assert (Path(home["HOME"]) / ".local/share/kubedra/state.db").is_file()
    assert not any((tmp_path / d / ".kubedra").exists() for d in ("a", "b/elsewhere"))


def test_a_read_without_any_store_makes_none(home: dict[str, str], tmp_path: Path) -> None:
    run = kubedra(home, tmp_path, "get", "pods")
    assert run.returncode == 1 and "does not exist" in run.stderr
    assert not (Path(home["HOME"]) / ".local").exists()


def test_contexts_choose_the_store_and_say_why(home: dict[str, str], tmp_path: Path) -> None:
    lab = tmp_path / "lab.db"
    assert kubedra(home, tmp_path, "config", "set-context", "lab", "--store", str(lab)).returncode == 0
    assert kubedra(home, tmp_path, "config", "use-context", "lab").stdout == 'Switched to context "lab".\n'
    assert kubedra(home, tmp_path, "config", "current-context").stdout == "lab\n"
    assert kubedra(home, tmp_path, "cluster", "create", "--node-profile", "l4x4=1").returncode == 0
    assert lab.is_file()
    listed = kubedra(home, tmp_path, "config", "get-contexts").stdout.splitlines()
    assert listed[0].split() == ["CURRENT", "NAME", "WHERE"]
    assert any(line.split()[:2] == ["*", "lab"] for line in listed)
    assert listed[-1] == f"commands go to: embedded store {lab} (decided by context lab)"
    once = {**home, "KUBEDRA_STORE": str(tmp_path / "other.db")}
    assert kubedra(once, tmp_path, "config", "get-contexts").stdout.splitlines()[-1] == (
        f"commands go to: embedded store {tmp_path / 'other.db'} (decided by --store or KUBEDRA_STORE)")
    refused = kubedra(home, tmp_path, "config", "delete-context", "lab")
    assert refused.returncode == 1 and "is the current or the default one" in refused.stderr


def test_the_rule_first_match_wins(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
    assert Backend().target(env).store == str(default_store(env))  # nothing set
    assert Backend().target({**env, "KUBECONFIG": "/k"}).why == "KUBECONFIG"
    config = load(env).with_context(Context("lab", store="/lab.db"))
    type(config)("lab", config.contexts, config.path, True).save()
    assert Backend().target({**env, "KUBECONFIG": "/k"}).store == "/lab.db"  # context first
    assert Backend().target({**env, "KUBEDRA_CONTEXT": "default"}).store == str(default_store(env))
    assert Backend(store="/s.db").target(env).store == "/s.db"
    assert Backend(kubeconfig="/k").target(env).is_cluster
    with pytest.raises(KubedraError, match='no context "nope"'):
        Backend().target({**env, "KUBEDRA_CONTEXT": "nope"})


def test_a_broken_config_is_one_line_naming_the_file(home: dict[str, str], tmp_path: Path) -> None:
    path = config_path({**home, "XDG_CONFIG_HOME": ""})
    path.parent.mkdir(parents=True)
    path.write_text("contexts: [{store: /x.db}]\n")  # no name
    run = kubedra(home, tmp_path, "get", "pods")
    assert run.returncode == 1
    assert run.stderr == f"error: {path}: not a kubedra config (every context needs a name)\n"
