"""MIG geometry tables: NVIDIA's published figures, legal placements, consistent counters.

Checked for every GPU model with a MIG table (A100 40/80 GB, H100 80 GB, H200 141 GB, B200):
placements lie inside the GPU and on their profile's grid; the counters the driver publishes
allow exactly the combinations the hardware allows (memory slices disjoint, one media
extension per GPU): every maximal legal combination fits the counter set, and every pair of
placements that cannot coexist is refused by it; and the published figures (instance
counts, copy engines, media engines, names) are NVIDIA's (MIG User Guide r580, Tables 6-9).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from kubedra.api.quantity import Quantity
from kubedra.api.validation import validate
from kubedra.catalog import GPU_MODELS, GpuSpec, MigGeometry
from kubedra.catalog import gpus as catalog_gpus
from kubedra.catalog.gpus import compute_slices
from kubedra.catalog.inventory import gpu_functions
from kubedra.catalog.nvidia import gpu_inventory
from kubedra.catalog.profiles import pcie_per_gpu_layout

MIG_MODELS = {k: g for k, g in GPU_MODELS.items() if g.mig is not None}
NAMES = {
    "A100-SXM4-40GB": ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-SXM4-80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-SXM5-80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H200-SXM5-141GB": ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "B200-SXM-180GB": ("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
}
# NVIDIA's "Number of Instances Available", the same for every product with 7 compute slices
INSTANCES = (7, 1, 4, 3, 2, 1, 1)
# Copy engines as published (Tables 6-9), in NAMES order.
COPY_ENGINES = {
    "A100-SXM4-40GB": (1, 1, 1, 2, 3, 4, 7),
    "A100-SXM4-80GB": (1, 1, 1, 2, 3, 4, 7),
    "H100-SXM5-80GB": (1, 1, 1, 2, 3, 4, 8),
    "H200-SXM5-141GB": (1, 1, 1, 2, 3, 4, 8),
    "B200-SXM-180GB": (2, 2, 2, 3, 6, 8, 16),
}
# (NVDEC, JPEG, OFA) as published, where published as per-GPU amounts (B200's are not: see
# gpus.py; only its OFA column is checked).
MEDIA = {
    "A100-SXM4-40GB": ((0, 0, 0), (1, 1, 1), (1, 0, 0), (1, 0, 0), (2, 0, 0), (2, 0, 0), (5, 1, 1)),
    "H100-SXM5-80GB": ((1, 1, 0), (1, 1, 1), (1, 1, 0), (2, 2, 0), (3, 3, 0), (4, 4, 0), (7, 7, 1)),
    "H200-SXM5-141GB": ((1, 1, 0), (1, 1, 1), (1, 1, 0), (2, 2, 0), (3, 3, 0), (4, 4, 0), (7, 7, 1)),
}
MEDIA["A100-SXM4-80GB"] = MEDIA["A100-SXM4-40GB"]
# nvidia-smi mig -lgipp, as the guide prints it: {starts}:size per profile
PLACEMENTS = (((0, 1, 2, 3, 4, 5, 6), 1), ((0, 1, 2, 3, 4, 5, 6), 1), ((0, 2, 4, 6), 2),
              ((0, 2, 4), 2), ((0, 4), 4), ((0,), 4), ((0,), 8))  # fmt: skip

Placement = tuple[int, int]  # (profile index, start)


def geometry(key: str) -> MigGeometry:
    spec = MIG_MODELS[key]
    assert spec.mig is not None
    return spec.mig


def amounts(g: MigGeometry, i: int) -> dict[str, int]:
    p = g.profiles[i]
    return {
        "sm": p.multiprocessors, "ce": p.copy_engines, "dec": p.decoders, "enc": p.encoders,
        "jpeg": p.jpeg_engines, "ofa": p.ofa_engines, "mem": Quantity.parse(p.memory).value(),
    }  # fmt: skip


def totals(g: MigGeometry) -> dict[str, int]:
    """The counter set: the per-dimension maximum over the profiles (drivers.md §1.4)."""
    out: dict[str, int] = {}
    for i in range(len(g.profiles)):
        for k, v in amounts(g, i).items():
            out[k] = max(out.get(k, 0), v)
    return out


def slices_of(g: MigGeometry, pl: Placement) -> set[int]:
    i, start = pl
    return set(range(start, start + g.profiles[i].memory_slices))


def legal(g: MigGeometry, chosen: list[Placement]) -> bool:
    """The hardware's rule: memory slices disjoint, at most one media-extension instance,
    no more compute slices than the GPU has."""
    used: set[int] = set()
    for pl in chosen:
        mine = slices_of(g, pl)
        if used & mine:
            return False
        used |= mine
    me = sum(1 for i, _ in chosen if g.profiles[i].name.endswith("+me"))
    compute = sum(compute_slices(g.profiles[i].name) for i, _ in chosen)
    return me <= 1 and compute <= g.compute_slices


def counters_allow(g: MigGeometry, chosen: list[Placement]) -> bool:
    have = totals(g)
    used: dict[str, int] = {}
    for i, _ in chosen:
        for k, v in amounts(g, i).items():
            used[k] = used.get(k, 0) + v
    slices = [s for pl in chosen for s in slices_of(g, pl)]
    return all(used[k] <= have[k] for k in used) and len(slices) == len(set(slices))


def maximal_legal(g: MigGeometry) -> Iterator[list[Placement]]:
    every = [(i, s) for i, p in enumerate(g.profiles) for s in p.placements]

    def grow(start: int, chosen: list[Placement]) -> Iterator[list[Placement]]:
        extended = False
        for k in range(start, len(every)):
            if legal(g, [*chosen, every[k]]):
                extended = True
                yield from grow(k + 1, [*chosen, every[k]])
        if not extended and not any(legal(g, [*chosen, pl]) for pl in every if pl not in chosen):
            yield chosen

    yield from grow(0, [])


def test_every_mig_capable_model_has_a_table() -> None:
    assert sorted(MIG_MODELS) == sorted(NAMES)
    assert catalog_gpus.L4_24GB.mig is None


@pytest.mark.parametrize("key", sorted(NAMES))
def test_names_instances_and_placements_are_nvidias(key: str) -> None:
    g = geometry(key)
    assert g.memory_slices == 8 and g.compute_slices == 7
    assert tuple(p.name for p in g.profiles) == NAMES[key]
    assert tuple(p.profile_id for p in g.profiles) == (19, 20, 15, 14, 9, 5, 0)
    for p, (starts, size) in zip(g.profiles, PLACEMENTS, strict=True):
        assert (p.placements, p.memory_slices) == (starts, size), p.name
        assert all(s >= 0 and s + size <= g.memory_slices and s % size == 0 for s in starts)
    assert tuple(p.copy_engines for p in g.profiles) == COPY_ENGINES[key]
    ofa = tuple(p.ofa_engines for p in g.profiles)
    assert ofa == (0, 1, 0, 0, 0, 0, 1)
    if key in MEDIA:
        assert tuple((p.decoders, p.jpeg_engines, p.ofa_engines) for p in g.profiles) == MEDIA[key]


@pytest.mark.parametrize("key", sorted(NAMES))
def test_the_counters_hold_nvidias_instance_counts(key: str) -> None:
    """As many instances of one profile fit together as NVIDIA says, and no more."""
    g = geometry(key)
    for i, expected in enumerate(INSTANCES):
        most = max(
            n
            for n in range(len(g.profiles[i].placements) + 1)
            for chosen in itertools.combinations([(i, s) for s in g.profiles[i].placements], n)
            if counters_allow(g, list(chosen))
        )
        assert most == expected, g.profiles[i].name


@pytest.mark.parametrize("key", sorted(NAMES))
def test_counters_allow_exactly_the_legal_combinations(key: str) -> None:
    g = geometry(key)
    every = [(i, s) for i, p in enumerate(g.profiles) for s in p.placements]
    maximal = list(maximal_legal(g))
    assert len(maximal) > 20
    # every legal combination (a subset of a maximal one) fits the counters ...
    for chosen in maximal:
        assert counters_allow(g, chosen), [(g.profiles[i].name, s) for i, s in chosen]
    # ... and every pair the hardware refuses, the counters refuse (counters add up, so a
    # set whose pairs all fit is legal, and so fits)
    for a, b in itertools.combinations(every, 2):
        if not legal(g, [a, b]):
            assert not counters_allow(g, [a, b]), (g.profiles[a[0]].name, g.profiles[b[0]].name)
    # the whole GPU (4g + 3g, or seven 1g) is reachable
    names = {tuple(sorted(g.profiles[i].name for i, _ in m)) for m in maximal}
    assert tuple(sorted([NAMES[key][5], NAMES[key][4]])) in names
    assert (NAMES[key][0],) * 7 in names


@pytest.mark.parametrize("key", sorted(NAMES))
def test_estimates_are_named_and_sources_given(key: str) -> None:
    g = geometry(key)
    assert g.source
    # H100's figures are a real nvidia-smi listing; A100 40GB's memory beyond 1g.5gb is not
    assert bool(g.estimated) == (key != "H100-SXM5-80GB")
    fields = {"multiprocessors", "memory", "decoders", "jpeg_engines"}
    assert set(g.estimated) <= fields
    # memory grows with the memory slices and never passes the GPU's NVML total
    spec: GpuSpec = MIG_MODELS[key]
    full = Quantity.parse(spec.memory).value()
    for p in g.profiles:
        assert Quantity.parse(p.memory).value() <= full
    by_size = {p.memory_slices: Quantity.parse(p.memory).value() for p in g.profiles}
    assert by_size[1] < by_size[2] < by_size[4] < by_size[8]


@pytest.mark.parametrize("key", sorted(NAMES))
def test_dynamic_mig_inventory_validates(key: str) -> None:
    from kubedra.api.meta import ObjectMeta
    from kubedra.api.resource import ResourceSlice
    from kubedra.driver.publisher import slice_specs

    spec = MIG_MODELS[key]
    inv = gpu_inventory("n", spec, gpu_functions(pcie_per_gpu_layout(2)), mig=True)
    assert len(inv.devices) == 2 * 26 and len(inv.shared_counters) == 2
    for k, s in enumerate(slice_specs(inv, "n", 1)):
        rs = ResourceSlice(
            api_version="resource.k8s.io/v1",
            kind="ResourceSlice",
            metadata=ObjectMeta(name=f"n-{k}"),
            spec=s,
        )
        assert validate(rs) == []


def test_profile_lookup_and_compute_slices() -> None:
    g = geometry("H200-SXM5-141GB")
    assert g.profile("3g.71gb").placements == (0, 4)
    assert compute_slices("7g.141gb") == 7 and compute_slices("1g.18gb+me") == 1
    with pytest.raises(KeyError, match=r"known: 1g\.18gb"):
        g.profile("3g.40gb")
