"""RDMA NICs as dranet (`dra.net`) publishes them (drivers.md §3.2, §3.4).

dranet is the driver drivers.md uses for GPU<->NIC alignment; each NIC carries the standard
`resource.kubernetes.io/pcieRoot` (same value as the GPUs behind the same root, so
`matchAttribute: resource.kubernetes.io/pcieRoot` pairs them) and NUMA under both
`dra.net/numaNode` (released dranet) and `resource.kubernetes.io/numaNode` (dranet main).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubedra.api.resource import Device, DeviceAttribute
from kubedra.catalog.inventory import (
    NUMA_NODE,
    PCIE_ROOT,
    DriverInventory,
    PciFunction,
    boolean,
    integer,
    string,
)

DRIVER = "dra.net"


@dataclass(frozen=True)
class NicSpec:
    pci_vendor: str
    pci_device: str


# AWS Elastic Fabric Adapter: an RDMA-only PCI function (no netdev, so no ifName/mtu/mac), named
# by its verbs device `rdmap<bus>s<slot>` (decimal), e.g. `rdmap16s27` on p4d (dranet
# `examples/aws_eks_examples/gpu-efa/`, aws-ofi-nccl `fi_info` output).
EFA = NicSpec(pci_vendor="Amazon.com, Inc.", pci_device="Elastic Fabric Adapter (EFA)")


def device_name(bus_id: str) -> str:
    """dranet's device name for a PCI function: `0000:10:1b.0` -> `pci-0000-10-1b-0`."""
    return "pci-" + bus_id.replace(":", "-").replace(".", "-")


def rdma_device(bus_id: str) -> str:
    _, bus, slot_fn = bus_id.split(":")
    slot = slot_fn.split(".")[0]
    return f"rdmap{int(bus, 16)}s{int(slot, 16)}"


def nic_inventory(spec: NicSpec, functions: Sequence[PciFunction]) -> DriverInventory:
    devices = []
    for fn in functions:
        attributes: dict[str, DeviceAttribute] = {
            "dra.net/pciAddress": string(fn.bus_id),
            "dra.net/pciVendor": string(spec.pci_vendor),
            "dra.net/pciDevice": string(spec.pci_device),
            "dra.net/rdma": boolean(True),
            "dra.net/rdmaDevice": string(rdma_device(fn.bus_id)),
            "dra.net/sriov": boolean(False),
            "dra.net/virtual": boolean(False),
            "dra.net/numaNode": integer(fn.numa_node),
            NUMA_NODE: integer(fn.numa_node),
            PCIE_ROOT: string(fn.pcie_root),
        }
        devices.append(Device(name=device_name(fn.bus_id), attributes=attributes))
    return DriverInventory(DRIVER, tuple(devices))
