"""kubectl's habits: `get -o` Lists, `apply` of nothing, `--dry-run`, `diff -f`, `delete -f`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.conftest import GPU_CLASS
from tests.cli.test_lint import kubedra


def _parsed(text: str, fmt: str) -> Any:
    return json.loads(text) if fmt == "json" else yaml.safe_load(text)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_get_without_a_name_is_always_a_list(cluster: tuple[str, Path], fmt: str) -> None:
    store, _ = cluster
    for kind, names in (("dtr", []), ("dc", ["high-memory-gpu"]), ("no", ["big", "small"])):
        run = kubedra("--store", store, "get", kind, "-o", fmt)
        assert run.returncode == 0, run.stderr
        listed = _parsed(run.stdout, fmt)
        assert {k: v for k, v in listed.items() if k != "items"} == {
            "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}}
        assert [item["metadata"]["name"] for item in listed["items"]] == names


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_get_with_a_name_is_the_object(cluster: tuple[str, Path], fmt: str) -> None:
    store, _ = cluster
    obj = _parsed(kubedra("--store", store, "get", "no", "big", "-o", fmt).stdout, fmt)
    assert (obj["kind"], obj["metadata"]["name"]) == ("Node", "big")


def test_get_leaves_managed_fields_out_unless_asked(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {}}}]  # fmt: skip
    doc = dict(GPU_CLASS, metadata={"name": "gpu", "managedFields": managed})
    (tmp_path / "dc.yaml").write_text(yaml.safe_dump(doc))
    assert kubedra("--store", store, "apply", "-f", str(tmp_path / "dc.yaml")).returncode == 0
    for args in (["dc", "gpu"], ["dc"]):
        plain = json.loads(kubedra("--store", store, "get", *args, "-o", "json").stdout)
        shown = json.loads(kubedra("--store", store, "get", *args, "-o", "json",
                                   "--show-managed-fields").stdout)
        one, kept = (plain, shown) if len(args) == 2 else (plain["items"][0], shown["items"][0])
        assert "managedFields" not in one["metadata"]
        assert kept["metadata"]["managedFields"][0]["manager"] == "kubectl"


@pytest.mark.parametrize("text", ["", "\n", "---\n# nothing\n---\n"])
def test_apply_of_no_objects_fails_as_kubectl(tmp_path: Path, text: str) -> None:
    (tmp_path / "empty.yaml").write_text(text)
    (tmp_path / "dir").mkdir()
    for path in (tmp_path / "empty.yaml", tmp_path / "dir"):
        run = kubedra("--store", str(tmp_path / "s.db"), "apply", "-f", str(path))
        assert (run.returncode, run.stdout) == (1, "")
        assert run.stderr == f"error: no objects passed to apply (in {path})\n"


def _class_file(tmp: Path, tier: str) -> Path:
    path = tmp / "dc.yaml"
    path.write_text(yaml.safe_dump(dict(GPU_CLASS, metadata={"name": "gpu", "labels": {"tier": tier}})))
    return path


def _stored(store: str, kind: str, name: str) -> dict[str, Any] | None:
    run = kubedra("--store", store, "get", kind, name, "-o", "json")
    return json.loads(run.stdout) if run.returncode == 0 else None


@pytest.mark.parametrize(("mode", "suffix"), [("client", "(dry run)"), ("server", "(server dry run)")])
def test_dry_run_reports_what_apply_would_do_and_writes_nothing(
        cluster: tuple[str, Path], mode: str, suffix: str) -> None:
    store, tmp = cluster
    path = _class_file(tmp, "a")
    run = kubedra("--store", store, "apply", "-f", str(path), f"--dry-run={mode}")
    assert run.stdout == f"deviceclass.resource.k8s.io/gpu created {suffix}\n"
    assert _stored(store, "dc", "gpu") is None
    kubedra("--store", store, "apply", "-f", str(path))
    before = _stored(store, "dc", "gpu")
    same = kubedra("--store", store, "apply", "-f", str(path), f"--dry-run={mode}")
    assert same.stdout == f"deviceclass.resource.k8s.io/gpu unchanged {suffix}\n"
    changed = kubedra("--store", store, "apply", "-f", str(_class_file(tmp, "b")), f"--dry-run={mode}")
    assert changed.stdout == f"deviceclass.resource.k8s.io/gpu configured {suffix}\n"
    assert _stored(store, "dc", "gpu") == before


def test_server_dry_run_applies_the_update_rules_client_dry_run_does_not(
        cluster: tuple[str, Path]) -> None:
    """A claim's spec is immutable: only the server dry run (the store's own checks) sees
    that, as kubectl's client dry run cannot either."""
    store, tmp = cluster
    claim = _stored(store, "rc", "vllm-gpu-claim")
    assert claim is not None
    manifest = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "vllm-gpu-claim", "namespace": "default"},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "high-memory-gpu", "count": 2}}]}}}
    path = tmp / "claim.yaml"
    path.write_text(yaml.safe_dump(manifest))
    client = kubedra("--store", store, "apply", "-f", str(path), "--dry-run=client")
    assert client.returncode == 0
    assert client.stdout == "resourceclaim.resource.k8s.io/vllm-gpu-claim configured (dry run)\n"
    server = kubedra("--store", store, "apply", "-f", str(path), "--dry-run=server")
    assert server.returncode == 1 and "Traceback" not in server.stderr
    assert f"{path}:" in server.stderr and "field is immutable" in server.stderr
    assert _stored(store, "rc", "vllm-gpu-claim") == claim


