"""The NVML backend against a recorded snapshot of an 8x H100 HGX host (GPUs 6, 7 in MIG mode),
and its health and metrics against a fake that breaks GPUs the ways NVML reports it."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubedra.driver.backends import parse_xids
from kubedra.driver.backends.nvml import (
    XID_CRITICAL_ERROR,
    NvmlBackend,
    NvmlCallError,
    NvmlHealth,
    PynvmlApi,
    SnapshotNvml,
    cuda_version,
    gpu_inventory,
    mig_parent,
    normalize_version,
    nvml_health,
    pcie_root,
    record_snapshot,
)
from kubedra.driver.devicemetrics import DeviceSample
from kubedra.driver.health import Fault, HealthState
from kubedra.driver.publisher import slice_specs

from .conftest import DATA
from .fakenvml import FakeNvml

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


# --- health: faults from NVML's queries and events (the fake in fakenvml.py) -------------


def faults_of(report: Mapping[str, Sequence[Fault]]) -> dict[str, list[tuple[str, str]]]:
    return {name: [(f.kind.value, f.value) for f in fs] for name, fs in report.items()}


def test_healthy_gpus_have_no_faults():
    fake = FakeNvml()
    health = NvmlHealth(fake)
    assert health() == {} and health() == {}
    assert set(fake.registered) == set(range(8))  # every GPU watched for critical Xids
    assert all(types == XID_CRITICAL_ERROR for types in fake.registered.values())


def test_a_lost_gpu():
    fake = FakeNvml()
    health = NvmlHealth(fake)
    fake.lose(2)
    assert faults_of(health()) == {"gpu-2": [("lost", "")]}
    (fault,) = health()["gpu-2"]
    assert "GPU_IS_LOST" in fault.message


def test_critical_xids_stay_application_xids_do_not_count():
    fake = FakeNvml()
    health = NvmlHealth(fake)
    for code in (13, 31, 43, 45, 68, 109):  # the application's errors, not the GPU's
        fake.xid(0, code)
    fake.xid(1, 79)
    assert faults_of(health()) == {"gpu-1": [("xid", "79")]}
    assert health()["gpu-1"][0].message == "Xid 79: GPU has fallen off the bus"
    fake.xid(1, 48)  # a later one: the first stays the fault (the taint does not flap)
    assert faults_of(health()) == {"gpu-1": [("xid", "79")]}  # and it stays, event or not
    fake.xid(-1, 94)  # an event that names no GPU counts for all of them
    report = faults_of(health())
    assert len(report) == 8 and report["gpu-0"] == [("xid", "94")]
    assert report["gpu-1"] == [("xid", "79")]


def test_ignored_xids_are_configurable():
    fake = FakeNvml()
    health = NvmlHealth(fake, ignored_xids=parse_xids("+79"))
    fake.xid(1, 79)
    fake.xid(2, 13)
    assert health() == {}
    fake = FakeNvml()
    health = NvmlHealth(fake, ignored_xids=parse_xids("none"))
    fake.xid(2, 13)
    assert faults_of(health()) == {"gpu-2": [("xid", "13")]}
    assert parse_xids("13, 31") == {13, 31}
    with pytest.raises(ValueError, match="expected Xid codes"):
        parse_xids("13,x")


def test_ecc_faults():
    fake = FakeNvml()
    health = NvmlHealth(fake)
    fake.ecc(0, double=2, single=40)
    fake.remapped_rows(1, pending=True)
    fake.remapped_rows(2, failed=True)
    fake.retired_pages_pending(3)  # a pre-Ampere GPU's page retirement
    fake.ecc(4, single=1000)  # corrected errors alone are no fault
    assert faults_of(health()) == {
        "gpu-0": [("ecc", "dbe")],
        "gpu-1": [("ecc", "pending-remap")],
        "gpu-2": [("ecc", "remap-failed")],
        "gpu-3": [("ecc", "pending-retirement")],
    }
    assert health()["gpu-0"][0].message == "2 double-bit ECC error(s)"


def test_thermal_and_power_slowdown():
    fake = FakeNvml()
    health = NvmlHealth(fake)
    fake.slowdown(0, "hw-thermal")
    fake.slowdown(1, "sw-thermal", "power-brake")
    fake.device(2)["nvmlDeviceGetCurrentClocksEventReasons"] = 0x4  # SW power cap: normal
    report = health()
    assert faults_of(report) == {
        "gpu-0": [("thermal", "slowdown")],
        "gpu-1": [("thermal", "slowdown"), ("power", "brake")],
    }
    assert report["gpu-0"][0].message == "HW thermal slowdown"
    assert report["gpu-1"][0].message == "SW thermal slowdown"
    fake.slowdown(0)  # cooled down: healthy again
    assert "gpu-0" not in health()


def test_mig_devices_have_their_gpus_faults():
    fake = FakeNvml()
    backend = NvmlBackend(fake)
    (inventory,) = backend.inventories()
    report = backend.health_report(Path("/nonexistent"))
    fake.slowdown(6, "hw-thermal")
    fake.xid(7, 74)
    got = faults_of(report())
    mig6 = [d.name for d in inventory.devices if d.name.startswith("gpu-6-mig-")]
    assert len(mig6) == 25 and all(got[name] == [("thermal", "slowdown")] for name in mig6)
    assert got["gpu-6"] == [("thermal", "slowdown")] and got["gpu-7"] == [("xid", "74")]
    assert len(got) == 2 * 26 and not any(n.startswith("gpu-5") for n in got)
    assert mig_parent("gpu-6-mig-1g10gb-me-20-3") == "gpu-6" and mig_parent("gpu-6") is None


def test_faults_become_taints(tmp_path: Path):
    fake = FakeNvml()
    backend = NvmlBackend(fake)
    (inventory,) = backend.inventories()
    state = HealthState("gpu.nvidia.com")
    names = [d.name for d in inventory.devices]
    report = backend.health_report(tmp_path)
    assert state.update(names, report()) == names  # first look: all known, none tainted
    fake.xid(3, 48)
    fake.lose(4)
    assert sorted(state.update(names, report())) == ["gpu-3", "gpu-4"]
    (xid,) = state.taints("gpu-3")
    assert (xid.key, xid.value, xid.effect) == ("gpu.nvidia.com/xid", "48", "NoExecute")
    (lost,) = state.taints("gpu-4")
    assert (lost.key, lost.value, lost.effect) == ("gpu.nvidia.com/gpu-lost", None, "NoExecute")


def test_unsupported_queries_are_not_asked_again():
    fake = FakeNvml()
    health = NvmlHealth(fake)
    health()
    fake.calls.clear()
    health()
    assert fake.calls["nvmlDeviceGetRetiredPagesPendingStatus"] == 0  # Hopper: not supported
    assert fake.calls["nvmlDeviceGetTotalEccErrors"] == 8
    assert sum(fake.calls.values()) == 8 * 3  # ECC, remapped rows, clock event reasons


def test_no_event_set_still_checks_queries():
    fake = FakeNvml()
    fake.data["nvmlEventSetCreate"] = {"error": "NVML_ERROR_NOT_SUPPORTED"}
    health = NvmlHealth(fake)
    fake.xid(0, 79)
    fake.ecc(1, double=1)
    assert faults_of(health()) == {"gpu-1": [("ecc", "dbe")]}


def test_the_recorded_snapshot_answers_no_health_calls(nvml):
    """A snapshot without health answers (every call NVML_ERROR_FUNCTION_NOT_FOUND): healthy."""
    assert nvml_health(nvml) == {}


# --- samples for the metrics ---------------------------------------------------------------


def test_samples_of_gpus_and_existing_mig_devices():
    fake = FakeNvml()
    backend = NvmlBackend(fake)
    backend.inventories()
    fake.busy(0, gpu=87, memory=40, used_mib=60_000)
    mig_uuid = fake.create_mig(6, profile_id=9, start=4, size=4, memory_mib=40_448, used_mib=1_024)
    fake.create_mig(6, profile_id=99, start=0, size=1, memory_mib=1)  # not a published device
    sampler = backend.device_sampler("gpu.nvidia.com", Path("/nonexistent"))
    by_name = {s.device: s for s in sampler(())}
    assert sorted(by_name) == sorted([f"gpu-{i}" for i in range(8)] + ["gpu-6-mig-3g40gb-9-4"])
    gpu0 = by_name["gpu-0"]
    assert gpu0 == DeviceSample(
        device="gpu-0",
        uuid="GPU-644d25ec-2742-5a73-96de-f1d9474da48e",
        model="NVIDIA H100 80GB HBM3",
        utilization=0.87,
        memory_utilization=0.4,
        memory_used_bytes=60_000 << 20,
        memory_total_bytes=85520809984,
        temperature_celsius=30,
        power_watts=70.0,
        energy_joules=1000.0,
        ecc_single=0,
        ecc_double=0,
    )
    mig = by_name["gpu-6-mig-3g40gb-9-4"]
    assert (mig.uuid, mig.memory_total_bytes, mig.memory_used_bytes) == (
        mig_uuid, 40_448 << 20, 1 << 30
    )
    assert mig.utilization is None and mig.temperature_celsius is None  # NVML has none per MIG
    fake.lose(3)
    assert "gpu-3" not in {s.device for s in sampler(())}  # its health says why
    assert backend.device_sampler("dra.net", Path("/nonexistent"))(()) == ()


# --- PynvmlApi against a stand-in pynvml module -------------------------------------------


class _NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def _fake_pynvml() -> types.ModuleType:
    """The few pynvml functions the health and metrics calls use, answering like NVML does
    for one H100 with one MIG device; GPU 1 is lost."""
    module = types.ModuleType("pynvml")
    ns: Any = module
    ns.NVMLError = _NVMLError
    ns.NVML_ERROR_NOT_FOUND, ns.NVML_ERROR_TIMEOUT, ns.NVML_ERROR_GPU_IS_LOST = 6, 10, 15
    handles = {0: "h0", 1: "h1"}

    def check(handle: str) -> None:
        if handle == "h1":
            raise _NVMLError(15)

    ns.nvmlInit = lambda: None
    ns.nvmlShutdown = lambda: None
    ns.nvmlDeviceGetHandleByIndex = lambda i: handles[i]
    ns.nvmlDeviceGetUtilizationRates = lambda h: (check(h), types.SimpleNamespace(gpu=55, memory=7))[1]
    ns.nvmlDeviceGetRemappedRows = lambda h: (check(h), (0, 1, 1, 0))[1]
    ns.nvmlDeviceGetTemperatureV = lambda h, sensor: (check(h), 41)[1]
    events = [types.SimpleNamespace(device="h0", eventType=8, eventData=79, gpuInstanceId=0,
                                    computeInstanceId=0)]  # fmt: skip

    def wait(event_set: object, timeout: int) -> object:
        if not events:
            raise _NVMLError(10)
        return events.pop()

    ns.nvmlEventSetWait_v2 = wait
    ns.nvmlDeviceGetIndex = lambda h: int(h[1:])
    ns.nvmlDeviceGetMaxMigDeviceCount = lambda h: 3

    def mig_handle(h: str, i: int) -> str:
        if i != 1:
            raise _NVMLError(6)
        return "mig0"

    ns.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle
    ns.nvmlDeviceGetGpuInstanceId = lambda h: 5
    ns.nvmlDeviceGetGpuInstanceById = lambda h, gi: f"gi{gi}"
    ns.nvmlGpuInstanceGetInfo = lambda gi: types.SimpleNamespace(
        profileId=9, placement=types.SimpleNamespace(start=4, size=4)
    )
    ns.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=8 << 30, free=7 << 30,
                                                                  used=1 << 30)  # fmt: skip
    ns.nvmlDeviceGetUUID = lambda h: "MIG-1234"
    return module


def test_pynvml_api_answers_and_error_names(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    api = PynvmlApi()
    assert api.nvmlDeviceGetUtilizationRates(0) == {"gpu": 55, "memory": 7}
    assert api.nvmlDeviceGetRemappedRows(0) == (0, 1, 1, 0)
    assert api.nvmlDeviceGetTemperature(0, 0) == 41
    with pytest.raises(NvmlCallError) as lost:
        api.nvmlDeviceGetUtilizationRates(1)
    assert lost.value.code == "NVML_ERROR_GPU_IS_LOST"
    assert api.nvmlEventSetWait(None, 0) == {
        "index": 0, "eventType": 8, "eventData": 79, "gpuInstanceId": 0, "computeInstanceId": 0
    }  # fmt: skip
    with pytest.raises(NvmlCallError, match="NVML_ERROR_TIMEOUT"):
        api.nvmlEventSetWait(None, 0)
    with pytest.raises(NvmlCallError, match="NVML_ERROR_FUNCTION_NOT_FOUND"):
        api.nvmlDeviceGetPowerUsage(0)  # a binding without the function
    assert api.mig_devices(0) == [
        {"uuid": "MIG-1234", "gpuInstanceId": 5, "profileId": 9, "start": 4, "size": 4,
         "memory": {"total": 8 << 30, "free": 7 << 30, "used": 1 << 30}}
    ]  # fmt: skip
