"""One declarative spec per NVIDIA GPU model: what NVML reports and how MIG carves it up.

Sources: /work/shared/design/upstream/drivers.md §1.3 (attributes), §1.4 (MIG tables, taken
from the dra-driver-nvidia-gpu code and a real `nvidia-smi mig -lgip` listing), §8 (memory
figures); NVIDIA datasheets for the marketing figures named in each comment; NVIDIA's
Multi-Instance GPU User Guide (r580), "Supported MIG Profiles" (Tables 6-9: A100, H100, H200,
B200) and "Getting Started with MIG" (`nvidia-smi mig -lgipp`: the placements).
Memory values marked "assumption" are the usual NVML totals, not read from a real slice.

MIG figures. NVIDIA's tables publish, per profile: the fraction of memory and of SMs, the
NVDEC/JPEG/OFA engines, the copy engines and the instance count; the placements (start slice,
size) are published as `nvidia-smi mig -lgipp` output and the guide's placement diagrams.
They do not publish the per-profile SM count or the memory NVML reports (MiB): those come
from a real `nvidia-smi mig -lgip` listing where one was read (H100 80GB; A100 40GB's SM
counts), and are estimates elsewhere, each named in the geometry's `estimated` field and in
a comment. An estimate follows a rule written next to it, never a number picked to look
right.
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
    # Where the figures come from, and which of them NVIDIA does not publish for this product
    # (estimated by the rule in the comment beside the table): field names of MigProfile.
    source: str = ""
    estimated: tuple[str, ...] = ()

    def profile(self, name: str) -> MigProfile:
        """The profile called `name` (KeyError naming the known ones otherwise)."""
        for p in self.profiles:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.profiles)
        raise KeyError(f"no MIG profile {name!r} (known: {known})")

    @property
    def compute_slices(self) -> int:
        """SM slices of the GPU (7 on every product here): the largest profile's `Ng`."""
        return max(compute_slices(p.name) for p in self.profiles)


def compute_slices(profile: str) -> int:
    """The compute (SM) slices a profile name says it takes: `3g.40gb` -> 3."""
    head, _, _ = profile.partition("g.")
    return int(head)


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


# A100 40GB MIG geometry, drivers.md §1.4 table (NVIDIA MIG user guide, "A100 MIG profiles",
# Table 6; placements from the guide's `nvidia-smi mig -lgipp` listing: 1g at 0..6, 1g.10gb at
# 0,2,4,6 (size 2; the table's "1/8 of memory" for 1g.10gb is a slip: -lgipp gives size 2),
# 2g at 0,2,4, 3g at 0,4 (size 4), 4g at 0, 7g at 0 (size 8)). 1g.5gb memory is confirmed in
# NVIDIA's docs; the larger ones are the usual NVML values, not verified on hardware
# (drivers.md §1.4 marks them so): flagged as estimates.
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
    source="NVIDIA MIG User Guide r580, Table 6 (A100); drivers.md §1.4 (nvidia-smi listing)",
    estimated=("memory",),
)

# H100 80GB MIG geometry from a real `nvidia-smi mig -lgip` listing (drivers.md §1.4); engines
# and copy engines agree with NVIDIA's H100 table (Table 7).
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
    source="nvidia-smi mig -lgip on H100 80GB HBM3 (drivers.md §1.4); MIG User Guide Table 7",
)


def _memory_estimate(total_mib: int, slices: int) -> str:
    """The estimated NVML memory of an instance on `slices` of 8 memory slices: an eighth of
    the GPU's NVML total per slice, rounded down to 256 MiB (NVML reports MIG memory in such
    steps on the listings we have). Used only where no listing was read; by construction no
    combination of instances sums past the GPU's total."""
    per_slice = total_mib // 8 // 256 * 256
    return f"{per_slice * slices}Mi"


def _mig_est(
    total_mib: int,
    name: str,
    pid: int,
    size: int,
    count: int,
    sm: int,
    ce: int,
    dec: int,
    jpeg: int,
    ofa: int,
) -> MigProfile:
    """A profile whose NVML memory is not published: `_memory_estimate` of its slices."""
    return _mig(name, pid, size, count, sm, ce, dec, jpeg, ofa, _memory_estimate(total_mib, size))


