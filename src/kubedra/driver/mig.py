"""Prepare-time MIG (dynamic MIG): the driver makes the MIG instance a claim was allocated.

A GPU in MIG mode is published as partitionable devices (KEP-4815: the GPU's counter set, the
whole GPU drawing on all of it, one device per MIG profile and legal placement drawing on its
share, `kubedra.catalog.nvidia.partitioned_gpu`). The scheduler allocates one placement; at
NodePrepareResources the driver makes exactly that instance, through the `Nvml` protocol
(`PynvmlApi` on a real node, `SimulatedNvml` on a simulated MIG profile: the code here is
the same for both):

1. a GPU instance of the device's profile at the device's placement
   (nvmlDeviceCreateGpuInstanceWithPlacement with the profile ID and {start, size});
2. on it one compute instance of the profile spanning all its compute slices (the largest
   profile nvmlGpuInstanceGetComputeInstanceProfileInfo offers), as NVIDIA's driver does
   for a MIG device handed to one container;
3. the MIG device's UUID (the MIG device handle whose GPU- and compute-instance IDs are the
   new ones) and the minors of the capability nodes that grant access to the two instances,
   which the claim's CDI spec maps into the container (`cdi.MigAccess`).

Unprepare destroys the compute instance, then the GPU instance. `DeviceState` orders these
steps with its commits (`kubedra.driver.prepare`), so a kill -9 anywhere is recoverable.

Which instances the driver destroys: only those its checkpoint says it made. That is an
instance named by a record in `migPending` (written before the instance is created, and
when an unprepare commits) that no prepared claim holds, or the instance of a claim entry
that recovery found stale. A record identifies an instance by GPU UUID, GPU-instance
profile and placement, plus the GPU-instance ID and MIG UUID once known. Every other
instance is someone else's (made by hand with `nvidia-smi mig`, or by another tool), even at
a placement the driver publishes (every legal placement is published, so "matches a
published placement" would cover nearly every instance an admin makes): it is never
destroyed. The driver publishes around it instead (`publishable`): the whole GPU and every
placement that shares a memory slice with it are withdrawn from the slice, and its amounts
are subtracted from the GPU's counter set, so the scheduler cannot allocate over it.
Instances of prepared claims change nothing in the slice: their claims' allocations already
hold their counters.

A GPU is whole or partitioned, never both: a MIG device is not made on a GPU a prepared
claim holds whole, and a whole GPU is not handed out while MIG instances exist on it.
Turning MIG mode on is node set-up, not a per-claim action (it needs a GPU reset:
`nvidia-smi -i <index> -mig 1`, then reset the GPU or reboot); the driver publishes a GPU as
partitionable only when NVML reports MIG mode on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import msgspec

from kubedra.api.quantity import Quantity
from kubedra.api.resource import Counter, CounterSet, Device
from kubedra.catalog.gpus import MigGeometry
from kubedra.catalog.inventory import DriverInventory
from kubedra.driver.backends.nvml import (
    COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
    COMPUTE_INSTANCE_PROFILE_COUNT,
    MIG_ENABLED,
    Nvml,
    NvmlCallError,
    mig_geometry,
    mig_placement,
)
from kubedra.driver.cdi import MigAccess
from kubedra.driver.checkpoint import MigInstance

_ABSENT = ("NVML_ERROR_NOT_FOUND", "NVML_ERROR_INVALID_ARGUMENT")
_UNSUPPORTED = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")
_WHY = {
    "NVML_ERROR_INSUFFICIENT_RESOURCES": "its memory slices or the GPU's engines are taken by "
    "another instance",
    "NVML_ERROR_INVALID_ARGUMENT": "not a legal placement of the profile on this GPU",
    "NVML_ERROR_NOT_SUPPORTED": "this GPU or NVML cannot make MIG instances",
    "NVML_ERROR_NO_PERMISSION": "the driver lacks the permission to change MIG instances",
}


class MigError(Exception):
    """A MIG instance that cannot be found, made or destroyed; the message says why."""


@dataclass(frozen=True)
class Placement:
    """The MIG instance a published placement device stands for."""

    device: str
    gpu_uuid: str
    gpu_minor: int
    profile: str
    profile_id: int
    start: int
    size: int

    def record(self, claim_uid: str) -> MigInstance:
        """The checkpoint record of this instance, before it exists."""
        return MigInstance(
            device_name=self.device,
            claim_uid=claim_uid,
            gpu_uuid=self.gpu_uuid,
            gpu_minor=self.gpu_minor,
            profile=self.profile,
            profile_id=self.profile_id,
            start=self.start,
            size=self.size,
        )


@dataclass(frozen=True)
class Instance:
    """A GPU instance that exists, with its compute instances as (ID, MIG UUID)."""

    gpu_uuid: str
    gpu_index: int
    gpu_minor: int
    gpu_instance_id: int
    profile_id: int
    start: int
    size: int
    compute_instances: tuple[tuple[int, str], ...] = ()

    @property
    def slices(self) -> range:
        return range(self.start, self.start + self.size)

    @property
    def uuids(self) -> set[str]:
        return {uuid for _, uuid in self.compute_instances}

    def describe(self) -> str:
        last = self.start + self.size - 1
        return (
            f"GPU instance {self.gpu_instance_id} (profile ID {self.profile_id}, memory slices "
            f"{self.start}-{last}) on gpu-{self.gpu_minor}"
        )


def holds(record: MigInstance, instance: Instance) -> bool:
    """The record of a prepared claim names this instance (same GPU, ID, profile and
    placement, and its MIG UUID among the instance's)."""
    return (
        record.gpu_uuid == instance.gpu_uuid
        and record.gpu_instance_id == instance.gpu_instance_id
        and record.profile_id == instance.profile_id
        and record.start == instance.start
        and (not record.mig_uuid or record.mig_uuid in instance.uuids)
    )


def may_name(record: MigInstance, instance: Instance) -> bool:
    """A pending record (IDs unknown while the instance was being made) may name this
    instance: same GPU, profile and placement, and the IDs and UUID it knows agree."""
    if (record.gpu_uuid, record.profile_id, record.start) != (
        instance.gpu_uuid,
        instance.profile_id,
        instance.start,
    ):
        return False
    if record.gpu_instance_id is not None and record.gpu_instance_id != instance.gpu_instance_id:
        return False
    known = record.mig_uuid and instance.compute_instances
    return not (known and record.mig_uuid not in instance.uuids)


def _attr(device: Device, name: str) -> str:
    attr = device.attributes.get(name)
    return str(attr.value) if attr is not None and attr.value is not None else ""


def _memory_slices(device: Device) -> set[int]:
    return {
        int(name.removeprefix("memory-slice-"))
        for use in device.consumes_counters
        for name in use.counters
        if name.startswith("memory-slice-")
    }


class MigManager:
    """MIG instances of the node's GPUs in MIG mode, through one `Nvml`."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self._gpus: dict[str, tuple[int, int]] | None = None  # uuid -> (NVML index, minor)
        self._geometry: dict[int, MigGeometry] = {}
        self._full_compute: dict[tuple[int, int], int] = {}  # (index, GI profile) -> CI profile

    # --- what there is --------------------------------------------------------------------

    def gpus(self) -> dict[str, tuple[int, int]]:
        """The GPUs in MIG mode: UUID -> (NVML index, minor). MIG mode changes only with a
        GPU reset, so this is learned once."""
        if self._gpus is None:
            found: dict[str, tuple[int, int]] = {}
            try:
                for index in range(self.nvml.nvmlDeviceGetCount()):
                    try:
                        mode = self.nvml.nvmlDeviceGetMigMode(index)
                    except NvmlCallError:
                        continue
                    if mode[0] != MIG_ENABLED:
                        continue
                    uuid = self.nvml.nvmlDeviceGetUUID(index)
                    found[uuid] = (index, self.nvml.nvmlDeviceGetMinorNumber(index))
            except NvmlCallError as err:
                raise MigError(f"cannot list the GPUs in MIG mode: {err}") from None
            self._gpus = found
        return self._gpus

    def _gpu(self, uuid: str) -> tuple[int, int]:
        found = self.gpus().get(uuid)
        if found is None:
            raise MigError(f"GPU {uuid} is not in MIG mode on this node (or not on it at all)")
        return found

    def geometry(self, index: int) -> MigGeometry:
        if index not in self._geometry:
            self._geometry[index] = mig_geometry(self.nvml, index)
        return self._geometry[index]

    def placement(self, device: Device) -> Placement | None:
        """The MIG instance a published device stands for; None for a device that is no
        MIG placement (a whole GPU, another driver's device)."""
        parsed = mig_placement(device.name)
        parent = _attr(device, "parentUUID")
        if _attr(device, "type") != "mig" or parsed is None or not parent:
            return None
        _, profile_id, start = parsed
        index, minor = self._gpu(parent)
        for p in self.geometry(index).profiles:
            if p.profile_id == profile_id and start in p.placements:
                return Placement(
                    device.name, parent, minor, p.name, profile_id, start, p.memory_slices
                )
        raise MigError(
            f"device {device.name}: gpu-{minor} has no MIG profile {profile_id} placement "
            f"starting at memory slice {start}"
        )

    def instances(self, gpu_uuid: str | None = None) -> list[Instance]:
        """The GPU instances that exist (on GPU `gpu_uuid`, or on every GPU in MIG mode)."""
        out: list[Instance] = []
        for uuid, (index, minor) in self.gpus().items():
            if gpu_uuid is not None and uuid != gpu_uuid:
                continue
            try:
                out += self._instances(uuid, index, minor)
            except NvmlCallError as err:
                if err.code in _UNSUPPORTED:
                    continue  # an NVML that cannot tell (a recorded snapshot without them)
                raise MigError(f"cannot list the MIG instances of gpu-{minor}: {err}") from None
        return out

    def _mig_devices(self, index: int) -> Iterator[tuple[int, int, str]]:
        """(GPU-instance ID, compute-instance ID, MIG UUID) of every MIG device of a GPU."""
        for mig_index in range(self.nvml.nvmlDeviceGetMaxMigDeviceCount(index)):
            try:
                mig = self.nvml.nvmlDeviceGetMigDeviceHandleByIndex(index, mig_index)
            except NvmlCallError as err:
                if err.code in _ABSENT:
                    continue  # no MIG device at this index
                raise
            yield int(mig["gpuInstanceId"]), int(mig["computeInstanceId"]), str(mig["uuid"])

    def _instances(self, uuid: str, index: int, minor: int) -> list[Instance]:
        computes: dict[int, list[tuple[int, str]]] = {}
        for gi_id, ci_id, mig_uuid in self._mig_devices(index):
            computes.setdefault(gi_id, []).append((ci_id, mig_uuid))
        out = []
        for profile in self.geometry(index).profiles:
            for gi in self.nvml.nvmlDeviceGetGpuInstances(index, profile.profile_id):
                gi_id = int(gi["id"])
                out.append(
                    Instance(
                        gpu_uuid=uuid,
                        gpu_index=index,
                        gpu_minor=minor,
                        gpu_instance_id=gi_id,
                        profile_id=int(gi["profileId"]),
                        start=int(gi["placement"]["start"]),
                        size=int(gi["placement"]["size"]),
                        compute_instances=tuple(sorted(computes.get(gi_id, ()))),
                    )
                )
        return out

    # --- making and destroying ------------------------------------------------------------

    def create(self, record: MigInstance) -> MigInstance:
        """Make the instance `record` names; the record with its IDs and MIG UUID. A GPU
        instance whose compute instance cannot be made is destroyed again."""
        index, minor = self._gpu(record.gpu_uuid)
        where = (
            f"MIG {record.profile} instance at memory slices {record.start}-"
            f"{record.start + record.size - 1} of gpu-{minor}"
        )
        try:
            gi = self.nvml.nvmlDeviceCreateGpuInstanceWithPlacement(
                index, record.profile_id, record.start, record.size
            )
        except NvmlCallError as err:
            why = _WHY.get(err.code)
            raise MigError(
                f"cannot create the {where}: {err}" + (f" ({why})" if why else "")
            ) from None
        gi_id = int(gi["id"])
        ci_id: int | None = None
        try:
            profile = self._full_compute_profile(index, gi_id, record.profile_id)
            ci_id = int(self.nvml.nvmlGpuInstanceCreateComputeInstance(index, gi_id, profile)["id"])
            uuid = self._mig_uuid(index, gi_id, ci_id)
        except (NvmlCallError, MigError) as err:
            self._undo(index, gi_id, ci_id)
            raise MigError(f"cannot create the compute instance of the {where}: {err}") from None
        return msgspec.structs.replace(
            record, gpu_instance_id=gi_id, compute_instance_id=ci_id, mig_uuid=uuid
        )

    def _undo(self, index: int, gi_id: int, ci_id: int | None) -> None:
        try:
            if ci_id is not None:
                self.nvml.nvmlComputeInstanceDestroy(index, gi_id, ci_id)
            self.nvml.nvmlGpuInstanceDestroy(index, gi_id)
        except NvmlCallError:
            pass  # left for the next start: its pending record names it

    def _full_compute_profile(self, index: int, gi_id: int, gi_profile: int) -> int:
        """The compute-instance profile spanning all of the GPU instance's compute slices."""
        key = (index, gi_profile)
        if key not in self._full_compute:
            best: tuple[int, int] | None = None  # (slices, profile ID)
            for profile in range(COMPUTE_INSTANCE_PROFILE_COUNT):
                try:
                    info = self.nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                        index, gi_id, profile, COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
                    )
                except NvmlCallError:
                    continue  # not offered on this GPU instance
                slices = int(info["sliceCount"])
                if best is None or slices > best[0]:
                    best = (slices, int(info["id"]))
            if best is None:
                raise MigError(f"GPU instance {gi_id} offers no compute-instance profile")
            self._full_compute[key] = best[1]
        return self._full_compute[key]

    def _mig_uuid(self, index: int, gi_id: int, ci_id: int) -> str:
        for found in self._mig_devices(index):
            if found[:2] == (gi_id, ci_id):
                return found[2]
        raise MigError(f"no MIG device for GPU instance {gi_id}, compute instance {ci_id}")

    def destroy(self, instance: Instance) -> None:
        """Destroy an instance: its compute instances, then the GPU instance. One that is
        already gone is no error."""
        index, gi_id = instance.gpu_index, instance.gpu_instance_id
        try:
            for ci_id, _ in instance.compute_instances:
                try:
                    self.nvml.nvmlComputeInstanceDestroy(index, gi_id, ci_id)
                except NvmlCallError as err:
                    if err.code not in _ABSENT:
                        raise
            try:
                self.nvml.nvmlGpuInstanceDestroy(index, gi_id)
            except NvmlCallError as err:
                if err.code not in _ABSENT:
                    raise
        except NvmlCallError as err:
            why = " (a process still uses it)" if err.code == "NVML_ERROR_IN_USE" else ""
            raise MigError(f"cannot destroy {instance.describe()}: {err}{why}") from None

    def access(self, record: MigInstance) -> MigAccess:
        """The UUID and capability minors a container needs for the instance of `record`."""
        gi, ci = record.gpu_instance_id, record.compute_instance_id
        if gi is None or ci is None or not record.mig_uuid:
            raise MigError(f"the MIG instance of {record.device_name} was never completed")
        gi_minor = self.nvml.mig_capability_minor(record.gpu_minor, gi, None)
        ci_minor = self.nvml.mig_capability_minor(record.gpu_minor, gi, ci)
        if gi_minor is None or ci_minor is None:
            raise MigError(
                f"no access capability for GPU instance {gi} / compute instance {ci} of "
                f"gpu-{record.gpu_minor} (/proc/driver/nvidia/capabilities unreadable?)"
            )
        return MigAccess(record.mig_uuid, gi_minor, ci_minor, self.nvml.nvidia_caps_major())

    # --- publishing -----------------------------------------------------------------------

    def publishable(
        self, inventory: DriverInventory, owned: Iterable[MigInstance]
    ) -> tuple[DriverInventory, list[Instance]]:
        """`inventory` without what instances no prepared claim holds make unusable (see the
        module doc), and those instances."""
        owned = list(owned)
        foreign = [i for i in self.instances() if not any(holds(r, i) for r in owned)]
        if not foreign:
            return inventory, []
        return withdraw(inventory, foreign), foreign


def withdraw(inventory: DriverInventory, foreign: Sequence[Instance]) -> DriverInventory:
    """`inventory` published around `foreign` instances: their GPUs' whole-GPU devices and
    every placement sharing a memory slice with one are left out, and each instance's
    consumption (that of the device of its profile and placement; its memory slices alone
    when the driver publishes no such device) is subtracted from its GPU's counter set."""
    by_gpu: dict[str, list[Instance]] = {}
    for instance in foreign:
        by_gpu.setdefault(instance.gpu_uuid, []).append(instance)
    kept: list[Device] = []
    taken: dict[str, dict[str, Quantity]] = {}  # counter set -> counter -> amount taken
    counted: set[tuple[str, int]] = set()
    for device in inventory.devices:
        kind = _attr(device, "type")
        gpu = _attr(device, "uuid") if kind == "gpu" else _attr(device, "parentUUID")
        here = by_gpu.get(gpu, []) if kind in ("gpu", "mig") else []
        if not here:
            kept.append(device)
            continue
        parsed = mig_placement(device.name) if kind == "mig" else None
        for instance in here:
            if parsed is not None and parsed[1:] == (instance.profile_id, instance.start):
                counted.add((gpu, instance.gpu_instance_id))
                for use in device.consumes_counters:
                    into = taken.setdefault(use.counter_set, {})
                    for name, amount in use.counters.items():
                        into[name] = into.get(name, Quantity.from_int(0)).add(amount.value)
        slices = _memory_slices(device)
        if kind == "mig" and not any(slices & set(i.slices) for i in here):
            kept.append(device)
    for instance in foreign:  # no device of its own: its memory slices at least
        if (instance.gpu_uuid, instance.gpu_instance_id) in counted:
            continue
        name = _counter_set_of(inventory.devices, instance.gpu_uuid)
        if name:
            into = taken.setdefault(name, {})
            for k in instance.slices:
                into[f"memory-slice-{k}"] = Quantity.from_int(1)
    sets = []
    for counter_set in inventory.shared_counters:
        minus = taken.get(counter_set.name, {})
        counters = {
            name: Counter(value=_less(c.value, minus[name])) if name in minus else c
            for name, c in counter_set.counters.items()
        }
        sets.append(msgspec.structs.replace(counter_set, counters=counters))
    return dataclasses.replace(inventory, devices=tuple(kept), shared_counters=tuple(sets))


def _less(value: Quantity, minus: Quantity) -> Quantity:
    left = value.sub(minus)
    return left if left.sign() > 0 else Quantity.from_int(0)


def _counter_set_of(devices: Sequence[Device], gpu_uuid: str) -> str:
    for device in devices:
        if _attr(device, "type") == "gpu" and _attr(device, "uuid") == gpu_uuid:
            for use in device.consumes_counters:
                return use.counter_set
    return ""


def counter_sets(sets: Iterable[CounterSet]) -> dict[str, dict[str, str]]:
    """Counter sets as plain text (name -> counter -> quantity), for logs and tests."""
    return {s.name: {k: str(c.value) for k, c in s.counters.items()} for s in sets}
