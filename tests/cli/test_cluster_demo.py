"""`kubedra cluster ...` and `kubedra demo` through the real entry point."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.cli.test_lint import kubedra


def test_profiles_lists_every_required_profile() -> None:
    run = kubedra("cluster", "profiles")
    assert run.returncode == 0
    names = [line.split()[0] for line in run.stdout.splitlines()[1:]]
    assert names == ["h100x8", "h200x8", "a100-80x8", "a100-40x8-mig", "h100x8-mig", "l4x4",
                     "b200x8", "tpu-v5e-2x4", "tpu-v6e-2x4"]


def test_create_publishes_slices_and_reset_clears(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    run = kubedra("--store", store, "cluster", "create", "--node-profile", "h100x8=2",
                  "--node-profile", "a100-40x8-mig=1")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "cluster: 3 node(s) created: h100x8-0, h100x8-1, a100-40x8-mig-0\n"
    slices = yaml.safe_load(kubedra("--store", store, "get", "rs", "-o", "yaml").stdout)["items"]
    by_node: dict[str, list[dict[str, object]]] = {}
    for rs in slices:
        by_node.setdefault(rs["spec"]["nodeName"], []).append(rs)
    assert sorted(by_node) == ["a100-40x8-mig-0", "h100x8-0", "h100x8-1"]
    mig = [s for s in by_node["a100-40x8-mig-0"] if s["spec"]["driver"] == "gpu.nvidia.com"]
    counts = {s["spec"]["pool"]["resourceSliceCount"] for s in mig}
    assert counts == {len(mig)} and len(mig) > 1  # counters + devices split at 64
    devices = kubedra("--store", store, "devices", "--node", "h100x8-0").stdout.splitlines()
    assert len(devices) == 1 + 8 + 4  # header, 8 GPUs, 4 RDMA NICs
    assert kubedra("--store", store, "cluster", "reset").returncode == 0
    assert kubedra("--store", store, "get", "no").stderr.startswith("No resources found")


def test_create_from_file_and_bad_profile(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text(yaml.safe_dump({"nodes": [{"profile": "l4x4", "count": 2}]}))
    store = str(tmp_path / "s.db")
    assert "2 node(s) created" in kubedra("--store", store, "cluster", "create", "--from", str(spec)).stdout
    bad = kubedra("--store", store, "cluster", "create", "--node-profile", "v100x8=1")
    assert bad.returncode == 1 and "h100x8" in bad.stderr
    assert kubedra("--store", store, "cluster", "create", "--node-profile", "h100x8").returncode == 2


def test_demo_places_vllm_on_an_h100_and_explains(tmp_path: Path) -> None:
    store = str(tmp_path / "demo.db")
    run = kubedra("--store", store, "demo")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) < 50  # a blocker line per node group that fits nowhere
    placed = next(line for line in lines if line.startswith("vllm-inference -> node "))
    assert placed.startswith("vllm-inference -> node h100x8-")
    assert "NVIDIA H100 80GB HBM3" in placed
    assert any('portable form: device.driver == "gpu.nvidia.com" && device.capacity["gpu.nvidia.com"].memory' in line for line in lines)
    assert "  2 node(s) [l4x4-0, l4x4-1]: cannot allocate all claims" in lines
    assert any(line.startswith("train-16 ") and "0/6 nodes are available" in line for line in lines)
    assert any("l4x4-0 (NVIDIA-L4" in line and "seed class rejects it" in line for line in lines)
    claim = yaml.safe_load(kubedra("--store", store, "get", "rc", "vllm-gpu-claim", "-o", "yaml").stdout)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "gpu.nvidia.com" and result["pool"].startswith("h100x8-")
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0] == {
        "key": "metadata.name", "operator": "In", "values": [result["pool"]]}
