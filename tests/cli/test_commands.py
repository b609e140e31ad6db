"""Every `kubedra` command through the real entry point, on a temporary store."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.conftest import GPU_CLASS, node_docs
from tests.cli.test_lint import kubedra


def test_apply_reports_created_then_unchanged_then_configured(cluster: tuple[str, Path], seed_dir: Path) -> None:
    store, tmp = cluster
    again = kubedra("--store", store, "apply", "-f", str(seed_dir))
    assert again.stdout.splitlines() == [
        "deviceclass.resource.k8s.io/high-memory-gpu unchanged",
        "resourceclaim.resource.k8s.io/vllm-gpu-claim unchanged",
        "pod/vllm-inference unchanged",
    ]
    assert again.stderr == ""  # the seed's warnings came with its creation, not again
    changed = dict(GPU_CLASS)
    (tmp / "dc.yaml").write_text(yaml.safe_dump(changed))
    assert kubedra("--store", store, "apply", "-f", str(tmp / "dc.yaml")).stdout == "deviceclass.resource.k8s.io/gpu created\n"
    changed["metadata"] = {"name": "gpu", "labels": {"tier": "a"}}
    (tmp / "dc.yaml").write_text(yaml.safe_dump(changed))
    assert kubedra("--store", store, "apply", "-f", str(tmp / "dc.yaml")).stdout == "deviceclass.resource.k8s.io/gpu configured\n"


def test_apply_with_an_error_writes_nothing(cluster: tuple[str, Path]) -> None:
    store, tmp = cluster
    bad = dict(GPU_CLASS, metadata={"name": "Bad_Name"})
    (tmp / "two.yaml").write_text(yaml.safe_dump_all([dict(GPU_CLASS, metadata={"name": "fine"}), bad]))
    run = kubedra("--store", store, "apply", "-f", str(tmp / "two.yaml"))
    assert run.returncode == 1
    assert "DeviceClass Bad_Name: metadata.name: Invalid value" in run.stderr
    assert kubedra("--store", store, "get", "dc", "fine").returncode == 1


def test_get_table_short_names_and_formats(cluster: tuple[str, Path]) -> None:
    store, _ = cluster
    nodes = kubedra("--store", store, "get", "no")
    assert nodes.stdout.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert [line.split()[0] for line in nodes.stdout.splitlines()[1:]] == ["big", "small"]
    rs = kubedra("--store", store, "get", "rs", "-o", "wide")
    assert rs.stdout.splitlines()[0].split() == ["NAME", "NODE", "DRIVER", "POOL", "AGE", "DEVICES", "GENERATION"]
    names = kubedra("--store", store, "get", "rc", "-o", "name")
    assert names.stdout == "resourceclaim.resource.k8s.io/vllm-gpu-claim\n"
    as_json = json.loads(kubedra("--store", store, "get", "dc", "high-memory-gpu", "-o", "json").stdout)
    assert as_json["spec"]["selectors"][0]["cel"]["expression"].startswith("device.capacity")
    assert kubedra("--store", store, "get", "po", "-A").stdout.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    labelled = kubedra("--store", store, "get", "po", "-l", "app=none")
    assert labelled.stdout == "" and "No resources found" in labelled.stderr


def test_unknown_kind_and_missing_object_exit_one(cluster: tuple[str, Path]) -> None:
    store, _ = cluster
    run = kubedra("--store", store, "get", "widgets")
    assert run.returncode == 1 and 'doesn\'t have a resource type "widgets"' in run.stderr
    run = kubedra("--store", store, "get", "rc", "nope")
    assert run.returncode == 1 and run.stderr == 'error: ResourceClaim "nope" not found\n'


def test_usage_error_exits_two(cluster: tuple[str, Path]) -> None:
    store, _ = cluster
    assert kubedra("--store", store, "get").returncode == 2
    assert kubedra("--store", store, "schedule", "--policy", "magic").returncode == 2


def test_schedule_explain_describe_and_get_allocation(cluster: tuple[str, Path]) -> None:
    store, _ = cluster
    pending = kubedra("--store", store, "explain", "pod", "vllm-inference")
    assert pending.stdout.splitlines()[0] == "pod default/vllm-inference: pending"
    assert "1 node(s) [big]: fits" in pending.stdout
    assert "1 node(s) [small]: cannot allocate all claims" in pending.stdout
    assert "gpu (need 1): 1 in pools -> 0 class selectors" in pending.stdout
    run = kubedra("--store", store, "schedule", "--once")
    assert run.stdout == "pod/vllm-inference -> big (gpu.nvidia.com/big/gpu-0)\n"
    claim = yaml.safe_load(kubedra("--store", store, "get", "rc", "vllm-gpu-claim", "-o", "yaml").stdout)
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"device": "gpu-0", "driver": "gpu.nvidia.com", "pool": "big", "request": "gpu"}]
    assert claim["status"]["reservedFor"][0]["name"] == "vllm-inference"
    described = kubedra("--store", store, "describe", "pod", "vllm-inference").stdout
    assert "Name:         vllm-inference" in described and "Node Name:  big" in described
    assert kubedra("--store", store, "explain", "claim", "vllm-gpu-claim").stdout.startswith(
        "claim default/vllm-gpu-claim: allocated")
    state = kubedra("--store", store, "get", "rc").stdout.splitlines()[1].split()
    assert state[:2] == ["vllm-gpu-claim", "allocated,reserved"]


def test_devices_shows_who_holds_what(cluster: tuple[str, Path]) -> None:
    store, _ = cluster
    kubedra("--store", store, "schedule")
    rows = [line.split() for line in kubedra("--store", store, "devices").stdout.splitlines()]
    assert rows[0] == ["NODE", "DRIVER", "DEVICE", "PRODUCT", "MEMORY", "HEALTH", "HELD", "BY"]
    held = {r[0]: r[-1] for r in rows[1:]}
    assert [r[-2] for r in rows[1:]] == ["Healthy", "Healthy"]
    assert held == {"big": "default/vllm-gpu-claim", "small": "<free>"}
    assert all(" ".join(r[3:7]) == "NVIDIA H100 80GB HBM3" for r in rows[1:])  # productName
    free = json.loads(kubedra("--store", store, "devices", "--free", "-o", "json").stdout)
    assert [(d["node"], d["product"], d["heldBy"], d["adminAccessBy"]) for d in free] == [
        ("small", "NVIDIA H100 80GB HBM3", None, [])]
    everything = json.loads(kubedra("--store", store, "devices", "-o", "json").stdout)
    assert [d["heldBy"] for d in everything] == [["default/vllm-gpu-claim"], None]


def test_devices_shows_health_from_slice_taints_and_taint_rules(cluster: tuple[str, Path]) -> None:
    store, tmp = cluster
    docs = node_docs("sick", "80Gi")
    docs[1]["spec"]["devices"][0]["taints"] = [
        {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "drain-small"},
            "spec": {"deviceSelector": {"pool": "small"},
                     "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}
    (tmp / "sick.yaml").write_text(yaml.safe_dump_all([*docs, rule]))
    applied = kubedra("--store", store, "apply", "-f", str(tmp / "sick.yaml"))
    assert applied.returncode == 0, applied.stderr
    rows = [line.split() for line in kubedra("--store", store, "devices").stdout.splitlines()[1:]]
    assert {r[0]: r[-2] for r in rows} == {
        "big": "Healthy", "sick": "xid=79:NoExecute", "small": "maintenance:NoSchedule"}
    sick = json.loads(kubedra("--store", store, "devices", "--node", "sick", "-o", "json").stdout)
    assert sick[0]["taints"] == [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]


def test_delete_pod_removes_it(cluster: tuple[str, Path]) -> None:
    store, _ = cluster
    run = kubedra("--store", store, "delete", "po", "vllm-inference")
    assert run.stdout == 'pod "vllm-inference" deleted from default namespace\n'
    assert kubedra("--store", store, "get", "po", "vllm-inference").returncode == 1


def test_allocate_from_files_without_a_store(tmp_path: Path, seed_dir: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump_all(node_docs("small", "24Gi") + node_docs("big", "80Gi")))
    for path in seed_dir.glob("0[12]*.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    run = kubedra("allocate", "-f", str(tmp_path), "-o", "json")
    assert run.returncode == 0, run.stderr
    (claim,) = json.loads(run.stdout)["claims"]
    assert claim["name"] == "vllm-gpu-claim" and claim["reason"] == "allocated on node big"
    assert claim["allocation"]["devices"]["results"][0] == {
        "request": "gpu", "driver": "gpu.nvidia.com", "pool": "big", "device": "gpu-0"}
    small = kubedra("allocate", "-f", str(tmp_path), "--node", "small")
    assert small.returncode == 1 and "node small: cannot allocate all claims" in small.stdout


def test_store_from_environment(tmp_path: Path, seed_dir: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "KUBEDRA_STORE": str(tmp_path / "env.db")}
    subprocess.run([sys.executable, "-m", "kubedra", "apply", "-f", str(seed_dir)], env=env,
                   check=True, capture_output=True)
    assert (tmp_path / "env.db").exists()


def test_shell_completion_script_and_version() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "_KUBEDRA_COMPLETE": "bash_source"}
    script = subprocess.run([sys.executable, "-m", "kubedra"], env=env, capture_output=True,
                            text=True, check=False).stdout
    assert "_kubedra_completion()" in script
    assert kubedra("--version").stdout.startswith("kubedra, version ")
