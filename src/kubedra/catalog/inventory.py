"""Building blocks shared by the hardware builders: inventories, PCIe layout, attribute helpers."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kubedra.api.quantity import Quantity
from kubedra.api.resource import Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity

# Every identifier the catalog invents (GPU UUIDs, TPU UUIDs, node UIDs, NVLink domains) is a
# uuid5 in this namespace, so the same node name always yields the same hardware.
CATALOG_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "catalog.kubedra.io")

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
NUMA_NODE = "resource.kubernetes.io/numaNode"


@dataclass(frozen=True)
class DriverInventory:
    """Everything one DRA driver publishes for one node, before it is split into slices."""

    driver: str
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...] = ()


@dataclass(frozen=True)
class PcieRootComplex:
    """One PCIe root (`pci<domain>:<bus>`) with the GPUs and NICs behind it (extended BDFs)."""

    root: str
    numa_node: int
    gpus: tuple[str, ...] = ()
    nics: tuple[str, ...] = ()


@dataclass(frozen=True)
class PciFunction:
    """One GPU or NIC placed on the host: its address, root and NUMA node."""

    bus_id: str
    pcie_root: str
    numa_node: int


def gpu_functions(roots: Iterable[PcieRootComplex]) -> tuple[PciFunction, ...]:
    return tuple(PciFunction(b, r.root, r.numa_node) for r in roots for b in r.gpus)


def nic_functions(roots: Iterable[PcieRootComplex]) -> tuple[PciFunction, ...]:
    return tuple(PciFunction(b, r.root, r.numa_node) for r in roots for b in r.nics)


def stable_uuid(*parts: object) -> str:
    """A deterministic UUID string for the given identity (node name, device kind, index)."""
    return str(uuid.uuid5(CATALOG_NAMESPACE, "/".join(str(p) for p in parts)))


def string(value: str) -> DeviceAttribute:
    return DeviceAttribute(string=value)


def integer(value: int) -> DeviceAttribute:
    return DeviceAttribute(int_=value)


def boolean(value: bool) -> DeviceAttribute:
    return DeviceAttribute(bool_=value)


def version(value: str) -> DeviceAttribute:
    return DeviceAttribute(version=value)


def quantity(value: int | str) -> Quantity:
    return Quantity.from_int(value) if isinstance(value, int) else Quantity.parse(value)


def capacity(value: int | str) -> DeviceCapacity:
    return DeviceCapacity(value=quantity(value))


def counter(value: int | str) -> Counter:
    return Counter(value=quantity(value))
