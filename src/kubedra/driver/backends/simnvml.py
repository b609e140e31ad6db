"""A simulated NVML: the GPUs of a catalog profile in MIG mode, whose GPU and compute instances
are made and destroyed as NVML makes and destroys them, and outlive the driver.

`SimulatedNvml` answers the same `Nvml` protocol as `PynvmlApi` (the inventory calls, the
health and metrics calls of a healthy GPU, and the MIG calls), so the driver's MIG code
(`kubedra.driver.mig`) runs unchanged against it: only the object behind the protocol differs.

The GPUs are the profile's (UUIDs, minors, PCI addresses and product as the catalog publishes
them); MIG geometry is the catalog's `MigGeometry` of the model. NVML's rules, as the MIG user
guide and the NVML reference describe them, are kept:
- a GPU instance is made with one of its profile's legal placements (start slice and size as
  `nvidia-smi mig -lgipp` lists them); any other start or size is NVML_ERROR_INVALID_ARGUMENT,
  as is a profile the GPU does not have;
- it may not share a memory slice with an existing instance, and the instances of a GPU
  together may not use more compute slices, SMs, copy engines, decoders, encoders, JPEG or OFA
  engines or memory than the whole GPU has (the amounts the driver publishes as the GPU's
  counter set): NVML_ERROR_INSUFFICIENT_RESOURCES;
- a compute instance takes a profile of at most its GPU instance's compute slices; a GPU
  instance that still has compute instances cannot be destroyed (NVML_ERROR_IN_USE); an ID
  that names nothing is NVML_ERROR_NOT_FOUND;
- every compute instance is a MIG device with its own `MIG-<uuid>`, new at each creation.

The instances live in a JSON state file (in the driver's plugin directory), read at every
call and rewritten under an exclusive lock, so they survive a restart of the driver as real
instances do, and a second process (a test, an operator's tool) sees and changes the same
GPUs. The capability minors (/dev/nvidia-caps/nvidia-cap<N>) follow the numbering the NVIDIA
driver uses (two global capabilities, then per GPU 15 GPU instances of one access file and
eight compute-instance access files each); the major is a stand-in (`cdi.STAND_IN_CAPS_MAJOR`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

from kubedra.api.quantity import Quantity
from kubedra.catalog.gpus import MigGeometry, MigProfile, compute_slices
from kubedra.catalog.inventory import gpu_functions
from kubedra.catalog.nvidia import DriverStack, gpu_uuid
from kubedra.catalog.profiles import Profile
from kubedra.driver import files
from kubedra.driver.backends.nvml import (
    ADDRESSING_MODES,
    ARCHITECTURES,
    COMPUTE_INSTANCE_PROFILE_COUNT,
    GPU_INSTANCE_PROFILE_COUNT,
    MIG_ENABLED,
    NvmlCallError,
)
from kubedra.driver.cdi import STAND_IN_CAPS_MAJOR

STATE_FILE = "simulated-nvml.json"
LOCK_FILE = "simulated-nvml.lock"
MIB = 1 << 20
# GPU-instance profile ID -> NVML_GPU_INSTANCE_PROFILE_* index (the argument of
# nvmlDeviceGetGpuInstanceProfileInfo), as NVML pairs them on A100, H100, H200 and B200:
# 1_SLICE 19, 2_SLICE 14, 3_SLICE 9, 4_SLICE 5, 7_SLICE 0, 1_SLICE_REV1 (+me) 20,
# 1_SLICE_REV2 (the 1g with two memory slices) 15.
PROFILE_INDEX = {19: 0x0, 14: 0x1, 9: 0x2, 5: 0x3, 0: 0x4, 20: 0x7, 15: 0x9}
# NVML_COMPUTE_INSTANCE_PROFILE_* index -> compute slices (the 1..8-slice profiles).
COMPUTE_PROFILE_SLICES = {0x0: 1, 0x1: 2, 0x2: 3, 0x3: 4, 0x4: 7, 0x5: 8, 0x6: 6}
MAX_MIG_DEVICES = 7  # nvmlDeviceGetMaxMigDeviceCount on a 7-slice GPU
GPU_INSTANCE_IDS = 15  # IDs per GPU in the driver's capability numbering
COMPUTE_INSTANCE_IDS = 8
_GLOBAL_CAPS = 2  # config and monitor come first
_ARCHITECTURE_CODES = {name: code for code, name in ARCHITECTURES.items()}
_ADDRESSING_CODES = {name: code for code, name in ADDRESSING_MODES.items()}
# (NVML profile-info field, MigProfile field): the budgets of a GPU's instances.
_BUDGETS = (
    ("multiprocessorCount", "multiprocessors"),
    ("copyEngineCount", "copy_engines"),
    ("decoderCount", "decoders"),
    ("encoderCount", "encoders"),
    ("jpegCount", "jpeg_engines"),
    ("ofaCount", "ofa_engines"),
)


@dataclass(frozen=True)
class _Gpu:
    index: int
    uuid: str
    bus_id: str
    pcie_root: str
    numa_node: int


def _fail(function: str, code: str) -> NvmlCallError:
    return NvmlCallError(function, f"NVML_ERROR_{code}")


def _memory_mib(profile: MigProfile) -> int:
    return Quantity.parse(profile.memory).value() // MIB


def _amounts(profile: MigProfile) -> dict[str, int]:
    """What one instance of `profile` takes of its GPU (NVML's profile-info names)."""
    out = {field: int(getattr(profile, attr)) for field, attr in _BUDGETS}
    out["sliceCount"] = compute_slices(profile.name)
    out["memorySizeMB"] = _memory_mib(profile)
    return out


class SimulatedNvml:
    """`Nvml` over the GPUs of catalog profile `profile` on node `node`, all in MIG mode, their
    instances kept in `state` (a JSON file; its directory is made on the first write)."""

    def __init__(self, profile: Profile, node: str, state: Path) -> None:
        if profile.gpu is None or profile.gpu.mig is None:
            raise ValueError(f"profile {profile.name!r} has no MIG-capable GPUs")
        self.profile, self.node, self.state = profile, node, state
        self.spec = profile.gpu
        self.geometry: MigGeometry = profile.gpu.mig
        self.stack = DriverStack()
        self._gpus = tuple(
            _Gpu(i, gpu_uuid(node, i), fn.bus_id, fn.pcie_root, fn.numa_node)
            for i, fn in enumerate(gpu_functions(profile.pcie))
        )
        whole = [_amounts(p) for p in self.geometry.profiles]
        self.whole = {key: max(a[key] for a in whole) for key in whole[0]}
        self.whole["sliceCount"] = self.geometry.compute_slices
        if state.parent.is_dir():  # a write cut short by a kill left its temporary
            with self._lock():
                files.remove_temporaries(state.parent, state.name)

    # --- the state file -------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.state.read_text())
        except FileNotFoundError:
            return {"gpus": {}}
        return data

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Exclusive use of the state file (among all processes that open it)."""
        folder = files.ensure_dir(self.state.parent, files.PLUGIN_DIR_MODE)
        with open(files.child(folder, LOCK_FILE), "ab") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            yield

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The state, changed in place by the caller and written back when it returns."""
        with self._lock():
            state = self._read()
            yield state
            data = json.dumps(state, indent=1, sort_keys=True).encode() + b"\n"
            files.atomic_write(self.state, data, files.CHECKPOINT_MODE)

    def _instances(self, state: dict[str, Any], index: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = state["gpus"].setdefault(str(index), [])
        return found

    def _gpu(self, function: str, index: int) -> _Gpu:
        if not 0 <= index < len(self._gpus):
            raise _fail(function, "INVALID_ARGUMENT")
        return self._gpus[index]

    def _profile(self, function: str, profile_id: int) -> MigProfile:
        for p in self.geometry.profiles:
            if p.profile_id == profile_id:
                return p
        raise _fail(function, "INVALID_ARGUMENT")

    @staticmethod
    def _gi(function: str, instances: list[dict[str, Any]], gi_id: int) -> dict[str, Any]:
        for gi in instances:
            if gi["id"] == gi_id:
                return gi
        raise _fail(function, "NOT_FOUND")

    # --- system and inventory -------------------------------------------------------------

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.stack.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        major, minor, _ = (int(p) for p in self.stack.cuda_driver_version.split("."))
        return major * 1000 + minor * 10

    def nvmlDeviceGetCount(self) -> int:
        return len(self._gpus)

    def nvmlDeviceGetUUID(self, index: int) -> str:
        return self._gpu("nvmlDeviceGetUUID", index).uuid

    def nvmlDeviceGetName(self, index: int) -> str:
        self._gpu("nvmlDeviceGetName", index)
        return self.spec.product_name

    def nvmlDeviceGetMinorNumber(self, index: int) -> int:
        return self._gpu("nvmlDeviceGetMinorNumber", index).index  # as the catalog has them

    def nvmlDeviceGetMemoryInfo(self, index: int) -> dict[str, int]:
        self._gpu("nvmlDeviceGetMemoryInfo", index)
        total = Quantity.parse(self.spec.memory).value()
        return {"total": total, "free": total, "used": 0}

    def nvmlDeviceGetArchitecture(self, index: int) -> int:
        self._gpu("nvmlDeviceGetArchitecture", index)
        return _ARCHITECTURE_CODES.get(self.spec.architecture, 0)

    def nvmlDeviceGetCudaComputeCapability(self, index: int) -> tuple[int, int]:
        self._gpu("nvmlDeviceGetCudaComputeCapability", index)
        major, minor, _ = self.spec.compute_capability.split(".")
        return int(major), int(minor)

    def nvmlDeviceGetPciInfo(self, index: int) -> dict[str, Any]:
        gpu = self._gpu("nvmlDeviceGetPciInfo", index)
        domain, bus, rest = gpu.bus_id.split(":")
        device = rest.split(".")[0]
        return {
            "busIdLegacy": gpu.bus_id.upper(),
            "domain": int(domain, 16),
            "bus": int(bus, 16),
            "device": int(device, 16),
            "busId": f"0000{gpu.bus_id}".upper(),
        }

    def nvmlDeviceGetAddressingMode(self, index: int) -> int:
        self._gpu("nvmlDeviceGetAddressingMode", index)
        return _ADDRESSING_CODES.get(self.stack.addressing_mode, 0)

    def nvmlDeviceGetMigMode(self, index: int) -> tuple[int, int]:
        self._gpu("nvmlDeviceGetMigMode", index)
        return MIG_ENABLED, MIG_ENABLED

    def nvmlDeviceGetGpuInstanceProfileInfo(self, index: int, profile: int) -> dict[str, Any]:
        function = "nvmlDeviceGetGpuInstanceProfileInfo"
        self._gpu(function, index)
        if not 0 <= profile < GPU_INSTANCE_PROFILE_COUNT:
            raise _fail(function, "INVALID_ARGUMENT")
        for p in self.geometry.profiles:
            if PROFILE_INDEX.get(p.profile_id) == profile:
                amounts = _amounts(p)
                # As many as fit at once: its placements, and each budget of the GPU.
                fits = [len(p.placements)] + [
                    self.whole[key] // amount for key, amount in amounts.items() if amount
                ]
                return {
                    "id": p.profile_id,
                    "isP2pSupported": 0,
                    "instanceCount": min(fits),
                    **amounts,
                    "name": f"MIG {p.name}",
                }
        raise _fail(function, "NOT_SUPPORTED")

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, index: int, profile_id: int
    ) -> list[dict[str, int]]:
        function = "nvmlDeviceGetGpuInstancePossiblePlacements"
        self._gpu(function, index)
        p = self._profile(function, profile_id)
        return [{"start": start, "size": p.memory_slices} for start in p.placements]

    def sysfs_pci_device(self, bus_id: str) -> str | None:
        for gpu in self._gpus:
            if gpu.bus_id == bus_id.lower():
                return f"/sys/devices/{gpu.pcie_root}/{gpu.bus_id}"
        return None

    def sysfs_numa_node(self, bus_id: str) -> int | None:
        for gpu in self._gpus:
            if gpu.bus_id == bus_id.lower():
                return gpu.numa_node
        return None

    # --- health and metrics: healthy, idle GPUs -------------------------------------------

    def nvmlDeviceGetTotalEccErrors(self, index: int, error_type: int, counter_type: int) -> int:
        self._gpu("nvmlDeviceGetTotalEccErrors", index)
        return 0

    def nvmlDeviceGetRetiredPagesPendingStatus(self, index: int) -> int:
        raise _fail("nvmlDeviceGetRetiredPagesPendingStatus", "NOT_SUPPORTED")  # Ampere+

    def nvmlDeviceGetRemappedRows(self, index: int) -> tuple[int, int, int, int]:
        self._gpu("nvmlDeviceGetRemappedRows", index)
        return 0, 0, 0, 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, index: int) -> int:
        self._gpu("nvmlDeviceGetCurrentClocksEventReasons", index)
        return 0x1  # nvmlClocksEventReasonGpuIdle

    def nvmlDeviceGetUtilizationRates(self, index: int) -> dict[str, int]:
        self._gpu("nvmlDeviceGetUtilizationRates", index)
        return {"gpu": 0, "memory": 0}

    def nvmlDeviceGetTemperature(self, index: int, sensor: int) -> int:
        self._gpu("nvmlDeviceGetTemperature", index)
        return 32

    def nvmlDeviceGetPowerUsage(self, index: int) -> int:
        self._gpu("nvmlDeviceGetPowerUsage", index)
        return 60_000

    def nvmlDeviceGetTotalEnergyConsumption(self, index: int) -> int:
        self._gpu("nvmlDeviceGetTotalEnergyConsumption", index)
        return 0

    def nvmlEventSetCreate(self) -> Any:
        return self

    def nvmlDeviceRegisterEvents(self, index: int, event_types: int, event_set: Any) -> None:
        self._gpu("nvmlDeviceRegisterEvents", index)

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> dict[str, int]:
        raise _fail("nvmlEventSetWait", "TIMEOUT")

    def nvmlEventSetFree(self, event_set: Any) -> None:
        pass

    def mig_devices(self, index: int) -> list[dict[str, Any]]:
        self._gpu("mig_devices", index)
        out = []
        for gi in self._instances(self._read(), index):
            if not gi["computeInstances"]:
                continue
            memory = self._profile("mig_devices", gi["profileId"])
            total = _memory_mib(memory) * MIB
            out.append({
                "uuid": gi["computeInstances"][0]["uuid"],
                "gpuInstanceId": gi["id"],
                "profileId": gi["profileId"],
                "start": gi["start"],
                "size": gi["size"],
                "memory": {"total": total, "free": total, "used": 0},
            })  # fmt: skip
        return out

    # --- MIG instances --------------------------------------------------------------------

    def nvmlDeviceGetGpuInstances(self, index: int, profile_id: int) -> list[dict[str, Any]]:
        function = "nvmlDeviceGetGpuInstances"
        self._gpu(function, index)
        self._profile(function, profile_id)
        return [
            _gi_info(gi) for gi in self._instances(self._read(), index)
            if gi["profileId"] == profile_id
        ]  # fmt: skip

    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, index: int, profile_id: int, start: int, size: int
    ) -> dict[str, Any]:
        function = "nvmlDeviceCreateGpuInstanceWithPlacement"
        self._gpu(function, index)
        profile = self._profile(function, profile_id)
        if start not in profile.placements or size != profile.memory_slices:
            raise _fail(function, "INVALID_ARGUMENT")
        with self._locked() as state:
            instances = self._instances(state, index)
            wanted = set(range(start, start + size))
            if any(wanted & set(range(gi["start"], gi["start"] + gi["size"])) for gi in instances):
                raise _fail(function, "INSUFFICIENT_RESOURCES")
            used = _amounts(profile)
            for gi in instances:
                for key, amount in _amounts(self._profile(function, gi["profileId"])).items():
                    used[key] += amount
            if any(used[key] > self.whole[key] for key in used):
                raise _fail(function, "INSUFFICIENT_RESOURCES")
            taken = {gi["id"] for gi in instances}
            gi_id = next(i for i in range(1, GPU_INSTANCE_IDS + 1) if i not in taken)
            created = {"id": gi_id, "profileId": profile_id, "start": start, "size": size,
                       "computeInstances": []}  # fmt: skip
            instances.append(created)
        return _gi_info(created)

    def nvmlGpuInstanceDestroy(self, index: int, gpu_instance_id: int) -> None:
        function = "nvmlGpuInstanceDestroy"
        self._gpu(function, index)
        with self._locked() as state:
            instances = self._instances(state, index)
            gi = self._gi(function, instances, gpu_instance_id)
            if gi["computeInstances"]:
                raise _fail(function, "IN_USE")
            instances.remove(gi)

    def _compute_profile(self, function: str, gi: dict[str, Any], profile: int) -> dict[str, Any]:
        slices = COMPUTE_PROFILE_SLICES.get(profile)
        if not 0 <= profile < COMPUTE_INSTANCE_PROFILE_COUNT:
            raise _fail(function, "INVALID_ARGUMENT")
        parent = _amounts(self._profile(function, gi["profileId"]))
        whole = parent["sliceCount"]
        if slices is None or slices > whole or (slices > 4 and slices != whole):
            raise _fail(function, "NOT_SUPPORTED")
        return {
            "id": profile,
            "sliceCount": slices,
            "instanceCount": whole // slices,
            "multiprocessorCount": parent["multiprocessorCount"] * slices // whole,
            "sharedCopyEngineCount": parent["copyEngineCount"],
            "sharedDecoderCount": parent["decoderCount"],
            "sharedEncoderCount": parent["encoderCount"],
            "sharedJpegCount": parent["jpegCount"],
            "sharedOfaCount": parent["ofaCount"],
            "name": f"MIG {slices}c.{self._profile(function, gi['profileId']).name}",
        }

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, index: int, gpu_instance_id: int, profile: int, eng_profile: int
    ) -> dict[str, Any]:
        function = "nvmlGpuInstanceGetComputeInstanceProfileInfo"
        self._gpu(function, index)
        gi = self._gi(function, self._instances(self._read(), index), gpu_instance_id)
        return self._compute_profile(function, gi, profile)

    def nvmlGpuInstanceCreateComputeInstance(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> dict[str, Any]:
        function = "nvmlGpuInstanceCreateComputeInstance"
        self._gpu(function, index)
        with self._locked() as state:
            gi = self._gi(function, self._instances(state, index), gpu_instance_id)
            info = self._compute_profile(function, gi, profile_id)
            cis: list[dict[str, Any]] = gi["computeInstances"]
            used = sum(COMPUTE_PROFILE_SLICES[ci["profileId"]] for ci in cis)
            whole = compute_slices(self._profile(function, gi["profileId"]).name)
            if used + info["sliceCount"] > whole or len(cis) >= COMPUTE_INSTANCE_IDS:
                raise _fail(function, "INSUFFICIENT_RESOURCES")
            taken = {ci["id"] for ci in cis}
            ci_id = next(i for i in range(COMPUTE_INSTANCE_IDS) if i not in taken)
            uuid = f"MIG-{uuid4()}"  # a new one at each creation, as NVML gives them
            created = {"id": ci_id, "profileId": profile_id, "start": used,
                       "size": info["sliceCount"], "uuid": uuid}  # fmt: skip
            cis.append(created)
        return _ci_info(created)

    def nvmlGpuInstanceGetComputeInstances(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> list[dict[str, Any]]:
        function = "nvmlGpuInstanceGetComputeInstances"
        self._gpu(function, index)
        gi = self._gi(function, self._instances(self._read(), index), gpu_instance_id)
        return [_ci_info(ci) for ci in gi["computeInstances"] if ci["profileId"] == profile_id]

    def nvmlComputeInstanceDestroy(
        self, index: int, gpu_instance_id: int, compute_instance_id: int
    ) -> None:
        function = "nvmlComputeInstanceDestroy"
        self._gpu(function, index)
        with self._locked() as state:
            gi = self._gi(function, self._instances(state, index), gpu_instance_id)
            cis: list[dict[str, Any]] = gi["computeInstances"]
            found = [ci for ci in cis if ci["id"] == compute_instance_id]
            if not found:
                raise _fail(function, "NOT_FOUND")
            cis.remove(found[0])

    def nvmlDeviceGetMaxMigDeviceCount(self, index: int) -> int:
        self._gpu("nvmlDeviceGetMaxMigDeviceCount", index)
        return MAX_MIG_DEVICES

    def nvmlDeviceGetMigDeviceHandleByIndex(self, index: int, mig_index: int) -> dict[str, Any]:
        function = "nvmlDeviceGetMigDeviceHandleByIndex"
        self._gpu(function, index)
        devices = [
            {"uuid": ci["uuid"], "gpuInstanceId": gi["id"], "computeInstanceId": ci["id"]}
            for gi in sorted(self._instances(self._read(), index), key=lambda g: int(g["id"]))
            for ci in sorted(gi["computeInstances"], key=lambda c: int(c["id"]))
        ]
        if not 0 <= mig_index < len(devices):
            raise _fail(function, "NOT_FOUND")
        return devices[mig_index]

    def mig_capability_minor(
        self, gpu_minor: int, gpu_instance_id: int, compute_instance_id: int | None
    ) -> int | None:
        per_gi = 1 + COMPUTE_INSTANCE_IDS
        base = _GLOBAL_CAPS + 1 + gpu_minor * GPU_INSTANCE_IDS * per_gi + gpu_instance_id * per_gi
        return base if compute_instance_id is None else base + 1 + compute_instance_id

    def nvidia_caps_major(self) -> int | None:
        return STAND_IN_CAPS_MAJOR

    def shutdown(self) -> None:
        pass

    # --- for tests and operators ----------------------------------------------------------

    def instances(self) -> dict[int, list[dict[str, Any]]]:
        """Every GPU's instances as the state file holds them (GPU index -> instances)."""
        state = self._read()
        return {int(k): v for k, v in sorted(state["gpus"].items(), key=lambda kv: int(kv[0]))
                if v}  # fmt: skip


def _gi_info(gi: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": gi["id"],
        "profileId": gi["profileId"],
        "placement": {"start": gi["start"], "size": gi["size"]},
    }


def _ci_info(ci: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": ci["id"],
        "profileId": ci["profileId"],
        "placement": {"start": ci["start"], "size": ci["size"]},
    }
