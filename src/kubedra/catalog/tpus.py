"""TPU chips as the Google TPU DRA driver (`tpu.google.com`) publishes them (drivers.md §2).

Per chip: `index`, `uuid`, `tpuGen`, `brand`, `accelerator`, `chipCount`, `topology` (the
slice's ICI topology string; the driver publishes no per-chip coordinates, no capacities, no
pcieRoot/NUMA). Device names are the vfio IOMMU group numbers (v5e and later use vfio-pci);
the catalog numbers them 0..N-1. Upstream seeds `uuid` from the node name and may repeat it
on every chip of a node; the catalog seeds it from node name and index so it is unique.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubedra.api.resource import Device
from kubedra.catalog.inventory import DriverInventory, integer, stable_uuid, string

DRIVER = "tpu.google.com"


@dataclass(frozen=True)
class TpuSpec:
    generation: str  # `tpuGen`, from the PCI device ID
    accelerator: str  # `accelerator` / GKE `cloud.google.com/gke-tpu-accelerator`
    topology: str  # chips in the slice, e.g. `2x4`
    chips_per_host: int


def tpu_uuid(node_name: str, index: int) -> str:
    return f"tpu-{stable_uuid(node_name, 'tpu', index)}"


def tpu_inventory(node_name: str, spec: TpuSpec) -> DriverInventory:
    devices = tuple(
        Device(
            name=str(index),
            attributes={
                "index": integer(index),
                "uuid": string(tpu_uuid(node_name, index)),
                "tpuGen": string(spec.generation),
                "brand": string("Google"),
                "accelerator": string(spec.accelerator),
                "chipCount": integer(spec.chips_per_host),
                "topology": string(spec.topology),
            },
        )
        for index in range(spec.chips_per_host)
    )
    return DriverInventory(DRIVER, devices)
