"""A fake NVML for the health and metrics code: the recorded 8x H100 HGX host (GPUs 6 and 7
in MIG mode) answering every health and metrics call as a healthy GPU does, with helpers
that break a GPU the ways NVML reports it. Also used by bench/bench_health_metrics.py."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

from kubedra.driver.backends.nvml import (
    HW_POWER_BRAKE_SLOWDOWN,
    HW_THERMAL_SLOWDOWN,
    SW_THERMAL_SLOWDOWN,
    XID_CRITICAL_ERROR,
    SnapshotNvml,
)

SNAPSHOT = Path(__file__).parent / "data" / "nvml_h100x8_hgx.json"
GPU_IDLE = 0x1  # nvmlClocksEventReasonGpuIdle: no slowdown
MIB = 1 << 20
CLOCK_REASONS = {
    "hw-thermal": HW_THERMAL_SLOWDOWN,
    "sw-thermal": SW_THERMAL_SLOWDOWN,
    "power-brake": HW_POWER_BRAKE_SLOWDOWN,
}


def healthy(index: int) -> dict[str, Any]:
    """The health and metrics answers of a healthy, lightly loaded GPU `index`."""
    return {
        "nvmlDeviceGetTotalEccErrors": {"0/0": 3 * index, "1/0": 0},  # corrected / uncorrected
        "nvmlDeviceGetRetiredPagesPendingStatus": {"error": "NVML_ERROR_NOT_SUPPORTED"},
        "nvmlDeviceGetRemappedRows": [0, 0, 0, 0],
        "nvmlDeviceGetCurrentClocksEventReasons": GPU_IDLE,
        "nvmlDeviceGetUtilizationRates": {"gpu": 10 * index, "memory": 5 * index},
        "nvmlDeviceGetTemperature": {"0": 30 + index},
        "nvmlDeviceGetPowerUsage": 70_000 + 1_000 * index,  # milliwatts
        "nvmlDeviceGetTotalEnergyConsumption": 1_000_000 * (index + 1),  # millijoules
        "nvmlDeviceRegisterEvents": True,
        "mig_devices": [],
    }


class FakeNvml(SnapshotNvml):
    """`SnapshotNvml` of the recorded host (or `gpus` copies of its GPU 0, `mig` the GPUs
    in MIG mode), healthy; counts the calls made (`calls`)."""

    def __init__(self, gpus: int | None = None, mig: tuple[int, ...] | None = None) -> None:
        data = json.loads(SNAPSHOT.read_text())
        if gpus is not None:
            data = _host(data, gpus, mig or ())
        for index, device in enumerate(data["devices"]):
            device.update(healthy(index))
        super().__init__(data)
        self.calls: Counter[str] = Counter()

    def _dev(self, function: str, index: int, key: str | None = None) -> Any:
        self.calls[function] += 1
        return super()._dev(function, index, key)

    def device(self, index: int) -> dict[str, Any]:
        devices: list[dict[str, Any]] = self.data["devices"]
        return devices[index]

    # --- breaking a GPU --------------------------------------------------------------------

    def lose(self, index: int) -> None:
        """The GPU fell off the bus: every call about it answers NVML_ERROR_GPU_IS_LOST."""
        device = self.device(index)
        for function in list(device):
            if function != "nvmlDeviceGetMinorNumber":  # learned before; it is lost now
                device[function] = {"error": "NVML_ERROR_GPU_IS_LOST"}

    def xid(self, index: int, code: int) -> None:
        """The driver reports Xid `code` on GPU `index` (-1: on no GPU in particular)."""
        event = {"index": index, "eventType": XID_CRITICAL_ERROR, "eventData": code}
        self.data.setdefault("events", []).append(event)

    def ecc(self, index: int, double: int = 0, single: int = 0) -> None:
        self.device(index)["nvmlDeviceGetTotalEccErrors"] = {"0/0": single, "1/0": double}

    def remapped_rows(self, index: int, pending: bool = False, failed: bool = False) -> None:
        self.device(index)["nvmlDeviceGetRemappedRows"] = [0, 2, int(pending), int(failed)]

    def retired_pages_pending(self, index: int) -> None:
        self.device(index)["nvmlDeviceGetRetiredPagesPendingStatus"] = 1

    def slowdown(self, index: int, *reasons: str) -> None:
        bits = 0
        for reason in reasons:
            bits |= CLOCK_REASONS[reason]
        self.device(index)["nvmlDeviceGetCurrentClocksEventReasons"] = bits or GPU_IDLE

    def busy(self, index: int, gpu: int, memory: int, used_mib: int) -> None:
        device = self.device(index)
        device["nvmlDeviceGetUtilizationRates"] = {"gpu": gpu, "memory": memory}
        info = device["nvmlDeviceGetMemoryInfo"]
        info.update(used=used_mib * MIB, free=info["total"] - used_mib * MIB)

    def create_mig(self, index: int, profile_id: int, start: int, size: int, memory_mib: int,
                   used_mib: int = 0) -> str:  # fmt: skip
        """A MIG device (a GPU instance) on GPU `index`; its UUID."""
        migs: list[dict[str, Any]] = self.device(index)["mig_devices"]
        uuid = f"MIG-{index:02d}{profile_id:03d}{start:02d}-0000-5000-8000-000000000000"
        migs.append({
            "uuid": uuid, "gpuInstanceId": len(migs) + 1, "profileId": profile_id,
            "start": start, "size": size,
            "memory": {"total": memory_mib * MIB, "used": used_mib * MIB,
                       "free": (memory_mib - used_mib) * MIB},
        })  # fmt: skip
        return uuid


def _host(data: dict[str, Any], gpus: int, mig: tuple[int, ...]) -> dict[str, Any]:
    """`gpus` GPUs like the snapshot's GPU 0 (MIG mode as the snapshot's GPU 6 for `mig`)."""
    plain, partitioned = data["devices"][0], data["devices"][6]
    devices: list[dict[str, Any]] = []
    sysfs: dict[str, Any] = {}
    for index in range(gpus):
        device = copy.deepcopy(partitioned if index in mig else plain)
        bus = 0x18 + index
        device["nvmlDeviceGetUUID"] = f"GPU-{index:08x}-2742-5a73-96de-f1d9474da48e"
        device["nvmlDeviceGetMinorNumber"] = index
        device["nvmlDeviceGetPciInfo"].update(bus=bus, busId=f"00000000:{bus:02X}:00.0")
        pci = f"0000:{bus:02x}:00.0"
        sysfs[f"/sys/bus/pci/devices/{pci}"] = f"/sys/devices/pci0000:15/0000:15:01.0/{pci}"
        sysfs[f"/sys/bus/pci/devices/{pci}/numa_node"] = 0
        devices.append(device)
    return {**data, "nvmlDeviceGetCount": gpus, "devices": devices, "sysfs": sysfs}
