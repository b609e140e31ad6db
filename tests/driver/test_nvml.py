"""The NVML backend against a recorded snapshot of an 8x H100 HGX host (GPUs 6, 7 in MIG mode)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kubedra.driver.backends.nvml import (
    NvmlBackend,
    NvmlCallError,
    SnapshotNvml,
    cuda_version,
    gpu_inventory,
    normalize_version,
    pcie_root,
    record_snapshot,
)
from kubedra.driver.publisher import slice_specs

from .conftest import DATA

SNAPSHOT = DATA / "nvml_h100x8_hgx.json"


@pytest.fixture
def nvml() -> SnapshotNvml:
    return SnapshotNvml.load(SNAPSHOT)


def test_full_gpu_attributes(nvml):
    inventory = gpu_inventory(nvml)
    gpu0 = inventory.devices[0]
    assert gpu0.name == "gpu-0"
    attrs = {k: v.value for k, v in gpu0.attributes.items()}
    assert attrs == {
        "type": "gpu",
        "uuid": "GPU-644d25ec-2742-5a73-96de-f1d9474da48e",
        "index": 0,
        "minor": 0,
        "productName": "NVIDIA H100 80GB HBM3",
        "brand": "Nvidia",
        "architecture": "Hopper",
        "cudaComputeCapability": "9.0.0",
        "driverVersion": "580.95.5",
        "cudaDriverVersion": "13.0.0",
        "addressingMode": "HMM",
        "resource.kubernetes.io/pciBusID": "0000:18:00.0",
        "resource.kubernetes.io/pcieRoot": "pci0000:15",
        "resource.kubernetes.io/numaNode": 0,
        "pcieBusID": "0000:18:00.0",
    }
    assert gpu0.attributes["cudaComputeCapability"].version == "9.0.0"
    assert str(gpu0.capacity["memory"].value) == "81559Mi"
    assert gpu0.consumes_counters == ()
    gpu5 = inventory.devices[5]
    assert gpu5.attributes["resource.kubernetes.io/pcieRoot"].value == "pci0000:a7"
    assert gpu5.attributes["resource.kubernetes.io/numaNode"].value == 1


def test_mig_gpus_are_partitionable(nvml):
    inventory = gpu_inventory(nvml)
    names = [d.name for d in inventory.devices]
    assert names[:7] == [f"gpu-{i}" for i in range(7)]
    assert len(inventory.devices) == 6 + 2 * 26  # 26 = full GPU + 25 MIG placements (§1.4)
    assert [c.name for c in inventory.shared_counters] == ["gpu-6-counter-set", "gpu-7-counter-set"]
    counters = {k: str(v.value) for k, v in inventory.shared_counters[0].counters.items()}
    assert counters == {
        "multiprocessors": "132",
        "copy-engines": "8",
        "decoders": "7",
        "encoders": "0",
        "jpeg-engines": "7",
        "ofa-engines": "1",
        "memory": "81152Mi",
        **{f"memory-slice-{i}": "1" for i in range(8)},
    }
    mig6 = [n for n in names if n.startswith("gpu-6-mig-")]
    assert sorted(mig6) == sorted(
        [f"gpu-6-mig-1g10gb-19-{s}" for s in range(7)]
        + [f"gpu-6-mig-1g10gb-me-20-{s}" for s in range(7)]
        + [f"gpu-6-mig-1g20gb-15-{s}" for s in (0, 2, 4, 6)]
        + [f"gpu-6-mig-2g20gb-14-{s}" for s in (0, 2, 4)]
        + [
            "gpu-6-mig-3g40gb-9-0",
            "gpu-6-mig-3g40gb-9-4",
            "gpu-6-mig-4g40gb-5-0",
            "gpu-6-mig-7g80gb-0-0",
        ]
    )
    by_name = {d.name: d for d in inventory.devices}
    mig = by_name["gpu-6-mig-3g40gb-9-4"]
    assert mig.attributes["type"].value == "mig" and mig.attributes["profile"].value == "3g.40gb"
    assert mig.attributes["parentUUID"].value == by_name["gpu-6"].attributes["uuid"].value
    assert "uuid" not in mig.attributes  # not created yet (dynamic MIG)
    (use,) = mig.consumes_counters
    assert use.counter_set == "gpu-6-counter-set"
    assert sorted(k for k in use.counters if k.startswith("memory-slice")) == [
        f"memory-slice-{i}" for i in (4, 5, 6, 7)
    ]
    assert (
        str(use.counters["memory"].value) == "40448Mi"
        and str(use.counters["multiprocessors"].value) == "60"
    )
    me = by_name["gpu-6-mig-1g10gb-me-20-3"]
    assert str(me.consumes_counters[0].counters["ofa-engines"].value) == "1"
    full = by_name["gpu-6"].consumes_counters[0].counters
    assert {k: str(v.value) for k, v in full.items()} == counters


def test_slices_of_the_snapshot(nvml):
    specs = slice_specs(gpu_inventory(nvml), "hgx-1")
    # 58 devices with counters -> limit 64: one counter slice + one device slice
    assert [(len(s.devices), len(s.shared_counters)) for s in specs] == [(0, 2), (58, 0)]


def test_record_replays_identically(nvml):
    recorded = record_snapshot(nvml)
    original = json.loads(SNAPSHOT.read_text())
    original.pop("comment")
    assert recorded == original
    assert gpu_inventory(SnapshotNvml(recorded)) == gpu_inventory(nvml)


def test_unsupported_calls_are_omitted(nvml):
    data = json.loads(SNAPSHOT.read_text())
    dev = data["devices"][0]
    dev["nvmlDeviceGetAddressingMode"] = {"error": "NVML_ERROR_NOT_SUPPORTED"}
    dev["nvmlDeviceGetMigMode"] = {"error": "NVML_ERROR_NOT_SUPPORTED"}
    data["sysfs"]["/sys/bus/pci/devices/0000:18:00.0/numa_node"] = -1
    del data["sysfs"]["/sys/bus/pci/devices/0000:18:00.0"]
    gpu0 = gpu_inventory(SnapshotNvml(data)).devices[0]
    for missing in (
        "addressingMode",
        "resource.kubernetes.io/numaNode",
        "resource.kubernetes.io/pcieRoot",
    ):
        assert missing not in gpu0.attributes
    with pytest.raises(NvmlCallError, match="NVML_ERROR_NOT_SUPPORTED"):
        SnapshotNvml(data).nvmlDeviceGetMigMode(0)


def test_helpers():
    assert normalize_version("580.95.05") == "580.95.5"
    assert normalize_version("550.54") == "550.54.0"
    assert cuda_version(12080) == "12.8.0"
    assert pcie_root("/sys/devices/pci0000:15/0000:15:01.0/0000:18:00.0") == "pci0000:15"
    assert pcie_root("/sys/devices/platform/foo") is None


def test_backend_protocol(nvml):
    backend = NvmlBackend(nvml)
    (inventory,) = backend.inventories()
    assert inventory.driver == "gpu.nvidia.com" and backend.node() is None


def test_without_nvidia_driver_clear_message():
    """On a machine without the NVIDIA driver (this test machine), one line, no traceback."""
    probe = subprocess.run(
        [sys.executable, "-c", "import pynvml; pynvml.nvmlInit()"], capture_output=True, text=True
    )
    if probe.returncode == 0:
        pytest.skip("this machine has a working NVIDIA driver")
    script = DATA.parents[2] / "scripts" / "nvml_check"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nvml_check: NVML unavailable:"), done.stderr
