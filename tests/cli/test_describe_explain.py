"""`describe` with relationships and events, `explain pod` on a bound pod, `devices` with
admin access: through the real entry point on a store the catalog's profiles fill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_lint import kubedra
from tests.conftest import REPO
from tests.scheduler.cluster import gpu_node, gpu_pod, new_store, user_claim


@pytest.fixture
def placed(tmp_path: Path, seed_dir: Path) -> str:
    """Two H100 nodes and two L4 nodes, the seed applied and scheduled."""
    store = str(tmp_path / "s.db")
    for args in (["cluster", "create", "--node-profile", "h100x8=2", "--node-profile", "l4x4=2"],
                 ["apply", "-f", str(seed_dir)], ["schedule"]):
        run = kubedra("--store", store, *args)
        assert run.returncode == 0, run.stderr
    return store


def _section(text: str, title: str) -> list[str]:
    """The lines of a describe section, its title line excluded."""
    lines = text.splitlines()
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start:end]


def test_describe_pod_shows_its_claims_and_scheduling_event(placed: str) -> None:
    out = kubedra("--store", placed, "describe", "pod", "vllm-inference").stdout
    claims = [line.split() for line in _section(out, "Resource Claims")]
    assert claims == [["NAME", "CLAIM", "STATE", "DEVICES"],
                      ["gpu-claim", "vllm-gpu-claim", "allocated,reserved", "h100x8-0/gpu-0"]]
    events = _section(out, "Events")
    assert events[0].split() == ["TYPE", "REASON", "AGE", "FROM", "MESSAGE"]
    assert events[1].split()[:2] == ["Normal", "Scheduled"]
    assert events[1].endswith("default-scheduler   Successfully assigned default/vllm-inference to h100x8-0")


def test_describe_claim_shows_devices_consumers_and_users(placed: str) -> None:
    out = kubedra("--store", placed, "describe", "rc", "vllm-gpu-claim").stdout
    assert [line.split() for line in _section(out, "Allocated Devices")][1] == [
        "gpu", "gpu.nvidia.com", "h100x8-0", "gpu-0"]
    assert _section(out, "Reserved For")[1].split()[0] == "pods/vllm-inference"
    assert [line.split() for line in _section(out, "Used By")][1] == [
        "pod/vllm-inference", "gpu-claim", "Scheduled", "h100x8-0"]
    reasons = [line.split()[1] for line in _section(out, "Events")[1:]]
    assert reasons == ["Allocated", "Reserved"]


def test_describe_pending_pod_shows_failed_scheduling(tmp_path: Path, seed_dir: Path) -> None:
    store = str(tmp_path / "s.db")
    kubedra("--store", store, "cluster", "create", "--node-profile", "l4x4=1")
    kubedra("--store", store, "apply", "-f", str(seed_dir))
    kubedra("--store", store, "schedule")
    out = kubedra("--store", store, "describe", "po", "vllm-inference").stdout
    assert [line.split()[2] for line in _section(out, "Resource Claims")[1:]] == ["pending"]
    (event,) = _section(out, "Events")[1:]
    assert event.split()[:2] == ["Warning", "FailedScheduling"] and "0/1 nodes are available" in event
    claim = kubedra("--store", store, "describe", "rc", "vllm-gpu-claim").stdout
    assert "Allocated Devices: <none>" in claim and "Events:       <none>" in claim


def test_explain_bound_pod_names_devices_why_and_funnel(placed: str) -> None:
    run = kubedra("--store", placed, "explain", "pod", "vllm-inference")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:4] == [
        "pod default/vllm-inference: bound to h100x8-0",
        "devices:",
        "  vllm-gpu-claim/gpu: gpu.nvidia.com/h100x8-0/gpu-0 (NVIDIA H100 80GB HBM3, 81559Mi)",
        '    why: DeviceClass high-memory-gpu selects device.capacity["memory"].isGreaterThan(quantity("40Gi"))',
    ]
    assert lines[4].startswith("  placement: h100x8-0 is 1 of 2 node(s) that fit, with devices that fit: 8 for gpu")
    # The pod's own GPU counts as free: the funnel is the one the scheduler saw.
    assert lines[5:] == [
        "funnel per node group, as the scheduler saw it before the bind:",
        "  2 node(s) [h100x8-0, h100x8-1]: fits",
        "    gpu (need 1): 12 in pools -> 8 class selectors -> 8 request selectors -> 8 untainted -> 8 free -> 8 fit",
        "  2 node(s) [l4x4-0, l4x4-1]: cannot allocate all claims",
        "    blocked: default/vllm-gpu-claim gpu: class high-memory-gpu admits 0 of the node's 4 device(s), 1 needed",
        "    gpu (need 1): 4 in pools -> 0 class selectors -> 0 request selectors -> 0 untainted -> 0 free -> 0 fit",
    ]


def test_devices_free_counts_admin_access_as_not_consuming(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    kubedra("--store", store, "cluster", "create", "--node-profile", "h100x8=1")
    applied = kubedra("--store", store, "apply", "-f", str(REPO / "examples" / "admin-access"))
    assert applied.returncode == 0, applied.stderr
    assert "-> h100x8-0" in kubedra("--store", store, "schedule").stdout
    devices = json.loads(kubedra("--store", store, "devices", "--free", "-o", "json").stdout)
    gpus = [d for d in devices if d["driver"] == "gpu.nvidia.com"]
    assert len(gpus) == 8
    assert all(d["heldBy"] is None and len(d["adminAccessBy"]) == 1 for d in gpus)
    table = kubedra("--store", store, "devices", "--node", "h100x8-0").stdout.splitlines()
    gpu_rows = [line for line in table if "gpu.nvidia.com" in line]
    assert all(line.endswith("(admin access)") for line in gpu_rows) and len(gpu_rows) == 8


def test_explain_bound_pod_with_a_generated_claim_and_subrequests(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    kubedra("--store", store, "cluster", "create", "--node-profile", "l4x4=1", "--node-profile", "h100x8=1")
    kubedra("--store", store, "apply", "-f", str(REPO / "examples" / "first-available"))
    kubedra("--store", store, "schedule")
    lines = kubedra("--store", store, "explain", "pod", "inference").stdout.splitlines()
    assert lines[0] == "pod default/inference: bound to h100x8-0"
    assert lines[2].startswith("  inference-gpu-") and lines[2].endswith(
        "/gpu/h100: gpu.nvidia.com/h100x8-0/gpu-0 (NVIDIA H100 80GB HBM3, 81559Mi)")
    assert lines[3].endswith('; the request adds device.attributes["gpu.nvidia.com"].productName.contains("H100")')
    assert "devices that fit: 8 for gpu/h100, 0 for gpu/l4" in lines[4]


def test_explain_pod_counts_the_claim_of_its_extended_resources(tmp_path: Path) -> None:
    """A pod asking for more of a DRA-served extended resource than any node has: explain
    names the generated claim's shortfall instead of saying "fits", and creates nothing."""
    store = str(tmp_path / "s.db")
    manifest = tmp_path / "legacy.yaml"
    manifest.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: legacy}\n"
        "spec:\n  extendedResourceName: example.com/gpu\n"
        "  selectors: [{cel: {expression: 'device.driver == \"gpu.nvidia.com\"'}}]\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\n"
        "spec:\n  containers: [{name: job, resources: {limits: {example.com/gpu: 9}}}]\n")
    for args in (["cluster", "create", "--node-profile", "h100x8=1"], ["apply", "-f", str(manifest)]):
        run = kubedra("--store", store, *args)
        assert run.returncode == 0, run.stderr
    out = kubedra("--store", store, "explain", "pod", "big")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:4] == [
        "  1 node(s) [h100x8-0]: cannot allocate all claims",
        "    blocked: default/big-extended-resources- container-0-request-0: class legacy "
        "admits 8 of the node's 12 device(s), 9 needed",
        "    container-0-request-0 (need 9): 12 in pools -> 8 class selectors -> "
        "8 request selectors -> 8 untainted -> 8 free -> 8 fit"]
    assert kubedra("--store", store, "get", "resourceclaims", "-o", "name").stdout == ""
    unmapped = tmp_path / "unmapped.yaml"
    unmapped.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: odd}\nspec:\n"
                        "  containers: [{name: job, resources: {limits: {example.com/fpga: 1}}}]\n")
    assert kubedra("--store", store, "apply", "-f", str(unmapped)).returncode == 0
    odd = kubedra("--store", store, "explain", "pod", "odd").stdout
    assert odd.splitlines()[1] == "  1 node(s) [h100x8-0]: Insufficient example.com/fpga"


def test_schedule_shows_the_devices_of_a_shared_claim_a_pod_joins(tmp_path: Path) -> None:
    """The second pod of a shared claim allocates nothing new: it still runs on the claim's
    devices, and `schedule` says which (not "no devices")."""
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    user_claim(store, "shared")
    gpu_pod(store, "first", claim="shared")
    first = kubedra("--store", str(tmp_path / "state.db"), "schedule")
    assert first.stdout == "pod/first -> n1 (gpu.nvidia.com/n1/gpu-0)\n", first.stderr
    gpu_pod(store, "second", claim="shared")
    second = kubedra("--store", str(tmp_path / "state.db"), "schedule")
    assert second.stdout == "pod/second -> n1 (gpu.nvidia.com/n1/gpu-0)\n", second.stderr