# A100 80GB: NVIDIA's A100 table (Table 6) with the names its note gives for the 80 GB product
# (1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb). Engines and copy engines
# as published for A100; placements as `-lgipp` lists them for A100. SM counts: not
# published per profile; the GA100 die is the 40 GB product's, whose real listing gives 14
# SMs per slice and 98 for 7g (carried over: estimate). Memory: not published (estimate,
# `_memory_estimate` of the 81920Mi NVML total).
_A100_80 = 81920
A100_80GB_MIG = MigGeometry(
    memory_slices=8,
    profiles=(
        _mig_est(_A100_80, "1g.10gb", 19, 1, 7, sm=14, ce=1, dec=0, jpeg=0, ofa=0),
        _mig_est(_A100_80, "1g.10gb+me", 20, 1, 7, sm=14, ce=1, dec=1, jpeg=1, ofa=1),
        _mig_est(_A100_80, "1g.20gb", 15, 2, 4, sm=14, ce=1, dec=1, jpeg=0, ofa=0),
        _mig_est(_A100_80, "2g.20gb", 14, 2, 3, sm=28, ce=2, dec=1, jpeg=0, ofa=0),
        _mig_est(_A100_80, "3g.40gb", 9, 4, 2, sm=42, ce=3, dec=2, jpeg=0, ofa=0),
        _mig_est(_A100_80, "4g.40gb", 5, 4, 1, sm=56, ce=4, dec=2, jpeg=0, ofa=0),
        _mig_est(_A100_80, "7g.80gb", 0, 8, 1, sm=98, ce=7, dec=5, jpeg=1, ofa=1),
    ),
    source="NVIDIA MIG User Guide r580, Table 6 (A100) and its 80 GB naming note",
    estimated=("multiprocessors", "memory"),
)

# H200 141GB (SXM5, NVL): NVIDIA's H200 table (Table 8): names, instance counts, copy engines
# and NVDEC/JPEG/OFA as published (the same split as H100's). Placements: the memory
# fractions are H100's (1/8, 1/4, 2/8, 4/8, full), so the starts are H100's (assumption: the
# guide gives `-lgipp` output for A100 only). SM counts: not published; H200 is the GH100 die
# with H100 SXM5's 132 SMs, so H100's real listing is carried over (estimate). Memory: not
# published (estimate, `_memory_estimate` of the 143771Mi NVML total).
_H200 = 143771
H200_141GB_MIG = MigGeometry(
    memory_slices=8,
    profiles=(
        _mig_est(_H200, "1g.18gb", 19, 1, 7, sm=16, ce=1, dec=1, jpeg=1, ofa=0),
        _mig_est(_H200, "1g.18gb+me", 20, 1, 7, sm=16, ce=1, dec=1, jpeg=1, ofa=1),
        _mig_est(_H200, "1g.35gb", 15, 2, 4, sm=26, ce=1, dec=1, jpeg=1, ofa=0),
        _mig_est(_H200, "2g.35gb", 14, 2, 3, sm=32, ce=2, dec=2, jpeg=2, ofa=0),
        _mig_est(_H200, "3g.71gb", 9, 4, 2, sm=60, ce=3, dec=3, jpeg=3, ofa=0),
        _mig_est(_H200, "4g.71gb", 5, 4, 1, sm=64, ce=4, dec=4, jpeg=4, ofa=0),
        _mig_est(_H200, "7g.141gb", 0, 8, 1, sm=132, ce=8, dec=7, jpeg=7, ofa=1),
    ),
    source="NVIDIA MIG User Guide r580, Table 8 (H200)",
    estimated=("multiprocessors", "memory"),
)

# B200 180GB: NVIDIA's B200 table (Table 9): names, instance counts, copy engines (2, 2, 2,
# 3, 6, 8, 16) and OFA (only +me and 7g hold one) as published. The same table gives 1 NVDEC
# and 1 JPEG for every profile, 7g.180gb included, which cannot be amounts drawn from one
# GPU (a 7g holding 1 would leave nothing for seven 1g's): decoders and JPEG engines are
# estimated as one per compute slice, Hopper's split. Placements: memory fractions as H100's,
# so H100's starts (assumption). SM counts: not published; estimate: the 7g holds all 148
# SMs (as H100's 7g holds all 132; 148 is the count commonly reported, not in NVIDIA's
# tables either), a k-slice profile k x floor(148 / 7) = 21k. Memory: not published
# (estimate, `_memory_estimate` of the 183359Mi NVML total). NVENC: none listed.
_B200 = 183359
B200_180GB_MIG = MigGeometry(
    memory_slices=8,
    profiles=(
        _mig_est(_B200, "1g.23gb", 19, 1, 7, sm=21, ce=2, dec=1, jpeg=1, ofa=0),
        _mig_est(_B200, "1g.23gb+me", 20, 1, 7, sm=21, ce=2, dec=1, jpeg=1, ofa=1),
        _mig_est(_B200, "1g.45gb", 15, 2, 4, sm=21, ce=2, dec=1, jpeg=1, ofa=0),
        _mig_est(_B200, "2g.45gb", 14, 2, 3, sm=42, ce=3, dec=2, jpeg=2, ofa=0),
        _mig_est(_B200, "3g.90gb", 9, 4, 2, sm=63, ce=6, dec=3, jpeg=3, ofa=0),
        _mig_est(_B200, "4g.90gb", 5, 4, 1, sm=84, ce=8, dec=4, jpeg=4, ofa=0),
        _mig_est(_B200, "7g.180gb", 0, 8, 1, sm=148, ce=16, dec=7, jpeg=7, ofa=1),
    ),
    source="NVIDIA MIG User Guide r580, Table 9 (B200)",
    estimated=("multiprocessors", "memory", "decoders", "jpeg_engines"),
)

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
    mig=H200_141GB_MIG,
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
    mig=A100_80GB_MIG,
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
    mig=B200_180GB_MIG,
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
