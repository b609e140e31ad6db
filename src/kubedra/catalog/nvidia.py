"""Devices as the NVIDIA GPU DRA driver (`gpu.nvidia.com`) publishes them (drivers.md §1).

Attribute set: the union of what the driver's releases publish, so selectors written for either
release match: v25.3.x `index`, `minor`, `pcieBusID`; current main `type`, `uuid`,
`productName`, `brand`, `architecture`, `cudaComputeCapability`, `driverVersion`,
`cudaDriverVersion`, `addressingMode`, `resource.kubernetes.io/pciBusID`,
`resource.kubernetes.io/pcieRoot` and `resource.kubernetes.io/numaNode` (scalar int form; main
only, published because our NIC driver publishes the same name, so GPU<->NIC NUMA
`matchAttribute` works). Capacity `memory`.

NVLink: upstream publishes **no** NVLink attribute on GPU devices (only the node label
`nvidia.com/gpu.clique` for multi-node NVLink). kubedra adds the simulated attribute
`gpu.nvidia.com/nvlinkDomain` (string, shaped like a clique ID `<uuid>.<cliqueID>`) to full
GPUs on NVSwitch boards: equal for all GPUs of one node, different across nodes, absent on PCIe
boards and MIG devices (MIG instances do not do NVLink P2P), so `matchAttribute` on it keeps a
claim inside one NVLink domain. It exists only in the simulated catalog, never on real nodes.

MIG: dynamic MIG / partitionable devices (drivers.md §1.4, §1.11): one counter set
`gpu-<minor>-counter-set` per GPU holding the per-dimension maximum over the MIG profiles
(multiprocessors, engines, memory) plus `memory-slice-0..N-1` = 1; the full GPU consumes every
counter; each MIG device (every profile at every legal placement) consumes its profile's amounts
plus the memory slices `[start, start+size)` of its placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubedra.api.resource import (
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)
from kubedra.catalog.gpus import GpuSpec, MigGeometry, MigProfile
from kubedra.catalog.inventory import (
    NUMA_NODE,
    PCI_BUS_ID,
    PCIE_ROOT,
    DriverInventory,
    PciFunction,
    capacity,
    counter,
    integer,
    stable_uuid,
    string,
    version,
)

DRIVER = "gpu.nvidia.com"
NVLINK_DOMAIN_ATTRIBUTE = "gpu.nvidia.com/nvlinkDomain"  # kubedra-simulated, see module doc
_NVLINK_DOMAIN_KEY = "nvlinkDomain"  # bare form inside the driver's own domain

# (capacity name on the device, counter name in the counter set), drivers.md §1.4.
_DIMENSIONS = (
    ("multiprocessors", "multiprocessors"),
    ("copyEngines", "copy-engines"),
    ("decoders", "decoders"),
    ("encoders", "encoders"),
    ("jpegEngines", "jpeg-engines"),
    ("ofaEngines", "ofa-engines"),
    ("memory", "memory"),
)


@dataclass(frozen=True)
class DriverStack:
    """The host's NVIDIA software: `driverVersion` 580.126.09 normalised to semver."""

    driver_version: str = "580.126.9"
    cuda_driver_version: str = "13.0.0"
    addressing_mode: str = "HMM"  # x86 hosts; ATS on Grace


def gpu_uuid(node_name: str, index: int) -> str:
    """NVML-shaped UUID (`GPU-xxxxxxxx-xxxx-...`), deterministic per node and GPU index."""
    return f"GPU-{stable_uuid(node_name, 'gpu', index)}"


def nvlink_domain(node_name: str) -> str:
    """The simulated NVLink domain of a single-node NVSwitch baseboard (clique-ID shaped)."""
    return f"{stable_uuid(node_name, 'nvlink')}.0"


def counter_set_name(minor: int) -> str:
    return f"gpu-{minor}-counter-set"


def mig_device_name(minor: int, profile: MigProfile, start: int) -> str:
    return f"gpu-{minor}-mig-{profile.device_suffix}-{profile.profile_id}-{start}"


def _amounts(p: MigProfile) -> tuple[int | str, ...]:
    return (
        p.multiprocessors,
        p.copy_engines,
        p.decoders,
        p.encoders,
        p.jpeg_engines,
        p.ofa_engines,
        p.memory,
    )


