"""`mig-aware`: MIG instances placed where the mix loses least, through the real scheduler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubedra.allocator import Inventory, NodeInfo
from kubedra.api.codec import decode_object
from kubedra.api.resource import ResourceClaim
from kubedra.catalog import gpus
from kubedra.catalog.inventory import gpu_functions
from kubedra.catalog.nvidia import gpu_inventory
from kubedra.catalog.profiles import pcie_per_gpu_layout
from kubedra.cluster import SqliteStore
from kubedra.driver.publisher import publish
from kubedra.scheduler.policies import POLICIES, make_policy
from kubedra.scheduler.policies.mig_aware import MigAware
from kubedra.scheduler.policies.partitions import Model, Shape, Worth, shape_prices
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import GPU_CLASS, gpu_node, gpu_pod, gpu_template

MIG_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "mig.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression":
        'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"'}}]},
}  # fmt: skip


def mig_store(tmp_path: Path, gpu_count: int, spec: gpus.GpuSpec = gpus.H100_SXM5_80GB) -> SqliteStore:
    store = SqliteStore(tmp_path / "state.db")
    store.create(decode_object({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "mig-0", "labels": {"kubernetes.io/hostname": "mig-0"}},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi"}}}).obj)  # fmt: skip
    inv = gpu_inventory("mig-0", spec, gpu_functions(pcie_per_gpu_layout(gpu_count)), mig=True)
    publish(store, inv, "mig-0")
    store.create(decode_object(MIG_CLASS).obj)
    return store


def ask(store: SqliteStore, name: str, profile: str, count: int = 1, same_gpu: bool = False) -> None:
    """A pod with its own claim for `count` MIG instances of `profile`."""
    selector = f'device.attributes["gpu.nvidia.com"].profile == "{profile}"'
    devices: dict[str, Any] = {"requests": [{"name": "mig", "exactly": {
        "deviceClassName": "mig.nvidia.com", "count": count,
        "selectors": [{"cel": {"expression": selector}}]}}]}  # fmt: skip
    if same_gpu:
        devices["constraints"] = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}).obj)
    gpu_pod(store, name, claim=name)


def devices(store: SqliteStore, claim: str) -> list[str] | None:
    c = store.get(ResourceClaim, claim, "default")
    if c.status is None or c.status.allocation is None:
        return None
    return [r.device for r in c.status.allocation.devices.results]


def place(store: SqliteStore, scheduler: Scheduler, *asks: tuple[str, str]) -> dict[str, Any]:
    """Each request in turn (a scheduling cycle each): claim -> devices (None: refused)."""
    out = {}
    for name, profile in asks:
        ask(store, name, profile)
        scheduler.run_once()
        out[name] = devices(store, name)
    return out


def test_registered_by_name() -> None:
    assert POLICIES["mig-aware"] is MigAware
    assert isinstance(make_policy("mig-aware"), MigAware)


def test_keeps_a_whole_gpu_where_first_fit_does_not(tmp_path: Path) -> None:
    """Two H100s, then a 1g, a 4g and a 7g. First fit puts the 1g at slice 0 of GPU 0, where
    the 4g (which only starts there) can no longer go: the 4g takes GPU 1 and the 7g finds
    no whole GPU. mig-aware puts the 1g at the top of GPU 0, the 4g beside it: GPU 1 stays
    whole for the 7g."""
    asks = (("small", "1g.10gb"), ("half", "4g.40gb"), ("whole", "7g.80gb"))
    store = mig_store(tmp_path / "ff", 2)
    assert place(store, Scheduler(store, "first-fit"), *asks) == {
        "small": ["gpu-0-mig-1g10gb-19-0"],
        "half": ["gpu-1-mig-4g40gb-5-0"],
        "whole": None,
    }
    store = mig_store(tmp_path / "mig", 2)
    assert place(store, Scheduler(store, "mig-aware"), *asks) == {
        "small": ["gpu-0-mig-1g10gb-19-6"],
        "half": ["gpu-0-mig-4g40gb-5-0"],
        "whole": ["gpu-1-mig-7g80gb-0-0"],
    }


def test_a_primed_mix_keeps_the_4g_start_free(tmp_path: Path) -> None:
    """With 4g and 3g in the mix, a 3g goes to slices 4-7 (first fit: 0-3), so a 4g still
    fits beside it; partly used GPUs are filled before whole ones."""
    store = mig_store(tmp_path, 2)
    policy = MigAware()
    policy.prime({"3g.40gb": 1, "4g.40gb": 1})
    scheduler = Scheduler(store, policy)
    got = place(store, scheduler, ("a", "3g.40gb"), ("b", "4g.40gb"), ("c", "3g.40gb"))
    assert got == {
        "a": ["gpu-0-mig-3g40gb-9-4"],
        "b": ["gpu-0-mig-4g40gb-5-0"],
        "c": ["gpu-1-mig-3g40gb-9-4"],
    }
    assert policy.mix() == {"3g.40gb": 0.5, "4g.40gb": 0.5}


def test_the_observed_mix_counts_each_pod_once(tmp_path: Path) -> None:
    store = mig_store(tmp_path, 1)
    policy = MigAware()
    scheduler = Scheduler(store, policy)
    place(store, scheduler, ("a", "1g.10gb"), ("b", "1g.10gb"), ("c", "2g.20gb"), ("d", "7g.80gb"))
    scheduler.run_once()  # d is refused again: not counted twice
    assert policy.mix() == pytest.approx({"1g.10gb": 0.5, "2g.20gb": 0.25, "7g.80gb": 0.25})


def test_several_instances_on_one_gpu(tmp_path: Path) -> None:
    """A claim for two 1g's on one GPU (matchAttribute parentUUID): placed (feasibility never
    depends on the policy), from the top of the GPU."""
    store = mig_store(tmp_path, 2)
    scheduler = Scheduler(store, "mig-aware")
    ask(store, "pair", "1g.10gb", count=2, same_gpu=True)
    scheduler.run_once()
    got = devices(store, "pair")
    assert got is not None and len(got) == 2
    assert {d.split("-mig-")[0] for d in got} == {"gpu-0"}
    assert all(d.startswith("gpu-0-mig-1g10gb-19-") for d in got)


def test_pods_without_partitions_are_placed_as_first_fit(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    store.create(decode_object(GPU_CLASS).obj)
    for name in ("b-node", "a-node"):
        gpu_node(store, name, gpus=4)
    gpu_template(store, "two", 2)
    gpu_pod(store, "p", template="two")
    policy = MigAware()
    Scheduler(store, policy).run_once()
    claim = next(c for c in store.list(ResourceClaim) if c.status and c.status.allocation)
    assert claim.status is not None and claim.status.allocation is not None
    picked = [(r.pool, r.device) for r in claim.status.allocation.devices.results]
    assert picked == [("a-node", "gpu-0"), ("a-node", "gpu-1")]
    assert policy.mix() == {}


def h100_shape() -> Shape:
    inv = gpu_inventory("n", gpus.H100_SXM5_80GB, gpu_functions(pcie_per_gpu_layout(1)), mig=True)
    from kubedra.api.meta import ObjectMeta
    from kubedra.api.resource import ResourceSlice
    from kubedra.driver.publisher import slice_specs

    slices = [
        ResourceSlice(api_version="resource.k8s.io/v1", kind="ResourceSlice",
                      metadata=ObjectMeta(name=f"n-{i}"), spec=s)
        for i, s in enumerate(slice_specs(inv, "n", 1))
    ]  # fmt: skip
    model = Model(Inventory.build(slices), [NodeInfo("n", {})])
    (shape,) = model.shapes
    assert len(model.gpus) == 1 and len(shape.kinds) == 26
    return shape


def test_prices_by_hand() -> None:
    shape = h100_shape()
    # 1g's alone: seven to a GPU, each worth a seventh
    assert shape_prices(shape, {"1g.10gb": 1.0}) == pytest.approx({"1g.10gb": 1 / 7})
    # a 4g and a 3g fill a GPU together; two 3g's do too (memory): the duals certify that
    # one GPU holds a pair, whatever the split (objective: half a GPU per unit of demand)
    prices = shape_prices(shape, {"4g.40gb": 0.5, "3g.40gb": 0.5})
    assert prices["4g.40gb"] + prices["3g.40gb"] == pytest.approx(1.0)
    assert prices["3g.40gb"] <= 0.5 + 1e-9
    # the whole GPU alone: 1
    assert shape_prices(shape, {"7g.80gb": 1.0}) == pytest.approx({"7g.80gb": 1.0})


def test_worth_and_cost_of_placements() -> None:
    shape = h100_shape()
    worth = Worth(shape, {"4g.40gb": 0.5, "3g.40gb": 0.5})
    assert worth.value(shape.totals) == pytest.approx(1.0)  # 4g + 3g
    three = {s: shape.kinds.index("3g.40gb") + i for i, s in enumerate((0, 4))}
    # a 3g at slice 0 leaves a 3g's room (0.5), at slice 4 a 4g's (0.5): equal cost here,
    # and the tie goes to the higher start
    assert worth.cost(three[0], shape.totals) == pytest.approx(0.5)
    assert worth.cost(three[4], shape.totals) == pytest.approx(0.5)
    only_4g = Worth(shape, {"4g.40gb": 1.0})
    assert only_4g.cost(three[0], shape.totals) == pytest.approx(1.0)  # blocks the 4g
    assert only_4g.cost(three[4], shape.totals) == pytest.approx(0.0)