def test_diff_shows_what_apply_would_change_and_exits_as_kubectl(cluster: tuple[str, Path]) -> None:
    store, tmp = cluster
    created = kubedra("--store", store, "diff", "-f", str(_class_file(tmp, "a")))
    name = "resource.k8s.io.v1.DeviceClass..gpu"
    assert created.returncode == 1
    lines = created.stdout.splitlines()
    assert lines[:3] == [f"diff -u -N LIVE/{name} MERGED/{name}", f"--- LIVE/{name}", f"+++ MERGED/{name}"]
    assert "+  name: gpu" in lines and not any(line.startswith("-") and not line.startswith("---") for line in lines)
    assert _stored(store, "dc", "gpu") is None
    kubedra("--store", store, "apply", "-f", str(tmp / "dc.yaml"))
    unchanged = kubedra("--store", store, "diff", "-f", str(tmp / "dc.yaml"))
    assert (unchanged.returncode, unchanged.stdout) == (0, "")
    changed = kubedra("--store", store, "diff", "-f", str(_class_file(tmp, "b")))
    assert changed.returncode == 1
    assert "-    tier: a" in changed.stdout.splitlines() and "+    tier: b" in changed.stdout.splitlines()
    assert "resourceVersion" not in changed.stdout and "managedFields" not in changed.stdout
    broken = tmp / "broken.yaml"
    broken.write_text("kind: [\n")
    failed = kubedra("--store", store, "diff", "-f", str(broken))
    assert failed.returncode == 2 and f"error: {broken}:" in failed.stderr


def test_delete_by_file_and_by_directory(cluster: tuple[str, Path], seed_dir: Path) -> None:
    store, _ = cluster
    run = kubedra("--store", store, "delete", "-f", str(seed_dir))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        'deviceclass.resource.k8s.io "high-memory-gpu" deleted',
        'resourceclaim.resource.k8s.io "vllm-gpu-claim" deleted from default namespace',
        'pod "vllm-inference" deleted from default namespace',
    ]
    again = kubedra("--store", store, "delete", "-f", str(seed_dir / "03-pod-vllm.yaml"))
    assert again.returncode == 1 and again.stderr == 'error: Pod "vllm-inference" not found\n'
    quiet = kubedra("--store", store, "delete", "-f", str(seed_dir), "--ignore-not-found")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert kubedra("--store", store, "get", "no", "big").returncode == 0  # others untouched


def test_delete_tries_every_object_and_names_each_missing_one(cluster: tuple[str, Path]) -> None:
    store, _ = cluster
    run = kubedra("--store", store, "delete", "no", "nope", "big", "gone")
    assert run.returncode == 1
    assert run.stdout == 'node "big" deleted\n'
    assert run.stderr.splitlines() == ['error: Node "nope" not found', 'error: Node "gone" not found']


@pytest.mark.parametrize("args", [["delete"], ["delete", "pod"], ["delete", "pod", "x", "-f", "y.yaml"]])
def test_delete_usage_errors(tmp_path: Path, args: list[str]) -> None:
    run = kubedra("--store", str(tmp_path / "s.db"), *args)
    assert run.returncode == 2 and "Traceback" not in run.stderr
