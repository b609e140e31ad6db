"""`kubedra apply` through the real entry point: the seed re-applied after scheduling
(issue 25, "Apply loses data"), immutable fields, objects not created by apply."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_lint import kubedra

SEED_OUTPUT = [
    "deviceclass.resource.k8s.io/high-memory-gpu unchanged",
    "resourceclaim.resource.k8s.io/vllm-gpu-claim unchanged",
    "pod/vllm-inference unchanged",
]


def get(store: str, kind: str, name: str) -> dict[str, Any]:
    run = kubedra("--store", store, "get", kind, name, "-o", "json")
    assert run.returncode == 0, run.stderr
    return dict(json.loads(run.stdout))


def edited_seed(seed_dir: Path, folder: Path, old: str, new: str) -> Path:
    """A copy of the seed whose pod manifest has `old` replaced by `new`; the pod's file."""
    shutil.copytree(seed_dir, folder)
    pod_file = folder / "03-pod-vllm.yaml"
    pod_file.write_text(pod_file.read_text().replace(old, new))
    return pod_file


@pytest.fixture
def scheduled(tmp_path: Path, seed_dir: Path) -> str:
    """The issue's steps: one H100 node, the seed applied and scheduled."""
    store = str(tmp_path / "state.db")
    for args in (("cluster", "create", "--node-profile", "h100x8=1"), ("apply", "-f", str(seed_dir)),
                 ("schedule",)):
        run = kubedra("--store", store, *args)
        assert run.returncode == 0, run.stderr
    return store


def test_reapplying_the_seed_after_schedule_keeps_binding_and_claim(scheduled: str, seed_dir: Path) -> None:
    pod, claim = get(scheduled, "pod", "vllm-inference"), get(scheduled, "rc", "vllm-gpu-claim")
    assert pod["spec"]["nodeName"] == "h100x8-0"
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert claim["status"]["reservedFor"][0]["name"] == "vllm-inference"
    again = kubedra("--store", scheduled, "apply", "-f", str(seed_dir))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == SEED_OUTPUT
    # Nothing lost, nothing written: the objects (resourceVersions included) are as they were.
    assert get(scheduled, "pod", "vllm-inference") == pod
    assert get(scheduled, "rc", "vllm-gpu-claim") == claim


def test_moving_the_bound_pod_is_a_clear_error_naming_file_object_and_field(
    scheduled: str, seed_dir: Path, tmp_path: Path
) -> None:
    pod_file = edited_seed(seed_dir, tmp_path / "seed", "spec:\n", "spec:\n  nodeName: h100x8-1\n")
    before = get(scheduled, "pod", "vllm-inference")
    run = kubedra("--store", scheduled, "apply", "-f", str(pod_file.parent))
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert (
        f"error: {pod_file}:6: Pod default/vllm-inference: spec: Forbidden: pod updates may not "
        "change fields other than `spec.containers[*].image`" in run.stderr
    )
    assert '  spec.nodeName: "h100x8-0" -> "h100x8-1"' in run.stderr.splitlines()
    assert run.stdout == ""
    assert get(scheduled, "pod", "vllm-inference") == before


def test_a_real_change_is_merged_and_reported_configured(
    scheduled: str, seed_dir: Path, tmp_path: Path
) -> None:
    name = "  name: vllm-inference\n"
    pod_file = edited_seed(seed_dir, tmp_path / "seed", name, name + "  labels: {app: vllm}\n")
    run = kubedra("--store", scheduled, "apply", "-f", str(pod_file.parent))
    assert run.stdout.splitlines()[-1] == "pod/vllm-inference configured", run.stderr
    pod = get(scheduled, "pod", "vllm-inference")
    assert pod["metadata"]["labels"] == {"app": "vllm"} and pod["spec"]["nodeName"] == "h100x8-0"
    run = kubedra("--store", scheduled, "apply", "-f", str(seed_dir))  # the label dropped again
    assert run.stdout.splitlines()[-1] == "pod/vllm-inference configured"
    pod = get(scheduled, "pod", "vllm-inference")
    assert "labels" not in pod["metadata"] and pod["spec"]["nodeName"] == "h100x8-0"


def test_applying_over_an_object_not_created_by_apply_warns_and_keeps_its_fields(
    scheduled: str, tmp_path: Path
) -> None:
    node = get(scheduled, "node", "h100x8-0")  # made by `cluster create`, not by apply
    manifest = tmp_path / "node.yaml"
    manifest.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: h100x8-0\n  labels: {rack: r1}\n")
    run = kubedra("--store", scheduled, "apply", "-f", str(manifest))
    assert run.stdout == "node/h100x8-0 configured\n"
    assert run.stderr.startswith(
        "warning: node/h100x8-0 has no kubectl.kubernetes.io/last-applied-configuration annotation"
    )
    after = get(scheduled, "node", "h100x8-0")
    assert after["status"] == node["status"]
    assert after["metadata"]["labels"] == {**node["metadata"].get("labels", {}), "rack": "r1"}
    again = kubedra("--store", scheduled, "apply", "-f", str(manifest))
    assert (again.stdout, again.stderr) == ("node/h100x8-0 unchanged\n", "")


def test_manifests_pasted_from_kubectl_get_apply_first_time(tmp_path: Path) -> None:
    """`kubectl get -o yaml` output (server-set resourceVersion, uid, times, status) applies
    as kubectl applies it: each object created, in every dry-run mode too."""
    store, pasted = str(tmp_path / "state.db"), str(Path(__file__).parent / "pasted")
    for dry_run in ("--dry-run=client", "--dry-run=server"):
        run = kubedra("--store", store, "apply", "-f", pasted, dry_run)
        assert run.returncode == 0, run.stderr
        assert run.stdout.count(" created") == 8, run.stdout
    run = kubedra("--store", store, "apply", "-f", pasted)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count(" created\n") == 8 and "resourceVersion" not in run.stderr
    slice_ = get(store, "resourceslice", "gpu-node-1-gpu.nvidia.com-7xk2p")
    assert slice_["metadata"]["resourceVersion"] != "1302"