def _full_gpu_amounts(geometry: MigGeometry) -> tuple[int | str, ...]:
    """Per-dimension maximum over all profiles (the driver's full-GPU capacity under MIG)."""
    columns = zip(*(_amounts(p) for p in geometry.profiles), strict=True)
    return tuple(max(col, key=lambda v: capacity(v).value) for col in columns)


def _slices(first: int, count: int) -> dict[str, Counter]:
    return {f"memory-slice-{i}": counter(1) for i in range(first, first + count)}


def _consumption(
    minor: int, amounts: Sequence[int | str], first: int, count: int
) -> DeviceCounterConsumption:
    counters = {name: counter(v) for (_, name), v in zip(_DIMENSIONS, amounts, strict=True)}
    return DeviceCounterConsumption(
        counter_set=counter_set_name(minor), counters=counters | _slices(first, count)
    )


def _capacities(amounts: Sequence[int | str]) -> dict[str, DeviceCapacity]:
    return {name: capacity(v) for (name, _), v in zip(_DIMENSIONS, amounts, strict=True)}


def partitioned_gpu(
    minor: int,
    uuid: str,
    attributes: dict[str, DeviceAttribute],
    common: dict[str, DeviceAttribute],
    geometry: MigGeometry,
) -> tuple[list[Device], CounterSet]:
    """One GPU under dynamic MIG, as the NVIDIA driver publishes it: the full GPU and every
    profile at every placement, all drawing on the GPU's counter set (simulated catalog and
    the NVML backend both build MIG through this function)."""
    full = _full_gpu_amounts(geometry)
    everything = _consumption(minor, full, 0, geometry.memory_slices)
    devices = [
        Device(
            name=f"gpu-{minor}",
            attributes=attributes,
            capacity=_capacities(full),
            consumes_counters=(everything,),
        )
    ]
    devices.extend(
        Device(
            name=mig_device_name(minor, p, start),
            attributes={
                "type": string("mig"),
                "profile": string(p.name),
                "parentUUID": string(uuid),
                **common,
            },
            capacity=_capacities(_amounts(p)),
            consumes_counters=(_consumption(minor, _amounts(p), start, p.memory_slices),),
        )
        for p in geometry.profiles
        for start in p.placements
    )
    return devices, CounterSet(name=counter_set_name(minor), counters=dict(everything.counters))


def _common(spec: GpuSpec, fn: PciFunction, stack: DriverStack) -> dict[str, DeviceAttribute]:
    return {
        "productName": string(spec.product_name),
        "brand": string("Nvidia"),
        "architecture": string(spec.architecture),
        "cudaComputeCapability": version(spec.compute_capability),
        "driverVersion": version(stack.driver_version),
        "cudaDriverVersion": version(stack.cuda_driver_version),
        "addressingMode": string(stack.addressing_mode),
        PCI_BUS_ID: string(fn.bus_id),
        PCIE_ROOT: string(fn.pcie_root),
        NUMA_NODE: integer(fn.numa_node),
    }


def gpu_inventory(
    node_name: str,
    spec: GpuSpec,
    functions: Sequence[PciFunction],
    *,
    mig: bool = False,
    stack: DriverStack | None = None,
) -> DriverInventory:
    """All `gpu.nvidia.com` devices of one node; `mig=True` publishes partitionable devices."""
    stack = stack or DriverStack()
    geometry = spec.mig if mig else None
    if mig and geometry is None:
        raise ValueError(f"{spec.key} has no MIG geometry in the catalog")
    devices: list[Device] = []
    counter_sets: list[CounterSet] = []
    for index, fn in enumerate(functions):
        minor = index  # NVML index and /dev/nvidia<minor> agree on these hosts (PCI order)
        uuid = gpu_uuid(node_name, index)
        common = _common(spec, fn, stack)
        attributes = {
            "type": string("gpu"),
            "uuid": string(uuid),
            "index": integer(index),
            "minor": integer(minor),
            **common,
            "pcieBusID": string(fn.bus_id),
        }
        if spec.nvlink:
            attributes[_NVLINK_DOMAIN_KEY] = string(nvlink_domain(node_name))
        if geometry is None:
            devices.append(
                Device(
                    name=f"gpu-{minor}",
                    attributes=attributes,
                    capacity={"memory": capacity(spec.memory)},
                )
            )
            continue
        gpu_devices, counter_set = partitioned_gpu(minor, uuid, attributes, common, geometry)
        devices += gpu_devices
        counter_sets.append(counter_set)
    return DriverInventory(DRIVER, tuple(devices), tuple(counter_sets))
