"""Dynamic MIG on the A100 40GB profile: counter sets and partitionable devices."""

from __future__ import annotations

from collections import defaultdict

import pytest

from kubedra.api.quantity import Quantity
from kubedra.api.resource import CounterSet, Device
from kubedra.catalog import DriverInventory, profile


@pytest.fixture(scope="module")
def gpu_inv() -> DriverInventory:
    (inv,) = [
        i for i in profile("a100-40x8-mig").inventories("mig-a") if i.driver == "gpu.nvidia.com"
    ]
    return inv


def by_gpu(inv: DriverInventory) -> dict[str, list[Device]]:
    groups: dict[str, list[Device]] = defaultdict(list)
    for d in inv.devices:
        groups[d.consumes_counters[0].counter_set].append(d)
    return groups


def totals(cs: CounterSet) -> dict[str, Quantity]:
    return {k: c.value for k, c in cs.counters.items()}


def used(devices: list[Device]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for d in devices:
        for k, c in d.consumes_counters[0].counters.items():
            out[k] = out.get(k, Quantity.from_int(0)).add(c.value)
    return out


def test_one_counter_set_per_gpu(gpu_inv: DriverInventory) -> None:
    assert [cs.name for cs in gpu_inv.shared_counters] == [f"gpu-{i}-counter-set" for i in range(8)]
    cs = gpu_inv.shared_counters[0]
    assert totals(cs) == {
        "multiprocessors": Quantity.from_int(98),
        "copy-engines": Quantity.from_int(7),
        "decoders": Quantity.from_int(5),
        "encoders": Quantity.from_int(0),
        "jpeg-engines": Quantity.from_int(1),
        "ofa-engines": Quantity.from_int(1),
        "memory": Quantity.parse("40192Mi"),
        **{f"memory-slice-{i}": Quantity.from_int(1) for i in range(8)},
    }


def test_every_device_consumes_only_its_own_gpus_counters(gpu_inv: DriverInventory) -> None:
    groups = by_gpu(gpu_inv)
    assert sorted(groups) == sorted(cs.name for cs in gpu_inv.shared_counters)
    for minor in range(8):
        devs = groups[f"gpu-{minor}-counter-set"]
        assert len(devs) == 26  # 1 full + 7 + 7 (+me placements) + 4 + 3 + 2 + 1 + 1
        assert all(d.name.startswith(f"gpu-{minor}") for d in devs)
        parent = devs[0]
        assert parent.name == f"gpu-{minor}"
        assert all(d.attributes["parentUUID"] == parent.attributes["uuid"] for d in devs[1:])


def test_full_gpu_consumes_exactly_the_counter_set(gpu_inv: DriverInventory) -> None:
    for cs in gpu_inv.shared_counters:
        full = next(d for d in gpu_inv.devices if f"{d.name}-counter-set" == cs.name)
        assert used([full]) == totals(cs)
        assert full.capacity["memory"].value == cs.counters["memory"].value
        assert full.capacity["multiprocessors"].value == cs.counters["multiprocessors"].value


def _named(inv: DriverInventory, *names: str) -> list[Device]:
    devs = {d.name: d for d in inv.devices}
    return [devs[n] for n in names]


def test_a_full_packing_of_small_instances_fits_and_sums_to_the_gpu(
    gpu_inv: DriverInventory,
) -> None:
    cs = totals(gpu_inv.shared_counters[0])
    seven = _named(gpu_inv, *(f"gpu-0-mig-1g5gb-19-{s}" for s in range(7)))
    u = used(seven)
    assert u["multiprocessors"] == cs["multiprocessors"]  # 7 x 14 SMs = 98
    assert u["copy-engines"] == cs["copy-engines"]
    assert u["memory"] <= cs["memory"]
    assert all(u[f"memory-slice-{i}"] == Quantity.from_int(1) for i in range(7))
    halves = used(_named(gpu_inv, "gpu-0-mig-3g20gb-9-0", "gpu-0-mig-3g20gb-9-4"))
    assert all(halves[f"memory-slice-{i}"] == Quantity.from_int(1) for i in range(8))
    assert halves["memory"] == Quantity.parse("39936Mi") <= cs["memory"]
    assert all(v <= cs[k] for k, v in halves.items())


def test_overlapping_placements_and_second_me_cannot_coexist(gpu_inv: DriverInventory) -> None:
    cs = totals(gpu_inv.shared_counters[0])
    clash = used(_named(gpu_inv, "gpu-0-mig-3g20gb-9-0", "gpu-0-mig-2g10gb-14-2"))
    assert clash["memory-slice-2"] > cs["memory-slice-2"]
    two_me = used(_named(gpu_inv, "gpu-0-mig-1g5gb-me-20-0", "gpu-0-mig-1g5gb-me-20-3"))
    assert two_me["ofa-engines"] > cs["ofa-engines"]
    full_and_mig = used(_named(gpu_inv, "gpu-0", "gpu-0-mig-1g5gb-19-6"))
    assert full_and_mig["memory-slice-6"] > cs["memory-slice-6"]


def test_mig_device_attributes(gpu_inv: DriverInventory) -> None:
    (d,) = _named(gpu_inv, "gpu-3-mig-7g40gb-0-0")
    assert d.attributes["type"].value == "mig"
    assert d.attributes["profile"].value == "7g.40gb"
    assert "uuid" not in d.attributes  # dynamic MIG devices do not exist yet
    assert d.capacity["memory"].value == Quantity.parse("40192Mi")
    profiles = {x.attributes["profile"].value for x in gpu_inv.devices if "profile" in x.attributes}
    assert profiles == {
        "1g.5gb",
        "1g.5gb+me",
        "1g.10gb",
        "2g.10gb",
        "3g.20gb",
        "4g.20gb",
        "7g.40gb",
    }
