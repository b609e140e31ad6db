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
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
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
from kubedra.driver.health import Fault
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
MIG_ENABLED = 1  # NVML_DEVICE_MIG_ENABLE
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

    def shutdown(self) -> None: ...


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

    def _call(self, function: str, *args: Any) -> Any:
        try:
            return getattr(self._nvml, function)(*args)
        except self._nvml.NVMLError as err:
            raise NvmlCallError(function, _error_name(self._nvml, err)) from None

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
    resolved PCI device paths.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

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
    return partitioned_gpu(minor, uuid, attributes, common, _mig_geometry(nvml, index))


def _mig_geometry(nvml: Nvml, index: int) -> MigGeometry:
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


class NvmlBackend:
    """The `nvml` backend of the node agent (driver `gpu.nvidia.com`)."""

    name = "nvml"

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml

    @classmethod
    def open(cls) -> NvmlBackend:
        return cls(PynvmlApi())

    def inventories(self) -> list[DriverInventory]:
        return [gpu_inventory(self.nvml)]

    def node(self) -> Node | None:
        return None

    def cdi_host(self) -> CdiHost:
        """The GPUs' nodes are the host's; the driver's libraries come from the host too."""
        return CdiHost(stand_ins=False, mounts=driver_files())

    def health_report(self, plugin_dir: Path) -> Callable[[], Mapping[str, Sequence[Fault]]]:
        """The GPUs' faults from NVML's queries and events (`nvml_health`)."""
        return lambda: nvml_health(self.nvml)

    def close(self) -> None:
        self.nvml.shutdown()


def nvml_health(nvml: Nvml) -> Mapping[str, Sequence[Fault]]:
    """Each GPU's faults now (device name -> faults). The queries come in the next step of
    this work; until then every GPU NVML answers for is reported healthy."""
    return {}
