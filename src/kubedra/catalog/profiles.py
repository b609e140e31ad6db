"""Node hardware profiles: node objects and per-driver inventories for simulated GPU/TPU hosts.

Node sizes are the cloud instance types named in each profile; allocatable follows GKE's
documented kubelet reservation formula (CPU: 6% of the first core, 1% of the second, 0.5% of
the next two, 0.25% above four; memory: 25% of the first 4 GiB, 20% of the next 4, 10% of the
next 8, 6% of the next 112, 2% above 128 GiB, plus a 100Mi eviction threshold).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kubedra.api.core import Node, NodeCondition, NodeStatus
from kubedra.api.meta import ObjectMeta
from kubedra.api.quantity import Quantity
from kubedra.catalog import gpus, nics, nvidia, tpus
from kubedra.catalog.gpus import GpuSpec
from kubedra.catalog.inventory import (
    DriverInventory,
    PcieRootComplex,
    gpu_functions,
    nic_functions,
    stable_uuid,
)
from kubedra.catalog.nics import NicSpec
from kubedra.catalog.tpus import TpuSpec

_MIB = 2**20
# Simulated nodes have no kubelet to report readiness: they are Ready from the start.
READY = NodeCondition(
    type="Ready", status="True", reason="KubeletReady", message="kubedra simulated node"
)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    source: str  # citation: datasheet, instance-type page, driver doc
    gpu_model: str | None  # NVML product name (the `productName` attribute); None for TPUs
    gpu_count: int
    instance_type: str
    cpu: int  # vCPUs
    memory_gib: int
    gpu: GpuSpec | None = None
    mig: bool = False  # publish the GPUs as partitionable MIG devices
    pcie: tuple[PcieRootComplex, ...] = ()
    nic: NicSpec | None = None
    tpu: TpuSpec | None = None
    max_pods: int = 110

    def __post_init__(self) -> None:
        placed = len(gpu_functions(self.pcie))
        if self.gpu is not None and placed != self.gpu_count:
            raise ValueError(f"{self.name}: {self.gpu_count} GPUs but {placed} placed on PCIe")
        if (self.gpu is None) != (self.gpu_model is None):
            raise ValueError(f"{self.name}: gpu_model and gpu must be set together")

    @property
    def tpu_count(self) -> int:
        return self.tpu.chips_per_host if self.tpu else 0

    def labels(self, node_name: str) -> dict[str, str]:
        labels = {
            "kubernetes.io/hostname": node_name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": self.instance_type,
        }
        if self.gpu is not None:  # GPU Feature Discovery labels (device-plugin baseline)
            labels |= {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": self.gpu.gfd_product,
                "nvidia.com/gpu.count": str(self.gpu_count),
                "nvidia.com/gpu.memory": str(Quantity.parse(self.gpu.memory).value() // _MIB),
                "nvidia.com/gpu.family": self.gpu.family,
            }
            if self.gpu.mig is not None:
                labels["nvidia.com/mig.capable"] = "true"
        if self.tpu is not None:  # GKE TPU node labels, also read by the TPU DRA driver
            labels |= {
                "cloud.google.com/gke-tpu-accelerator": self.tpu.accelerator,
                "cloud.google.com/gke-tpu-topology": self.tpu.topology,
                "cloud.google.com/gke-accelerator-count": str(self.tpu.chips_per_host),
            }
        return labels

    def node(self, node_name: str) -> Node:
        capacity = {
            "cpu": Quantity.from_int(self.cpu),
            "memory": Quantity.parse(f"{self.memory_gib}Gi"),
            "pods": Quantity.from_int(self.max_pods),
        }
        allocatable = dict(capacity)
        allocatable["cpu"] = Quantity.parse(f"{self.cpu * 1000 - _reserved_millicpu(self.cpu)}m")
        allocatable["memory"] = Quantity.parse(
            f"{self.memory_gib * 1024 - _reserved_memory_mib(self.memory_gib)}Mi"
        )
        extended = {}
        if self.gpu_count:  # what the NVIDIA device plugin would advertise (whole GPUs)
            extended["nvidia.com/gpu"] = Quantity.from_int(self.gpu_count)
        if self.tpu_count:
            extended["google.com/tpu"] = Quantity.from_int(self.tpu_count)
        return Node(
            api_version="v1",
            kind="Node",
            metadata=ObjectMeta(
                name=node_name, uid=stable_uuid(node_name, "node"), labels=self.labels(node_name)
            ),
            status=NodeStatus(
                capacity=capacity | extended,
                allocatable=allocatable | extended,
                conditions=(READY,),
            ),
        )

    def inventories(self, node_name: str) -> list[DriverInventory]:
        out = []
        if self.gpu is not None:
            out.append(
                nvidia.gpu_inventory(node_name, self.gpu, gpu_functions(self.pcie), mig=self.mig)
            )
        nic_fns = nic_functions(self.pcie)
        if self.nic is not None and nic_fns:
            out.append(nics.nic_inventory(self.nic, nic_fns))
        if self.tpu is not None:
            out.append(tpus.tpu_inventory(node_name, self.tpu))
        return out


def _reserved_millicpu(cores: int) -> int:
    tiers = ((1, 60), (1, 10), (2, 5))  # (cores, millicores reserved per core)
    reserved, left = 0, cores
    for size, per in tiers:
        take = min(left, size)
        reserved, left = reserved + take * per, left - take
    return reserved + (left * 25 + 9) // 10  # 2.5m per core above four, rounded up


def _reserved_memory_mib(gib: int) -> int:
    tiers = ((4, 25), (4, 20), (8, 10), (112, 6))  # (GiB, percent)
    reserved, left = 0, gib * 1024
    for size, pct in tiers:
        take = min(left, size * 1024)
        reserved, left = reserved + take * pct // 100, left - take
    return reserved + left * 2 // 100 + 100


def hgx_pairs_layout() -> tuple[PcieRootComplex, ...]:
    """8 GPUs on 4 PCIe roots, 2 GPUs + 1 RDMA NIC per root, roots split over 2 NUMA nodes.

    Bus numbers from AWS p4d.24xlarge (dranet gpu-efa live slices: roots `pci0000:10`, `:20`,
    `:90`, `:a0`; GPUs at `<bus>:1c.0`/`<bus>:1d.0`; EFA `rdmap16s27` = `0000:10:1b.0`).
    The other 8-GPU instance types reuse it (assumption: their real numbering is not sourced).
    """
    return tuple(
        PcieRootComplex(
            root=f"pci0000:{bus:02x}",
            numa_node=numa,
            gpus=(f"0000:{bus:02x}:1c.0", f"0000:{bus:02x}:1d.0"),
            nics=(f"0000:{bus:02x}:1b.0",),
        )
        for bus, numa in ((0x10, 0), (0x20, 0), (0x90, 1), (0xA0, 1))
    )


def pcie_per_gpu_layout(count: int, numa_node: int = 0) -> tuple[PcieRootComplex, ...]:
    """PCIe cards, each on its own root (illustrative bus numbers), all on one NUMA node."""
    return tuple(
        PcieRootComplex(
            root=f"pci0000:{0x30 + 2 * i:02x}",
            numa_node=numa_node,
            gpus=(f"0000:{0x31 + 2 * i:02x}:00.0",),
        )
        for i in range(count)
    )


def _gpu_profile(
    name: str,
    description: str,
    source: str,
    gpu: GpuSpec,
    instance_type: str,
    cpu: int,
    memory_gib: int,
    *,
    mig: bool = False,
) -> Profile:
    layout = hgx_pairs_layout() if gpu.nvlink else pcie_per_gpu_layout(4)
    return Profile(
        name=name,
        description=description,
        source=source,
        gpu_model=gpu.product_name,
        gpu_count=len(gpu_functions(layout)),
        instance_type=instance_type,
        cpu=cpu,
        memory_gib=memory_gib,
        gpu=gpu,
        mig=mig,
        pcie=layout,
        nic=nics.EFA if gpu.nvlink else None,
    )


def _tpu_profile(
    name: str,
    description: str,
    source: str,
    tpu: TpuSpec,
    instance_type: str,
    cpu: int,
    memory_gib: int,
) -> Profile:
    return Profile(
        name=name,
        description=description,
        source=source,
        gpu_model=None,
        gpu_count=0,
        instance_type=instance_type,
        cpu=cpu,
        memory_gib=memory_gib,
        tpu=tpu,
    )


_ALL = (
    # NVIDIA H100 Tensor Core GPU datasheet; AWS EC2 P5 page (p5.48xlarge: 8x H100 80GB SXM,
    # 192 vCPU, 2 TiB); drivers.md §1.10/§3.4. Real p5 has 32 EFA; 4 (one per GPU pair) here.
    _gpu_profile(
        "h100x8",
        "8x H100 80GB SXM5, NVSwitch, 4 EFA RDMA NICs",
        "NVIDIA H100 datasheet; AWS EC2 P5 instance types; drivers.md §1.10, §3.4",
        gpus.H100_SXM5_80GB,
        "p5.48xlarge",
        192,
        2048,
    ),
    # NVIDIA H200 datasheet; AWS EC2 P5e page (p5e.48xlarge: 8x H200 141GB, 192 vCPU, 2 TiB).
    _gpu_profile(
        "h200x8",
        "8x H200 141GB SXM5, NVSwitch, 4 EFA RDMA NICs",
        "NVIDIA H200 datasheet; AWS EC2 P5e instance types; drivers.md §8 row 5",
        gpus.H200_SXM5_141GB,
        "p5e.48xlarge",
        192,
        2048,
    ),
    # NVIDIA A100 datasheet; AWS EC2 P4de page (p4de.24xlarge: 8x A100 80GB, 96 vCPU, 1152 GiB).
    _gpu_profile(
        "a100-80x8",
        "8x A100 80GB SXM4, NVSwitch, 4 EFA RDMA NICs",
        "NVIDIA A100 datasheet; AWS EC2 P4de instance types; drivers.md §8 row 2",
        gpus.A100_SXM4_80GB,
        "p4de.24xlarge",
        96,
        1152,
    ),
    # AWS p4d.24xlarge (8x A100 40GB, 96 vCPU, 1152 GiB, 4 EFA), layout from dranet's live
    # slices; MIG as dynamic-MIG partitionable devices (drivers.md §1.4, §1.11, §8 row 1).
    _gpu_profile(
        "a100-40x8-mig",
        "8x A100 40GB SXM4 with dynamic MIG (partitionable), 4 EFA",
        "NVIDIA MIG user guide (A100 profiles); AWS EC2 P4d; drivers.md §1.4, §1.11, §8",
        gpus.A100_SXM4_40GB,
        "p4d.24xlarge",
        96,
        1152,
        mig=True,
    ),
    # The h100x8 host with its GPUs in MIG mode (dynamic MIG, partitionable devices), like
    # the recorded HGX host whose GPUs 6 and 7 run in MIG mode (drivers.md §1.4, §1.11).
    _gpu_profile(
        "h100x8-mig",
        "8x H100 80GB SXM5 with dynamic MIG (partitionable), 4 EFA",
        "NVIDIA MIG user guide (H100 profiles); AWS EC2 P5; drivers.md §1.4, §1.11",
        gpus.H100_SXM5_80GB,
        "p5.48xlarge",
        192,
        2048,
        mig=True,
    ),
    # NVIDIA L4 datasheet; AWS EC2 G6 page (g6.24xlarge: 4x L4 24GB, 96 vCPU, 384 GiB).
    _gpu_profile(
        "l4x4",
        "4x L4 24GB PCIe, no NVLink, no RDMA NIC",
        "NVIDIA L4 datasheet; AWS EC2 G6 instance types",
        gpus.L4_24GB,
        "g6.24xlarge",
        96,
        384,
    ),
    # NVIDIA HGX B200 datasheet; AWS EC2 P6 page (p6-b200.48xlarge: 8x B200, 192 vCPU, 2 TiB).
    _gpu_profile(
        "b200x8",
        "8x B200 SXM, NVLink5 NVSwitch, 4 EFA RDMA NICs",
        "NVIDIA HGX B200 datasheet; AWS EC2 P6-B200 instance types; drivers.md §8 row 6",
        gpus.B200_SXM_180GB,
        "p6-b200.48xlarge",
        192,
        2048,
    ),
    # GKE TPU v5e docs: ct5lp-hightpu-8t = 8 v5e chips (2x4), 224 vCPU, 192 GB; drivers.md §2.
    _tpu_profile(
        "tpu-v5e-2x4",
        "Cloud TPU v5e host, 8 chips, single-host 2x4 slice",
        "Google Cloud TPU v5e docs (ct5lp-hightpu-8t); drivers.md §2",
        TpuSpec("v5litepod", "tpu-v5-lite-podslice", "2x4", 8),
        "ct5lp-hightpu-8t",
        224,
        192,
    ),
    # GKE TPU v6e (Trillium) docs: ct6e-standard-8t = 8 chips (2x4), 180 vCPU, 1440 GB.
    _tpu_profile(
        "tpu-v6e-2x4",
        "Cloud TPU v6e (Trillium) host, 8 chips, single-host 2x4 slice",
        "Google Cloud TPU v6e docs (ct6e-standard-8t); drivers.md §2",
        TpuSpec("v6e", "tpu-v6e-slice", "2x4", 8),
        "ct6e-standard-8t",
        180,
        1440,
    ),
)

PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in _ALL})


def profile(name: str) -> Profile:
    """The profile called `name`; KeyError naming every known profile otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}") from None
