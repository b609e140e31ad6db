"""Real NVIDIA GPUs through NVML (NVIDIA's official `pynvml` bindings from nvidia-ml-py).

All hardware access goes through the small `Nvml` protocol, whose methods are named after
and answer exactly like the NVML calls they wrap. `PynvmlApi` talks to the driver;
`SnapshotNvml` replays a recorded snapshot (JSON, see `record_snapshot`), which is how the
inventory code is tested without a GPU and how a real machine's answers are captured.

Published like the NVIDIA GPU DRA driver does (drivers.md §1.3, §1.4, §1.11): device
`gpu-<minor>` with `type`, `uuid`, `productName`, `brand`, `architecture`,
`cudaComputeCapability`, `driverVersion`, `cudaDriverVersion`, `addressingMode`,
`resource.kubernetes.io/pciBusID`, `.../pcieRoot` (from the sysfs path of the PCI device, as
upstream's deviceattribute package derives it), `.../numaNode`, plus the v25.3 attributes
`index`, `minor`, `pcieBusID` the simulated catalog also publishes; capacity `memory`. A GPU
with MIG mode on is published as partitionable devices (dynamic MIG): counter set
`gpu-<minor>-counter-set`, the full GPU consuming every counter, and one device per MIG
profile and legal placement consuming its share plus its memory slices.

MIG instances are made at prepare time (`kubedra.driver.mig`) through the protocol's MIG
calls: NVML names GPU and compute instances by handles that live as long as the process,
so the protocol names them by their IDs (GPU index, GPU-instance ID, compute-instance ID)
and `PynvmlApi` looks the handle up for each call. `SnapshotNvml` lists the MIG devices a
snapshot records and refuses to create or destroy any (NVML_ERROR_NOT_SUPPORTED);
`kubedra.driver.backends.simnvml` simulates the whole lifecycle.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kubedra.api.core import Node
from kubedra.api.quantity import Format, Quantity
from kubedra.api.resource import (
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
)
from kubedra.catalog.gpus import MigGeometry, MigProfile
from kubedra.catalog.inventory import NUMA_NODE, PCI_BUS_ID, PCIE_ROOT, DriverInventory
from kubedra.catalog.nvidia import partitioned_gpu
from kubedra.driver.backends.nvidia_files import driver_files
from kubedra.driver.cdi import CdiHost
from kubedra.driver.devicemetrics import DeviceSample, Sampler, no_samples
from kubedra.driver.health import Fault, FaultKind
from kubedra.driver.logs import get_logger, log_event
from kubedra.errors import KubedraError

DRIVER = "gpu.nvidia.com"
log = get_logger("nvml")

# nvmlDeviceGetArchitecture -> the driver's `architecture` attribute.
ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}
ADDRESSING_MODES = {1: "HMM", 2: "ATS"}  # NVML_DEVICE_ADDRESSING_MODE_*; 0 = none
GPU_INSTANCE_PROFILE_COUNT = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT (profile indices 0..0x11)
COMPUTE_INSTANCE_PROFILE_COUNT = 0x9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0  # NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
MIG_ENABLED = 1  # NVML_DEVICE_MIG_ENABLE
PROC_ROOT = Path("/proc")
_MAX_GPU_INSTANCES = 16  # per profile, more than any GPU has (A100/H100/B200: 7)
_MAX_COMPUTE_INSTANCES = 8  # per GPU instance
_PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")

# (capacity name on devices, counter name in the counter set, NVML profile-info field).
_DIMENSIONS = (
    ("multiprocessors", "multiprocessors", "multiprocessorCount"),
    ("copyEngines", "copy-engines", "copyEngineCount"),
    ("decoders", "decoders", "decoderCount"),
    ("encoders", "encoders", "encoderCount"),
    ("jpegEngines", "jpeg-engines", "jpegCount"),
    ("ofaEngines", "ofa-engines", "ofaCount"),
)


class NvmlUnavailable(KubedraError):
    """No usable NVIDIA driver/NVML on this machine (one-line message, no traceback)."""


class NvmlCallError(KubedraError):
    """One NVML call failed; `code` is the NVML_ERROR_* name (e.g. NVML_ERROR_NOT_SUPPORTED)."""

    def __init__(self, function: str, code: str) -> None:
        super().__init__(f"{function}: {code}")
        self.function, self.code = function, code


class Nvml(Protocol):
    """The NVML answers the inventory needs; `index` is the NVML device index."""

    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlSystemGetCudaDriverVersion(self) -> int: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetUUID(self, index: int) -> str: ...
    def nvmlDeviceGetName(self, index: int) -> str: ...
    def nvmlDeviceGetMinorNumber(self, index: int) -> int: ...
    def nvmlDeviceGetMemoryInfo(self, index: int) -> dict[str, int]: ...
    def nvmlDeviceGetArchitecture(self, index: int) -> int: ...
    def nvmlDeviceGetCudaComputeCapability(self, index: int) -> tuple[int, int]: ...
    def nvmlDeviceGetPciInfo(self, index: int) -> dict[str, Any]: ...
    def nvmlDeviceGetAddressingMode(self, index: int) -> int: ...
    def nvmlDeviceGetMigMode(self, index: int) -> tuple[int, int]: ...
    def nvmlDeviceGetGpuInstanceProfileInfo(self, index: int, profile: int) -> dict[str, Any]: ...
    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, index: int, profile_id: int
    ) -> list[dict[str, int]]: ...
    def sysfs_pci_device(self, bus_id: str) -> str | None:
        """realpath of /sys/bus/pci/devices/<bus id> (not NVML: the PCIe root comes from it)."""
        ...

    def sysfs_numa_node(self, bus_id: str) -> int | None:
        """/sys/bus/pci/devices/<bus id>/numa_node, as the NVIDIA driver reads NUMA affinity
        (NVML's nvmlDeviceGetNumaNodeId answers only where the GPU memory is a NUMA node)."""
        ...

    # Health (`NvmlHealth`) and samples for the metrics (`NvmlSampler`).
    def nvmlDeviceGetTotalEccErrors(
        self, index: int, error_type: int, counter_type: int
    ) -> int: ...
    def nvmlDeviceGetRetiredPagesPendingStatus(self, index: int) -> int: ...
    def nvmlDeviceGetRemappedRows(self, index: int) -> tuple[int, int, int, int]:
        """(corrected rows, uncorrected rows, remapping pending, remapping failed)."""
        ...

    def nvmlDeviceGetCurrentClocksEventReasons(self, index: int) -> int: ...
    def nvmlDeviceGetUtilizationRates(self, index: int) -> dict[str, int]:
        """{"gpu": percent, "memory": percent} over the driver's last sample period."""
        ...

    def nvmlDeviceGetTemperature(self, index: int, sensor: int) -> int: ...
    def nvmlDeviceGetPowerUsage(self, index: int) -> int:
        """Milliwatts."""
        ...

    def nvmlDeviceGetTotalEnergyConsumption(self, index: int) -> int:
        """Millijoules since the driver was loaded."""
        ...

    def nvmlEventSetCreate(self) -> Any: ...
    def nvmlDeviceRegisterEvents(self, index: int, event_types: int, event_set: Any) -> None: ...
    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> dict[str, int]:
        """One event: `index` (of the GPU; -1 when NVML names none), `eventType`,
        `eventData` (the Xid), `gpuInstanceId`, `computeInstanceId`; NVML_ERROR_TIMEOUT
        when none came within `timeout_ms` (0: do not wait)."""
        ...

    def nvmlEventSetFree(self, event_set: Any) -> None: ...
    def mig_devices(self, index: int) -> list[dict[str, Any]]:
        """The MIG devices that exist on GPU `index`, one per GPU instance (not one NVML
        call: nvmlDeviceGetMaxMigDeviceCount, then per MIG device handle its UUID, GPU
        instance (nvmlGpuInstanceGetInfo: profile ID and placement) and memory info):
        `uuid`, `gpuInstanceId`, `profileId`, `start`, `size`, `memory` {total, free, used}."""
        ...

    # MIG instances (`kubedra.driver.mig`). NVML's GPU- and compute-instance handles are
    # named here by their IDs: `gpu_instance_id` as nvmlGpuInstanceGetInfo answers it,
    # `compute_instance_id` as nvmlComputeInstanceGetInfo does.
    def nvmlDeviceGetGpuInstances(self, index: int, profile_id: int) -> list[dict[str, Any]]:
        """The GPU instances of profile `profile_id` on GPU `index`, each as
        nvmlGpuInstanceGetInfo answers: `id`, `profileId`, `placement` {start, size}."""
        ...

    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, index: int, profile_id: int, start: int, size: int
    ) -> dict[str, Any]:
        """A new GPU instance at placement {start, size}; its nvmlGpuInstanceGetInfo."""
        ...

    def nvmlGpuInstanceDestroy(self, index: int, gpu_instance_id: int) -> None: ...
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, index: int, gpu_instance_id: int, profile: int, eng_profile: int
    ) -> dict[str, Any]:
        """Compute-instance profile `profile` (an NVML_COMPUTE_INSTANCE_PROFILE_* index) of
        the GPU instance: `id`, `sliceCount`, `instanceCount`, `multiprocessorCount`, ..."""
        ...

    def nvmlGpuInstanceCreateComputeInstance(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> dict[str, Any]:
        """A new compute instance; its nvmlComputeInstanceGetInfo: `id`, `profileId`,
        `placement` {start, size}."""
        ...

    def nvmlGpuInstanceGetComputeInstances(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> list[dict[str, Any]]: ...
    def nvmlComputeInstanceDestroy(
        self, index: int, gpu_instance_id: int, compute_instance_id: int
    ) -> None: ...
    def nvmlDeviceGetMaxMigDeviceCount(self, index: int) -> int: ...
    def nvmlDeviceGetMigDeviceHandleByIndex(self, index: int, mig_index: int) -> dict[str, Any]:
        """The MIG device (a compute instance) at `mig_index` of GPU `index`, not as a handle
        but as what the driver reads from one: `uuid` (nvmlDeviceGetUUID), `gpuInstanceId`
        (nvmlDeviceGetGpuInstanceId), `computeInstanceId` (nvmlDeviceGetComputeInstanceId);
        NVML_ERROR_NOT_FOUND where there is none."""
        ...

    def mig_capability_minor(
        self, gpu_minor: int, gpu_instance_id: int, compute_instance_id: int | None
    ) -> int | None:
        """The minor of /dev/nvidia-caps/nvidia-cap<N> that gives access to a GPU instance
        (`compute_instance_id` None) or to a compute instance in it (not NVML: the NVIDIA
        driver's capability files under /proc, `mig_capability_minor` below)."""
        ...

    def nvidia_caps_major(self) -> int | None:
        """The character major of the nvidia-caps devices (/proc/devices), None if unknown."""
        ...

    def shutdown(self) -> None: ...


def mig_capability_minor(
    gpu_minor: int,
    gpu_instance_id: int,
    compute_instance_id: int | None = None,
    proc: Path = PROC_ROOT,
) -> int | None:
    """The device-file minor the NVIDIA driver gives a MIG access capability. The driver
    exposes one capability file per GPU instance and per compute instance under
    /proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<id>[/ci<id>]/access, whose
    `DeviceFileMinor` line names the /dev/nvidia-caps/nvidia-cap<N> node that grants it."""
    path = proc / "driver" / "nvidia" / "capabilities" / f"gpu{gpu_minor}" / "mig"
    path = path / f"gi{gpu_instance_id}"
    if compute_instance_id is not None:
        path = path / f"ci{compute_instance_id}"
    return _number(path / "access", r"^DeviceFileMinor:\s*(\d+)\s*$")


def nvidia_caps_major(proc: Path = PROC_ROOT) -> int | None:
    """The major of `nvidia-caps` in /proc/devices (given out when the module loads)."""
    return _number(proc / "devices", r"^\s*(\d+)\s+nvidia-caps\s*$")


def _number(path: Path, pattern: str) -> int | None:
    """The number `pattern` (one group, one line) finds in a file; None if none or no file."""
    try:
        found = re.search(pattern, path.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) if found else None


# --- the real thing ------------------------------------------------------------------------


def _struct_dict(struct: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, _ in struct._fields_:
        value = getattr(struct, name)
        out[name] = value.decode() if isinstance(value, bytes) else value
    return out


class PynvmlApi:
    """`Nvml` on the machine's NVIDIA driver through pynvml."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as err:  # nvidia-ml-py is a runtime dependency, but be clear
            raise NvmlUnavailable(f"NVML unavailable: cannot import pynvml ({err})") from None
        self._nvml: Any = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            raise NvmlUnavailable(
                f"NVML unavailable: {err} (no NVIDIA driver on this machine, or "
                "libnvidia-ml.so.1 not found)"
            ) from None
        except OSError as err:
            raise NvmlUnavailable(f"NVML unavailable: {err}") from None
        self._handles: dict[int, Any] = {}
        self._errors = {
            getattr(pynvml, name): name for name in dir(pynvml) if name.startswith("NVML_ERROR_")
        }

    def _call(self, function: str, *args: Any) -> Any:
        call = getattr(self._nvml, function, None)
        if call is None:  # an older nvidia-ml-py than the one kubedra is built with
            raise NvmlCallError(function, "NVML_ERROR_FUNCTION_NOT_FOUND")
        try:
            return call(*args)
        except self._nvml.NVMLError as err:
            code = getattr(err, "value", None)
            raise NvmlCallError(function, self._errors.get(code, f"NVML_ERROR_{code}")) from None

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._call("nvmlDeviceGetHandleByIndex", index)
        return self._handles[index]

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._call("nvmlSystemGetDriverVersion"))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self._call("nvmlSystemGetCudaDriverVersion"))

    def nvmlDeviceGetCount(self) -> int:
        return int(self._call("nvmlDeviceGetCount"))

    def nvmlDeviceGetUUID(self, index: int) -> str:
        return str(self._call("nvmlDeviceGetUUID", self._handle(index)))

    def nvmlDeviceGetName(self, index: int) -> str:
        return str(self._call("nvmlDeviceGetName", self._handle(index)))

    def nvmlDeviceGetMinorNumber(self, index: int) -> int:
        return int(self._call("nvmlDeviceGetMinorNumber", self._handle(index)))

    def nvmlDeviceGetMemoryInfo(self, index: int) -> dict[str, int]:
        info = self._call("nvmlDeviceGetMemoryInfo", self._handle(index))
        return {"total": int(info.total), "free": int(info.free), "used": int(info.used)}

    def nvmlDeviceGetArchitecture(self, index: int) -> int:
        return int(self._call("nvmlDeviceGetArchitecture", self._handle(index)))

    def nvmlDeviceGetCudaComputeCapability(self, index: int) -> tuple[int, int]:
        major, minor = self._call("nvmlDeviceGetCudaComputeCapability", self._handle(index))
        return int(major), int(minor)

    def nvmlDeviceGetPciInfo(self, index: int) -> dict[str, Any]:
        return _struct_dict(self._call("nvmlDeviceGetPciInfo", self._handle(index)))

    def nvmlDeviceGetAddressingMode(self, index: int) -> int:
        return int(self._call("nvmlDeviceGetAddressingMode", self._handle(index)))

    def nvmlDeviceGetMigMode(self, index: int) -> tuple[int, int]:
        current, pending = self._call("nvmlDeviceGetMigMode", self._handle(index))
        return int(current), int(pending)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, index: int, profile: int) -> dict[str, Any]:
        info = self._call("nvmlDeviceGetGpuInstanceProfileInfo", self._handle(index), profile, 2)
        return _struct_dict(info)

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, index: int, profile_id: int
    ) -> list[dict[str, int]]:
        nvml = self._nvml
        count = ctypes.c_uint(8)  # at most 8 memory slices, so at most 8 placements
        placements = (nvml.c_nvmlGpuInstancePlacement_t * 8)()
        self._call(
            "nvmlDeviceGetGpuInstancePossiblePlacements",
            self._handle(index),
            profile_id,
            placements,
            ctypes.byref(count),
        )
        return [{"start": p.start, "size": p.size} for p in placements[: count.value]]

    def sysfs_pci_device(self, bus_id: str) -> str | None:
        path = Path("/sys/bus/pci/devices") / bus_id.lower()
        return os.path.realpath(path) if path.exists() else None

    def sysfs_numa_node(self, bus_id: str) -> int | None:
        try:
            return int((Path("/sys/bus/pci/devices") / bus_id.lower() / "numa_node").read_text())
        except (OSError, ValueError):
            return None

    def nvmlDeviceGetTotalEccErrors(self, index: int, error_type: int, counter_type: int) -> int:
        handle = self._handle(index)
        return int(self._call("nvmlDeviceGetTotalEccErrors", handle, error_type, counter_type))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, index: int) -> int:
        return int(self._call("nvmlDeviceGetRetiredPagesPendingStatus", self._handle(index)))

    def nvmlDeviceGetRemappedRows(self, index: int) -> tuple[int, int, int, int]:
        corrected, uncorrected, pending, failed = self._call(
            "nvmlDeviceGetRemappedRows", self._handle(index)
        )
        return int(corrected), int(uncorrected), int(pending), int(failed)

    def nvmlDeviceGetCurrentClocksEventReasons(self, index: int) -> int:
        try:
            return int(self._call("nvmlDeviceGetCurrentClocksEventReasons", self._handle(index)))
        except NvmlCallError as err:  # drivers before 535 know the older name only
            if err.code != "NVML_ERROR_FUNCTION_NOT_FOUND":
                raise
            function = "nvmlDeviceGetCurrentClocksThrottleReasons"
            return int(self._call(function, self._handle(index)))

    def nvmlDeviceGetUtilizationRates(self, index: int) -> dict[str, int]:
        rates = self._call("nvmlDeviceGetUtilizationRates", self._handle(index))
        return {"gpu": int(rates.gpu), "memory": int(rates.memory)}

    def nvmlDeviceGetTemperature(self, index: int, sensor: int) -> int:
        try:  # the versioned call; the plain one is deprecated (removed in CUDA 14)
            return int(self._call("nvmlDeviceGetTemperatureV", self._handle(index), sensor))
        except NvmlCallError as err:
            if err.code not in ("NVML_ERROR_FUNCTION_NOT_FOUND", "NVML_ERROR_NOT_SUPPORTED"):
                raise
            return int(self._call("nvmlDeviceGetTemperature", self._handle(index), sensor))

    def nvmlDeviceGetPowerUsage(self, index: int) -> int:
        return int(self._call("nvmlDeviceGetPowerUsage", self._handle(index)))

    def nvmlDeviceGetTotalEnergyConsumption(self, index: int) -> int:
        return int(self._call("nvmlDeviceGetTotalEnergyConsumption", self._handle(index)))

    def nvmlEventSetCreate(self) -> Any:
        return self._call("nvmlEventSetCreate")

    def nvmlDeviceRegisterEvents(self, index: int, event_types: int, event_set: Any) -> None:
        self._call("nvmlDeviceRegisterEvents", self._handle(index), event_types, event_set)

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> dict[str, int]:
        data = self._call("nvmlEventSetWait_v2", event_set, timeout_ms)
        try:
            index = int(self._nvml.nvmlDeviceGetIndex(data.device)) if data.device else -1
        except self._nvml.NVMLError:
            index = -1
        return {
            "index": index,
            "eventType": int(data.eventType),
            "eventData": int(data.eventData),
            "gpuInstanceId": int(data.gpuInstanceId),
            "computeInstanceId": int(data.computeInstanceId),
        }

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._call("nvmlEventSetFree", event_set)

    def mig_devices(self, index: int) -> list[dict[str, Any]]:
        parent = self._handle(index)
        out: dict[int, dict[str, Any]] = {}
        for i in range(int(self._call("nvmlDeviceGetMaxMigDeviceCount", parent))):
            try:
                mig = self._call("nvmlDeviceGetMigDeviceHandleByIndex", parent, i)
            except NvmlCallError as err:
                if err.code in ("NVML_ERROR_NOT_FOUND", "NVML_ERROR_INVALID_ARGUMENT"):
                    continue  # no MIG device at this index
                raise
            gi = int(self._call("nvmlDeviceGetGpuInstanceId", mig))
            if gi in out:  # another compute instance of the same GPU instance
                continue
            info = self._call(
                "nvmlGpuInstanceGetInfo", self._call("nvmlDeviceGetGpuInstanceById", parent, gi)
            )
            memory = self._call("nvmlDeviceGetMemoryInfo", mig)
            out[gi] = {
                "uuid": str(self._call("nvmlDeviceGetUUID", mig)),
                "gpuInstanceId": gi,
                "profileId": int(info.profileId),
                "start": int(info.placement.start),
                "size": int(info.placement.size),
                "memory": {
                    "total": int(memory.total),
                    "free": int(memory.free),
                    "used": int(memory.used),
                },
            }
        return [out[gi] for gi in sorted(out)]

    def _gpu_instance(self, index: int, gpu_instance_id: int) -> Any:
        return self._call("nvmlDeviceGetGpuInstanceById", self._handle(index), gpu_instance_id)

    def _compute_instance(self, index: int, gpu_instance_id: int, compute_instance_id: int) -> Any:
        return self._call(
            "nvmlGpuInstanceGetComputeInstanceById",
            self._gpu_instance(index, gpu_instance_id),
            compute_instance_id,
        )

    def _gpu_instance_info(self, gpu_instance: Any) -> dict[str, Any]:
        info = self._call("nvmlGpuInstanceGetInfo", gpu_instance)
        return {
            "id": int(info.id),
            "profileId": int(info.profileId),
            "placement": {"start": int(info.placement.start), "size": int(info.placement.size)},
        }

    def _compute_instance_info(self, compute_instance: Any) -> dict[str, Any]:
        info = self._call("nvmlComputeInstanceGetInfo", compute_instance)
        return {
            "id": int(info.id),
            "profileId": int(info.profileId),
            "placement": {"start": int(info.placement.start), "size": int(info.placement.size)},
        }

    def nvmlDeviceGetGpuInstances(self, index: int, profile_id: int) -> list[dict[str, Any]]:
        count = ctypes.c_uint(0)
        found = (self._nvml.c_nvmlGpuInstance_t * _MAX_GPU_INSTANCES)()
        self._call(
            "nvmlDeviceGetGpuInstances",
            self._handle(index),
            profile_id,
            found,
            ctypes.byref(count),
        )
        return [self._gpu_instance_info(found[i]) for i in range(count.value)]

    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, index: int, profile_id: int, start: int, size: int
    ) -> dict[str, Any]:
        placement = self._nvml.c_nvmlGpuInstancePlacement_t(start, size)
        created = self._call(
            "nvmlDeviceCreateGpuInstanceWithPlacement",
            self._handle(index),
            profile_id,
            ctypes.byref(placement),
        )
        return self._gpu_instance_info(created)

    def nvmlGpuInstanceDestroy(self, index: int, gpu_instance_id: int) -> None:
        self._call("nvmlGpuInstanceDestroy", self._gpu_instance(index, gpu_instance_id))

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, index: int, gpu_instance_id: int, profile: int, eng_profile: int
    ) -> dict[str, Any]:
        info = self._call(
            "nvmlGpuInstanceGetComputeInstanceProfileInfo",
            self._gpu_instance(index, gpu_instance_id),
            profile,
            eng_profile,
        )
        return _struct_dict(info)

    def nvmlGpuInstanceCreateComputeInstance(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> dict[str, Any]:
        created = self._call(
            "nvmlGpuInstanceCreateComputeInstance",
            self._gpu_instance(index, gpu_instance_id),
            profile_id,
        )
        return self._compute_instance_info(created)

    def nvmlGpuInstanceGetComputeInstances(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> list[dict[str, Any]]:
        count = ctypes.c_uint(0)
        found = (self._nvml.c_nvmlComputeInstance_t * _MAX_COMPUTE_INSTANCES)()
        self._call(
            "nvmlGpuInstanceGetComputeInstances",
            self._gpu_instance(index, gpu_instance_id),
            profile_id,
            found,
            ctypes.byref(count),
        )
        return [self._compute_instance_info(found[i]) for i in range(count.value)]

    def nvmlComputeInstanceDestroy(
        self, index: int, gpu_instance_id: int, compute_instance_id: int
    ) -> None:
        self._call(
            "nvmlComputeInstanceDestroy",
            self._compute_instance(index, gpu_instance_id, compute_instance_id),
        )

    def nvmlDeviceGetMaxMigDeviceCount(self, index: int) -> int:
        return int(self._call("nvmlDeviceGetMaxMigDeviceCount", self._handle(index)))

    def nvmlDeviceGetMigDeviceHandleByIndex(self, index: int, mig_index: int) -> dict[str, Any]:
        mig = self._call("nvmlDeviceGetMigDeviceHandleByIndex", self._handle(index), mig_index)
        return {
            "uuid": str(self._call("nvmlDeviceGetUUID", mig)),
            "gpuInstanceId": int(self._call("nvmlDeviceGetGpuInstanceId", mig)),
            "computeInstanceId": int(self._call("nvmlDeviceGetComputeInstanceId", mig)),
        }

    def mig_capability_minor(
        self, gpu_minor: int, gpu_instance_id: int, compute_instance_id: int | None
    ) -> int | None:
        return mig_capability_minor(gpu_minor, gpu_instance_id, compute_instance_id)

    def nvidia_caps_major(self) -> int | None:
        return nvidia_caps_major()

    def shutdown(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()


def _error_name(nvml: Any, err: Exception) -> str:
    code = getattr(err, "value", None)
    for name in dir(nvml):
        if name.startswith("NVML_ERROR_") and getattr(nvml, name) == code:
            return name
    return f"NVML_ERROR_{code}"


# --- recorded snapshots --------------------------------------------------------------------


class SnapshotNvml:
    """`Nvml` replaying a snapshot written by `record_snapshot` (tests; offline inspection).

    Layout: top-level `nvmlSystem*`/`nvmlDeviceGetCount` answers, `devices[index]` with one
    entry per NVML function (an answer, or `{"error": "NVML_ERROR_..."}`), profile infos keyed
    by profile index, placements keyed by GPU-instance profile ID, and `sysfs` with the
    resolved PCI device paths. Beyond what `record_snapshot` writes (the inventory's calls),
    a snapshot may answer the health and metrics calls the same way (calls with arguments
    keyed by them: `nvmlDeviceGetTotalEccErrors` by `"<error type>/<counter type>"`,
    `nvmlDeviceGetTemperature` by sensor; `mig_devices` a list) and hold `events`, a queue
    of `nvmlEventSetWait` answers (each with its GPU's `index`): tests inject faults so.
    A call the snapshot does not answer fails with NVML_ERROR_FUNCTION_NOT_FOUND.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.registered: dict[int, int] = {}  # index -> event types registered

    @classmethod
    def load(cls, path: str | Path) -> SnapshotNvml:
        return cls(json.loads(Path(path).read_text()))

    def _answer(self, function: str, value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"error"}:
            raise NvmlCallError(function, str(value["error"]))
        if value is None:
            raise NvmlCallError(function, "NVML_ERROR_FUNCTION_NOT_FOUND")
        return value

    def _top(self, function: str) -> Any:
        return self._answer(function, self.data.get(function))

    def _dev(self, function: str, index: int, key: str | None = None) -> Any:
        devices = self.data.get("devices", [])
        if not 0 <= index < len(devices):
            raise NvmlCallError(function, "NVML_ERROR_INVALID_ARGUMENT")
        value = devices[index].get(function)
        if key is not None:
            value = self._answer(function, value)
            value = value.get(key, {"error": "NVML_ERROR_NOT_SUPPORTED"})
        return self._answer(function, value)

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._top("nvmlSystemGetDriverVersion"))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self._top("nvmlSystemGetCudaDriverVersion"))

    def nvmlDeviceGetCount(self) -> int:
        return int(self._top("nvmlDeviceGetCount"))

    def nvmlDeviceGetUUID(self, index: int) -> str:
        return str(self._dev("nvmlDeviceGetUUID", index))

    def nvmlDeviceGetName(self, index: int) -> str:
        return str(self._dev("nvmlDeviceGetName", index))

    def nvmlDeviceGetMinorNumber(self, index: int) -> int:
        return int(self._dev("nvmlDeviceGetMinorNumber", index))

    def nvmlDeviceGetMemoryInfo(self, index: int) -> dict[str, int]:
        return dict(self._dev("nvmlDeviceGetMemoryInfo", index))

    def nvmlDeviceGetArchitecture(self, index: int) -> int:
        return int(self._dev("nvmlDeviceGetArchitecture", index))

    def nvmlDeviceGetCudaComputeCapability(self, index: int) -> tuple[int, int]:
        major, minor = self._dev("nvmlDeviceGetCudaComputeCapability", index)
        return int(major), int(minor)

    def nvmlDeviceGetPciInfo(self, index: int) -> dict[str, Any]:
        return dict(self._dev("nvmlDeviceGetPciInfo", index))

    def nvmlDeviceGetAddressingMode(self, index: int) -> int:
        return int(self._dev("nvmlDeviceGetAddressingMode", index))

    def nvmlDeviceGetMigMode(self, index: int) -> tuple[int, int]:
        current, pending = self._dev("nvmlDeviceGetMigMode", index)
        return int(current), int(pending)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, index: int, profile: int) -> dict[str, Any]:
        return dict(self._dev("nvmlDeviceGetGpuInstanceProfileInfo", index, str(profile)))

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, index: int, profile_id: int
    ) -> list[dict[str, int]]:
        function = "nvmlDeviceGetGpuInstancePossiblePlacements"
        return list(self._dev(function, index, str(profile_id)))

    def sysfs_pci_device(self, bus_id: str) -> str | None:
        found = self.data.get("sysfs", {}).get(f"/sys/bus/pci/devices/{bus_id.lower()}")
        return str(found) if found else None

    def sysfs_numa_node(self, bus_id: str) -> int | None:
        key = f"/sys/bus/pci/devices/{bus_id.lower()}/numa_node"
        found = self.data.get("sysfs", {}).get(key)
        return None if found is None else int(found)

    def nvmlDeviceGetTotalEccErrors(self, index: int, error_type: int, counter_type: int) -> int:
        function = "nvmlDeviceGetTotalEccErrors"
        return int(self._dev(function, index, f"{error_type}/{counter_type}"))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, index: int) -> int:
        return int(self._dev("nvmlDeviceGetRetiredPagesPendingStatus", index))

    def nvmlDeviceGetRemappedRows(self, index: int) -> tuple[int, int, int, int]:
        corrected, uncorrected, pending, failed = self._dev("nvmlDeviceGetRemappedRows", index)
        return int(corrected), int(uncorrected), int(pending), int(failed)

    def nvmlDeviceGetCurrentClocksEventReasons(self, index: int) -> int:
        return int(self._dev("nvmlDeviceGetCurrentClocksEventReasons", index))

    def nvmlDeviceGetUtilizationRates(self, index: int) -> dict[str, int]:
        return dict(self._dev("nvmlDeviceGetUtilizationRates", index))

    def nvmlDeviceGetTemperature(self, index: int, sensor: int) -> int:
        return int(self._dev("nvmlDeviceGetTemperature", index, str(sensor)))

    def nvmlDeviceGetPowerUsage(self, index: int) -> int:
        return int(self._dev("nvmlDeviceGetPowerUsage", index))

    def nvmlDeviceGetTotalEnergyConsumption(self, index: int) -> int:
        return int(self._dev("nvmlDeviceGetTotalEnergyConsumption", index))

    def nvmlEventSetCreate(self) -> Any:
        if "nvmlEventSetCreate" in self.data:  # an error to replay
            self._top("nvmlEventSetCreate")
        return self

    def nvmlDeviceRegisterEvents(self, index: int, event_types: int, event_set: Any) -> None:
        self._dev("nvmlDeviceRegisterEvents", index)
        self.registered[index] = self.registered.get(index, 0) | event_types

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> dict[str, int]:
        queue: list[dict[str, int]] = self.data.setdefault("events", [])
        while queue:
            event = dict(queue.pop(0))
            if "error" in event:
                raise NvmlCallError("nvmlEventSetWait", str(event["error"]))
            index = int(event.get("index", -1))
            if index < 0 or self.registered.get(index, 0) & int(event.get("eventType", 0)):
                return {"index": index, "gpuInstanceId": 0, "computeInstanceId": 0, **event}
        raise NvmlCallError("nvmlEventSetWait", "NVML_ERROR_TIMEOUT")

    def nvmlEventSetFree(self, event_set: Any) -> None:
        pass

    def mig_devices(self, index: int) -> list[dict[str, Any]]:
        return [dict(d) for d in self._dev("mig_devices", index)]

    # MIG instances: those `mig_devices` records (one compute instance, ID 0, each); a
    # snapshot is read-only, so creating or destroying one is not supported.
    def nvmlDeviceGetGpuInstances(self, index: int, profile_id: int) -> list[dict[str, Any]]:
        return [
            {
                "id": int(d["gpuInstanceId"]),
                "profileId": int(d["profileId"]),
                "placement": {"start": int(d["start"]), "size": int(d["size"])},
            }
            for d in self._dev("mig_devices", index)
            if int(d["profileId"]) == profile_id
        ]

    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, index: int, profile_id: int, start: int, size: int
    ) -> dict[str, Any]:
        raise NvmlCallError("nvmlDeviceCreateGpuInstanceWithPlacement", "NVML_ERROR_NOT_SUPPORTED")

    def nvmlGpuInstanceDestroy(self, index: int, gpu_instance_id: int) -> None:
        raise NvmlCallError("nvmlGpuInstanceDestroy", "NVML_ERROR_NOT_SUPPORTED")

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, index: int, gpu_instance_id: int, profile: int, eng_profile: int
    ) -> dict[str, Any]:
        function = "nvmlGpuInstanceGetComputeInstanceProfileInfo"
        raise NvmlCallError(function, "NVML_ERROR_NOT_SUPPORTED")

    def nvmlGpuInstanceCreateComputeInstance(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> dict[str, Any]:
        raise NvmlCallError("nvmlGpuInstanceCreateComputeInstance", "NVML_ERROR_NOT_SUPPORTED")

    def nvmlGpuInstanceGetComputeInstances(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> list[dict[str, Any]]:
        raise NvmlCallError("nvmlGpuInstanceGetComputeInstances", "NVML_ERROR_NOT_SUPPORTED")

    def nvmlComputeInstanceDestroy(
        self, index: int, gpu_instance_id: int, compute_instance_id: int
    ) -> None:
        raise NvmlCallError("nvmlComputeInstanceDestroy", "NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetMaxMigDeviceCount(self, index: int) -> int:
        self._dev("mig_devices", index)
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, index: int, mig_index: int) -> dict[str, Any]:
        devices = self._dev("mig_devices", index)
        if not 0 <= mig_index < len(devices):
            raise NvmlCallError("nvmlDeviceGetMigDeviceHandleByIndex", "NVML_ERROR_NOT_FOUND")
        found = devices[mig_index]
        return {
            "uuid": str(found["uuid"]),
            "gpuInstanceId": int(found["gpuInstanceId"]),
            "computeInstanceId": 0,
        }

    def mig_capability_minor(
        self, gpu_minor: int, gpu_instance_id: int, compute_instance_id: int | None
    ) -> int | None:
        return None

    def nvidia_caps_major(self) -> int | None:
        return None

    def shutdown(self) -> None:
        pass


def _try(call: Callable[..., Any], *args: Any) -> Any:
    """The answer, or `{"error": code}` as the snapshot stores a failed call."""
    try:
        return call(*args)
    except NvmlCallError as err:
        return {"error": err.code}


def record_snapshot(nvml: Nvml) -> dict[str, Any]:
    """Every NVML answer the inventory reads, in `SnapshotNvml`'s layout (JSON-ready)."""
    data: dict[str, Any] = {
        "nvmlSystemGetDriverVersion": _try(nvml.nvmlSystemGetDriverVersion),
        "nvmlSystemGetCudaDriverVersion": _try(nvml.nvmlSystemGetCudaDriverVersion),
        "nvmlDeviceGetCount": nvml.nvmlDeviceGetCount(),
        "devices": [],
        "sysfs": {},
    }
    for i in range(data["nvmlDeviceGetCount"]):
        dev: dict[str, Any] = {}
        for function in (
            "nvmlDeviceGetUUID",
            "nvmlDeviceGetName",
            "nvmlDeviceGetMinorNumber",
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetArchitecture",
            "nvmlDeviceGetCudaComputeCapability",
            "nvmlDeviceGetPciInfo",
            "nvmlDeviceGetAddressingMode",
            "nvmlDeviceGetMigMode",
        ):
            value = _try(getattr(nvml, function), i)
            dev[function] = list(value) if isinstance(value, tuple) else value
        mig = dev["nvmlDeviceGetMigMode"]
        if isinstance(mig, list) and mig[0] == MIG_ENABLED:
            infos: dict[str, Any] = {}
            placements: dict[str, Any] = {}
            for profile in range(GPU_INSTANCE_PROFILE_COUNT):
                info = _try(nvml.nvmlDeviceGetGpuInstanceProfileInfo, i, profile)
                infos[str(profile)] = info
                if "id" in info:
                    pid = int(info["id"])
                    placements[str(pid)] = _try(
                        nvml.nvmlDeviceGetGpuInstancePossiblePlacements, i, pid
                    )
            dev["nvmlDeviceGetGpuInstanceProfileInfo"] = infos
            dev["nvmlDeviceGetGpuInstancePossiblePlacements"] = placements
        pci = dev["nvmlDeviceGetPciInfo"]
        if "bus" in pci:
            bus_id = pci_bus_id(pci)
            data["sysfs"][f"/sys/bus/pci/devices/{bus_id}"] = nvml.sysfs_pci_device(bus_id)
            numa_key = f"/sys/bus/pci/devices/{bus_id}/numa_node"
            data["sysfs"][numa_key] = nvml.sysfs_numa_node(bus_id)
        data["devices"].append(dev)
    return data


# --- from NVML answers to devices -------------------------------------------------------


def normalize_version(text: str) -> str:
    """NVIDIA's `580.95.05` as semver `580.95.5` (leading zeros dropped, three parts)."""
    parts = [str(int(p)) for p in re.findall(r"\d+", text)][:3]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def cuda_version(value: int) -> str:
    """nvmlSystemGetCudaDriverVersion's 13000 / 12080 as `13.0.0` / `12.8.0`."""
    return f"{value // 1000}.{value % 1000 // 10}.0"


def pci_bus_id(pci: dict[str, Any]) -> str:
    """`0000:18:00.0` from NVML's PCI info (domain 4 hex digits, function 0), lower case."""
    return f"{int(pci['domain']):04x}:{int(pci['bus']):02x}:{int(pci['device']):02x}.0"


def pcie_root(sysfs_path: str | None) -> str | None:
    """`pci0000:15` from /sys/devices/pci0000:15/0000:15:01.0/.../0000:18:00.0."""
    if not sysfs_path:
        return None
    parts = Path(sysfs_path).parts
    if len(parts) > 3 and parts[:3] == ("/", "sys", "devices") and _PCIE_ROOT.match(parts[3]):
        return parts[3]
    return None


def _optional(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except NvmlCallError:
        return None


def _attr_s(value: str) -> DeviceAttribute:
    return DeviceAttribute(string=value)


def gpu_inventory(nvml: Nvml) -> DriverInventory:
    """The `gpu.nvidia.com` devices (and MIG counter sets) of this machine."""
    driver_version = normalize_version(nvml.nvmlSystemGetDriverVersion())
    cuda = _optional(nvml.nvmlSystemGetCudaDriverVersion)
    devices: list[Device] = []
    counter_sets: list[CounterSet] = []
    for index in range(nvml.nvmlDeviceGetCount()):
        uuid = nvml.nvmlDeviceGetUUID(index)
        minor = nvml.nvmlDeviceGetMinorNumber(index)
        major_cc, minor_cc = nvml.nvmlDeviceGetCudaComputeCapability(index)
        pci = nvml.nvmlDeviceGetPciInfo(index)
        bus_id = pci_bus_id(pci)
        common: dict[str, DeviceAttribute] = {
            "productName": _attr_s(nvml.nvmlDeviceGetName(index)),
            "brand": _attr_s("Nvidia"),
            "architecture": _attr_s(
                ARCHITECTURES.get(nvml.nvmlDeviceGetArchitecture(index), "Unknown")
            ),
            "cudaComputeCapability": DeviceAttribute(version=f"{major_cc}.{minor_cc}.0"),
            "driverVersion": DeviceAttribute(version=driver_version),
        }
        if cuda is not None:
            common["cudaDriverVersion"] = DeviceAttribute(version=cuda_version(cuda))
        mode = ADDRESSING_MODES.get(_optional(nvml.nvmlDeviceGetAddressingMode, index))
        if mode:
            common["addressingMode"] = _attr_s(mode)
        common[PCI_BUS_ID] = _attr_s(bus_id)
        root = pcie_root(nvml.sysfs_pci_device(bus_id))
        if root:
            common[PCIE_ROOT] = _attr_s(root)
        else:
            log_event(log, "pcieRoot not derivable, attribute omitted", bus_id=bus_id)
        numa = nvml.sysfs_numa_node(bus_id)
        if numa is not None and numa >= 0:  # -1: no NUMA affinity, attribute omitted
            common[NUMA_NODE] = DeviceAttribute(int_=numa)
        attributes = {
            "type": _attr_s("gpu"),
            "uuid": _attr_s(uuid),
            "index": DeviceAttribute(int_=index),
            "minor": DeviceAttribute(int_=minor),
            **common,
            "pcieBusID": _attr_s(bus_id),
        }
        memory = Quantity.from_int(nvml.nvmlDeviceGetMemoryInfo(index)["total"], Format.BINARY_SI)
        mig_mode = _optional(nvml.nvmlDeviceGetMigMode, index)
        if not mig_mode or mig_mode[0] != MIG_ENABLED:
            devices.append(
                Device(
                    name=f"gpu-{minor}",
                    attributes=attributes,
                    capacity={"memory": DeviceCapacity(value=memory)},
                )
            )
            continue
        gpu_devices, counter_set = _mig_devices(nvml, index, minor, uuid, attributes, common)
        devices += gpu_devices
        counter_sets.append(counter_set)
    return DriverInventory(DRIVER, tuple(devices), tuple(counter_sets))


def _mig_devices(
    nvml: Nvml,
    index: int,
    minor: int,
    uuid: str,
    attributes: dict[str, DeviceAttribute],
    common: dict[str, DeviceAttribute],
) -> tuple[list[Device], CounterSet]:
    """The GPU's MIG profiles and placements as NVML reports them, published through the
    same builder as the simulated catalog (so both model MIG identically)."""
    return partitioned_gpu(minor, uuid, attributes, common, mig_geometry(nvml, index))


def mig_geometry(nvml: Nvml, index: int) -> MigGeometry:
    """The MIG profiles and placements of GPU `index` as NVML reports them (the GPU-instance
    profiles it supports, each with its possible placements)."""
    profiles = []
    for profile in range(GPU_INSTANCE_PROFILE_COUNT):
        info = _optional(nvml.nvmlDeviceGetGpuInstanceProfileInfo, index, profile)
        if not info or not info.get("instanceCount"):
            continue
        placements = _optional(
            nvml.nvmlDeviceGetGpuInstancePossiblePlacements, index, int(info["id"])
        )
        if not placements:
            continue
        counts = {cap: int(info[field]) for cap, _, field in _DIMENSIONS}
        profiles.append(
            MigProfile(
                name=str(info.get("name", "")).removeprefix("MIG ").strip(),
                profile_id=int(info["id"]),
                memory_slices=int(placements[0]["size"]),
                placements=tuple(int(p["start"]) for p in placements),
                multiprocessors=counts["multiprocessors"],
                copy_engines=counts["copyEngines"],
                decoders=counts["decoders"],
                encoders=counts["encoders"],
                jpeg_engines=counts["jpegEngines"],
                ofa_engines=counts["ofaEngines"],
                memory=f"{int(info['memorySizeMB'])}Mi",
            )
        )
    slices = max((max(p.placements) + p.memory_slices for p in profiles), default=0)
    return MigGeometry(memory_slices=slices, profiles=tuple(profiles))


# --- health ------------------------------------------------------------------------------

XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError
# Xids NVIDIA's device plugin and DRA driver treat as the application's errors, not the GPU's:
# 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped processing,
# 45 preemptive cleanup, 68 video processor exception, 109 context switch timeout.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
XID_MEANINGS = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
MEMORY_ERROR_CORRECTED, MEMORY_ERROR_UNCORRECTED = 0, 1  # NVML_MEMORY_ERROR_TYPE_*
VOLATILE_ECC = 0  # NVML_VOLATILE_ECC: since the driver loaded
TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
FEATURE_ENABLED = 1  # NVML_FEATURE_ENABLED
SW_THERMAL_SLOWDOWN = 0x20  # nvmlClocksEventReasonSwThermalSlowdown
HW_THERMAL_SLOWDOWN = 0x40  # nvmlClocksEventReasonHwThermalSlowdown
HW_POWER_BRAKE_SLOWDOWN = 0x80  # nvmlClocksEventReasonHwPowerBrakeSlowdown
GPU_IS_LOST = "NVML_ERROR_GPU_IS_LOST"
_UNSUPPORTED = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")
_EVENTS_PER_CHECK = 256  # events taken at one check at most (the rest wait for the next)
_MIG_NAME = re.compile(r"^(gpu-\d+)-mig-.+-(\d+)-(\d+)$")


class _Lost(Exception):
    """A query answered NVML_ERROR_GPU_IS_LOST."""


class _Queries:
    """NVML queries that may fail: an answer or None, `_Lost` for a lost GPU. A call a GPU
    does not support is not asked again (retired pages on Ampere and later, say)."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self._unsupported: set[tuple[str, int]] = set()
        self._names: dict[int, str] = {}
        self._uuids: dict[int, tuple[str, str]] = {}
        self.count = 0

    def ask(self, function: str, index: int, *args: Any) -> Any:
        if (function, index) in self._unsupported:
            return None
        try:
            return getattr(self.nvml, function)(index, *args)
        except NvmlCallError as err:
            if err.code == GPU_IS_LOST:
                raise _Lost from None
            if err.code in _UNSUPPORTED:
                self._unsupported.add((function, index))
            return None

    def gpus(self) -> int:
        if not self.count:
            self.count = int(self.nvml.nvmlDeviceGetCount())
        return self.count

    def name(self, index: int) -> str | None:
        """`gpu-<minor>`, as the inventory names the GPU (learned once)."""
        name = self._names.get(index)
        if name is None:
            try:
                name = self._names[index] = f"gpu-{self.nvml.nvmlDeviceGetMinorNumber(index)}"
            except NvmlCallError:
                return None  # a GPU lost before it was ever seen: not published either
        return name

    def identity(self, index: int) -> tuple[str, str]:
        """(uuid, product name) of a GPU (learned once; empty while unknown)."""
        found = self._uuids.get(index)
        if found is None:
            try:
                uuid, model = self.nvml.nvmlDeviceGetUUID(index), self.nvml.nvmlDeviceGetName(index)
            except NvmlCallError:
                return "", ""
            found = self._uuids[index] = (uuid, model)
        return found


def mig_parent(name: str) -> str | None:
    """`gpu-6` for a MIG device `gpu-6-mig-3g40gb-9-4`; None for anything else."""
    found = _MIG_NAME.match(name)
    return found.group(1) if found else None


def mig_placement(name: str) -> tuple[str, int, int] | None:
    """(`gpu-6`, profile ID 9, start 4) for a MIG device `gpu-6-mig-3g40gb-9-4`; None for
    anything else."""
    found = _MIG_NAME.match(name)
    return (found.group(1), int(found.group(2)), int(found.group(3))) if found else None


def with_mig_devices(
    faults: Mapping[str, tuple[Fault, ...]], devices: Iterable[str]
) -> dict[str, tuple[Fault, ...]]:
    """`faults` (per GPU) with each GPU's faults given to its MIG devices in `devices`."""
    out = dict(faults)
    for name in devices:
        parent = mig_parent(name)
        if parent is not None and parent in faults:
            out[name] = faults[parent]
    return out


class NvmlHealth:
    """Each GPU's faults now (device name -> faults), as the health monitor asks at every
    check (`Backend.health_report`):

    - lost: any query answering NVML_ERROR_GPU_IS_LOST (the GPU fell off the bus);
    - xid: a critical Xid error event (nvmlEventTypeXidCriticalError), taken from an NVML
      event set without waiting at each check, except `ignored_xids` (the application's
      errors); the first one seen stays the GPU's fault until the driver restarts, as
      NVIDIA's driver keeps it: NVML tells no recovery from an Xid;
    - ecc: double-bit ECC errors since the driver loaded (value `dbe`), a row remapping
      that failed (`remap-failed`) or is pending (`pending-remap`: Ampere and later), pages
      waiting for retirement (`pending-retirement`: before Ampere);
    - thermal: HW or SW thermal slowdown among the clock event reasons; power: HW power
      brake slowdown.

    A MIG device has its GPU's faults (`devices`: the names published, MIG ones among them).
    """

    def __init__(
        self,
        nvml: Nvml,
        ignored_xids: Collection[int] = APPLICATION_XIDS,
        devices: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        self.nvml, self.ignored_xids, self.devices = nvml, frozenset(ignored_xids), devices
        self.queries = _Queries(nvml)
        self._xids: dict[int, Fault] = {}  # NVML index -> the first critical Xid seen
        self._events: Any = None
        self._register()

    def _register(self) -> None:
        """An event set with every GPU registered for critical Xids (a GPU that cannot
        report them, a vGPU say, is checked by its queries alone)."""
        try:
            self._events = self.nvml.nvmlEventSetCreate()
        except NvmlCallError as err:
            log_event(log, "no NVML events: Xid errors are not watched", error=str(err))
            return
        for index in range(self.queries.gpus()):
            try:
                self.nvml.nvmlDeviceRegisterEvents(index, XID_CRITICAL_ERROR, self._events)
            except NvmlCallError as err:
                log_event(log, "GPU reports no Xid events", index=index, error=err.code)

    def __call__(self) -> dict[str, tuple[Fault, ...]]:
        self._take_events()
        faults: dict[str, tuple[Fault, ...]] = {}
        for index in range(self.queries.gpus()):
            name = self.queries.name(index)
            if name is None:
                continue
            found = self._faults(index)
            if found:
                faults[name] = tuple(found)
        return with_mig_devices(faults, self.devices())

    def _faults(self, index: int) -> list[Fault]:
        try:
            found = self._queried(index)
        except _Lost:
            found = [Fault(FaultKind.LOST, "", "GPU has fallen off the bus (GPU_IS_LOST)")]
        xid = self._xids.get(index)
        return [*found, xid] if xid is not None else found

    def _queried(self, index: int) -> list[Fault]:
        ask, found = self.queries.ask, []
        dbe = ask("nvmlDeviceGetTotalEccErrors", index, MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC)
        rows = ask("nvmlDeviceGetRemappedRows", index)
        if dbe:
            found.append(Fault(FaultKind.ECC, "dbe", f"{dbe} double-bit ECC error(s)"))
        elif rows and rows[3]:
            found.append(Fault(FaultKind.ECC, "remap-failed", "row remapping failed"))
        elif rows and rows[2]:
            text = "row remapping pending (reset the GPU)"
            found.append(Fault(FaultKind.ECC, "pending-remap", text))
        elif ask("nvmlDeviceGetRetiredPagesPendingStatus", index) == FEATURE_ENABLED:
            text = "pages pending retirement (reset the GPU)"
            found.append(Fault(FaultKind.ECC, "pending-retirement", text))
        reasons = ask("nvmlDeviceGetCurrentClocksEventReasons", index) or 0
        if reasons & (HW_THERMAL_SLOWDOWN | SW_THERMAL_SLOWDOWN):
            which = "HW" if reasons & HW_THERMAL_SLOWDOWN else "SW"
            found.append(Fault(FaultKind.THERMAL, "slowdown", f"{which} thermal slowdown"))
        if reasons & HW_POWER_BRAKE_SLOWDOWN:
            found.append(Fault(FaultKind.POWER, "brake", "HW power brake slowdown"))
        return found

    def _take_events(self) -> None:
        """The events that came since the last check, without waiting."""
        if self._events is None:
            return
        for _ in range(_EVENTS_PER_CHECK):
            try:
                event = self.nvml.nvmlEventSetWait(self._events, 0)
            except NvmlCallError:  # NVML_ERROR_TIMEOUT: none left (a lost GPU: its queries say)
                return
            if not int(event.get("eventType", 0)) & XID_CRITICAL_ERROR:
                continue
            xid = int(event.get("eventData", 0))
            if xid in self.ignored_xids:
                continue
            index = int(event.get("index", -1))
            meaning = XID_MEANINGS.get(xid)
            fault = Fault(
                FaultKind.XID,
                str(xid),
                f"Xid {xid}: {meaning}" if meaning else f"Xid {xid}: critical error",
            )
            # An event naming no GPU counts for all of them (NVIDIA's device plugin does so).
            for gpu in [index] if index >= 0 else range(self.queries.gpus()):
                if gpu not in self._xids:
                    log_event(log, "critical Xid", index=gpu, xid=xid)
                    self._xids[gpu] = fault


def nvml_health(
    nvml: Nvml, devices: Iterable[str] = (), ignored_xids: Collection[int] = APPLICATION_XIDS
) -> Mapping[str, Sequence[Fault]]:
    """Each GPU's faults now, from one look (events included): `NvmlHealth` once."""
    names = tuple(devices)
    return NvmlHealth(nvml, ignored_xids, lambda: names)()


# --- samples for the metrics -------------------------------------------------------------


class NvmlSampler:
    """Every GPU's figures for the metrics, and those of the MIG devices that exist (memory
    only: NVML has no utilization, temperature or power per MIG device). A GPU that is lost
    is left out (its health says why)."""

    def __init__(self, nvml: Nvml, devices: Callable[[], Iterable[str]] = tuple) -> None:
        self.nvml, self.devices = nvml, devices
        self.queries = _Queries(nvml)

    def __call__(self, in_use: Collection[str] = ()) -> list[DeviceSample]:
        out: list[DeviceSample] = []
        mig_names: dict[tuple[str, int, int], str] | None = None
        for index in range(self.queries.gpus()):
            name = self.queries.name(index)
            if name is None:
                continue
            try:
                out.append(self._gpu(index, name))
                mode = self.queries.ask("nvmlDeviceGetMigMode", index)
                if not mode or mode[0] != MIG_ENABLED:
                    continue
                if mig_names is None:
                    mig_names = self._mig_names()
                out += self._migs(index, name, mig_names)
            except _Lost:
                continue
        return out

    def _gpu(self, index: int, name: str) -> DeviceSample:
        ask = self.queries.ask
        uuid, model = self.queries.identity(index)
        rates = ask("nvmlDeviceGetUtilizationRates", index)
        memory = ask("nvmlDeviceGetMemoryInfo", index)
        power = ask("nvmlDeviceGetPowerUsage", index)
        energy = ask("nvmlDeviceGetTotalEnergyConsumption", index)
        return DeviceSample(
            device=name,
            uuid=uuid,
            model=model,
            utilization=rates["gpu"] / 100 if rates else None,
            memory_utilization=rates["memory"] / 100 if rates else None,
            memory_used_bytes=int(memory["used"]) if memory else None,
            memory_total_bytes=int(memory["total"]) if memory else None,
            temperature_celsius=ask("nvmlDeviceGetTemperature", index, TEMPERATURE_GPU),
            power_watts=power / 1000 if power is not None else None,
            energy_joules=energy / 1000 if energy is not None else None,
            ecc_single=ask(
                "nvmlDeviceGetTotalEccErrors", index, MEMORY_ERROR_CORRECTED, VOLATILE_ECC
            ),
            ecc_double=ask(
                "nvmlDeviceGetTotalEccErrors", index, MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC
            ),
        )

    def _mig_names(self) -> dict[tuple[str, int, int], str]:
        """(GPU, profile ID, placement start) -> the MIG device's published name."""
        out = {}
        for name in self.devices():
            found = _MIG_NAME.match(name)
            if found:
                out[(found.group(1), int(found.group(2)), int(found.group(3)))] = name
        return out

    def _migs(
        self, index: int, gpu: str, names: Mapping[tuple[str, int, int], str]
    ) -> list[DeviceSample]:
        model = self.queries.identity(index)[1]
        out = []
        for mig in self.queries.ask("mig_devices", index) or ():
            name = names.get((gpu, int(mig["profileId"]), int(mig["start"])))
            if name is None:  # a MIG device the driver does not publish (made by hand)
                continue
            memory = mig.get("memory") or {}
            out.append(
                DeviceSample(
                    device=name,
                    uuid=str(mig.get("uuid", "")),
                    model=model,
                    memory_used_bytes=memory.get("used"),
                    memory_total_bytes=memory.get("total"),
                )
            )
        return out


# --- the backend -------------------------------------------------------------------------


class NvmlBackend:
    """The `nvml` backend of the node agent (driver `gpu.nvidia.com`). `ignored_xids`: the
    Xid errors that do not make a GPU unhealthy (default: NVIDIA's application errors)."""

    name = "nvml"

    def __init__(self, nvml: Nvml, ignored_xids: Collection[int] = APPLICATION_XIDS) -> None:
        self.nvml = nvml
        self.ignored_xids = frozenset(ignored_xids)
        self._names: tuple[str, ...] = ()  # the devices last published (MIG ones included)

    @classmethod
    def open(cls, ignored_xids: Collection[int] = APPLICATION_XIDS) -> NvmlBackend:
        return cls(PynvmlApi(), ignored_xids)

    def inventories(self) -> list[DriverInventory]:
        inventory = gpu_inventory(self.nvml)
        self._names = tuple(d.name for d in inventory.devices)
        return [inventory]

    def node(self) -> Node | None:
        return None

    def cdi_host(self) -> CdiHost:
        """The GPUs' nodes are the host's; the driver's libraries come from the host too."""
        return CdiHost(stand_ins=False, mounts=driver_files())

    def mig_nvml(self, driver: str, plugin_dir: Path) -> Nvml | None:
        """The machine's NVML makes the MIG instances (GPUs not in MIG mode have none)."""
        return self.nvml if driver == DRIVER else None

    def health_report(self, plugin_dir: Path) -> Callable[[], Mapping[str, Sequence[Fault]]]:
        """The GPUs' faults from NVML's queries and events (`NvmlHealth`)."""
        return NvmlHealth(self.nvml, self.ignored_xids, lambda: self._names)

    def device_sampler(self, driver: str, plugin_dir: Path) -> Sampler:
        """The GPUs' (and existing MIG devices') figures from NVML (`NvmlSampler`)."""
        if driver != DRIVER:
            return no_samples
        return NvmlSampler(self.nvml, lambda: self._names)

    def close(self) -> None:
        self.nvml.shutdown()
