"""One declarative spec per NVIDIA GPU model: what NVML reports and how MIG carves it up.

Sources: /work/shared/design/upstream/drivers.md §1.3 (attributes), §1.4 (MIG tables, taken
from the dra-driver-nvidia-gpu code and a real `nvidia-smi mig -lgip` listing), §8 (memory
figures); NVIDIA datasheets for the marketing figures named in each comment.
Memory values marked "assumption" are the usual NVML totals, not read from a real slice.
"""

from __future__ import annotations

from dataclasses import dataclass


def starts(count: int, size: int) -> tuple[int, ...]:
    """Legal placement starts (in memory-slice units) of a MIG profile: 0, size, 2*size, ..."""
    return tuple(range(0, count * size, size))


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile as NVML describes it (`nvidia-smi mig -lgip`)."""

    name: str  # "1g.10gb", "1g.10gb+me"
    profile_id: int  # NVML GPU-instance profile ID (19 = 1_SLICE, 20 = +me, 15, 14, 9, 5, 0)
    memory_slices: int  # memory slices one instance occupies
    placements: tuple[int, ...]  # legal start slices
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    memory: str  # NVML MemorySizeMB x 2^20, as a quantity

    @property
    def device_suffix(self) -> str:
        """The profile as device names spell it: `1g.10gb+me` -> `1g10gb-me`."""
        return self.name.lower().replace(".", "").replace("+", "-")


@dataclass(frozen=True)
class MigGeometry:
    memory_slices: int
    profiles: tuple[MigProfile, ...]


@dataclass(frozen=True)
class GpuSpec:
    key: str  # catalog name of the model
    product_name: str  # NVML name, the `productName` attribute
    architecture: str  # the driver's `architecture` attribute
    compute_capability: str  # `cudaComputeCapability` (semver)
    memory: str  # NVML total memory, the `memory` capacity
    family: str  # GPU Feature Discovery's `nvidia.com/gpu.family` label
    nvlink: bool  # SXM board on an NVSwitch baseboard
    mig: MigGeometry | None = None

    @property
    def gfd_product(self) -> str:
        """The `nvidia.com/gpu.product` label GPU Feature Discovery sets (spaces -> dashes)."""
        return self.product_name.replace(" ", "-")


def _mig(
    name: str,
    pid: int,
    size: int,
    count: int,
    sm: int,
    ce: int,
    dec: int,
    jpeg: int,
    ofa: int,
    memory: str,
    *,
    enc: int = 0,
) -> MigProfile:
    return MigProfile(name, pid, size, starts(count, size), sm, ce, dec, enc, jpeg, ofa, memory)


# A100 40GB MIG geometry, drivers.md §1.4 table (NVIDIA MIG user guide, "A100 MIG profiles").
# 1g.5gb memory is confirmed in NVIDIA's docs; the larger ones are the usual NVML values.
A100_40GB_MIG = MigGeometry(
    memory_slices=8,
    profiles=(
        _mig("1g.5gb", 19, 1, 7, sm=14, ce=1, dec=0, jpeg=0, ofa=0, memory="4864Mi"),
        # +me: one instance per GPU (the single OFA/JPEG engine), at any of the 7 1g placements.
        _mig("1g.5gb+me", 20, 1, 7, sm=14, ce=1, dec=1, jpeg=1, ofa=1, memory="4864Mi"),
        _mig("1g.10gb", 15, 2, 4, sm=14, ce=1, dec=1, jpeg=0, ofa=0, memory="9856Mi"),
        _mig("2g.10gb", 14, 2, 3, sm=28, ce=2, dec=1, jpeg=0, ofa=0, memory="9856Mi"),
        _mig("3g.20gb", 9, 4, 2, sm=42, ce=3, dec=2, jpeg=0, ofa=0, memory="19968Mi"),
        _mig("4g.20gb", 5, 4, 1, sm=56, ce=4, dec=2, jpeg=0, ofa=0, memory="19968Mi"),
        _mig("7g.40gb", 0, 8, 1, sm=98, ce=7, dec=5, jpeg=1, ofa=1, memory="40192Mi"),
    ),
)

# H100 80GB MIG geometry from a real `nvidia-smi mig -lgip` listing (drivers.md §1.4).
H100_80GB_MIG = MigGeometry(
    memory_slices=8,
    profiles=(
        _mig("1g.10gb", 19, 1, 7, sm=16, ce=1, dec=1, jpeg=1, ofa=0, memory="9984Mi"),
        _mig("1g.10gb+me", 20, 1, 7, sm=16, ce=1, dec=1, jpeg=1, ofa=1, memory="9984Mi"),
        _mig("1g.20gb", 15, 2, 4, sm=26, ce=1, dec=1, jpeg=1, ofa=0, memory="20096Mi"),
        _mig("2g.20gb", 14, 2, 3, sm=32, ce=2, dec=2, jpeg=2, ofa=0, memory="20096Mi"),
        _mig("3g.40gb", 9, 4, 2, sm=60, ce=3, dec=3, jpeg=3, ofa=0, memory="40448Mi"),
        _mig("4g.40gb", 5, 4, 1, sm=64, ce=4, dec=4, jpeg=4, ofa=0, memory="40448Mi"),
        _mig("7g.80gb", 0, 8, 1, sm=132, ce=8, dec=7, jpeg=7, ofa=1, memory="81152Mi"),
    ),
)

# H200, A100 80GB and B200 support MIG too, but their per-profile SM/engine/memory figures are
# not verified in drivers.md (open items), so no MIG table is declared for them.

# NVIDIA H100 Tensor Core GPU datasheet (SXM5, 80 GB HBM3); 81559Mi per drivers.md §1.10.
H100_SXM5_80GB = GpuSpec(
    key="H100-SXM5-80GB",
    product_name="NVIDIA H100 80GB HBM3",
    architecture="Hopper",
    compute_capability="9.0.0",
    memory="81559Mi",
    family="hopper",
    nvlink=True,
    mig=H100_80GB_MIG,
)

# NVIDIA H200 Tensor Core GPU datasheet (SXM, 141 GB HBM3e); 143771Mi is the usual NVML total
# (assumption, drivers.md §8 row 5).
H200_SXM5_141GB = GpuSpec(
    key="H200-SXM5-141GB",
    product_name="NVIDIA H200",
    architecture="Hopper",
    compute_capability="9.0.0",
    memory="143771Mi",
    family="hopper",
    nvlink=True,
)

# NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB HBM2e); 81920Mi NVML total (assumption,
# drivers.md §8 row 2).
A100_SXM4_80GB = GpuSpec(
    key="A100-SXM4-80GB",
    product_name="NVIDIA A100-SXM4-80GB",
    architecture="Ampere",
    compute_capability="8.0.0",
    memory="81920Mi",
    family="ampere",
    nvlink=True,
)

# NVIDIA A100 datasheet (SXM4 40 GB HBM2); `40Gi` reported by the driver on p4d (drivers.md §8).
A100_SXM4_40GB = GpuSpec(
    key="A100-SXM4-40GB",
    product_name="NVIDIA A100-SXM4-40GB",
    architecture="Ampere",
    compute_capability="8.0.0",
    memory="40Gi",
    family="ampere",
    nvlink=True,
    mig=A100_40GB_MIG,
)

# NVIDIA L4 Tensor Core GPU datasheet (24 GB GDDR6, PCIe Gen4 x16, no NVLink, no MIG);
# 23034Mi is what nvidia-smi reports on g6/g2 instances (assumption).
L4_24GB = GpuSpec(
    key="L4-24GB",
    product_name="NVIDIA L4",
    architecture="Ada Lovelace",
    compute_capability="8.9.0",
    memory="23034Mi",
    family="ada-lovelace",
    nvlink=False,
)

# NVIDIA HGX B200 datasheet (B200 SXM, 192 GB HBM3e marketed, 180 GB per the MIG guide);
# 183359Mi is the usual NVML total (assumption; drivers.md §8 row 6).
B200_SXM_180GB = GpuSpec(
    key="B200-SXM-180GB",
    product_name="NVIDIA B200",
    architecture="Blackwell",
    compute_capability="10.0.0",
    memory="183359Mi",
    family="blackwell",
    nvlink=True,
)

GPU_MODELS: dict[str, GpuSpec] = {
    g.key: g
    for g in (
        H100_SXM5_80GB,
        H200_SXM5_141GB,
        A100_SXM4_80GB,
        A100_SXM4_40GB,
        L4_24GB,
        B200_SXM_180GB,
    )
}
