"""Publishing inventories as ResourceSlices into a real SqliteStore."""

from __future__ import annotations

from kubedra.api.core import Node
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    Counter,
    CounterSet,
    DeviceCounterConsumption,
    ResourceSlice,
)
from kubedra.catalog import profile
from kubedra.catalog.inventory import DriverInventory
from kubedra.driver import publisher
from kubedra.driver.publisher import Publisher, cleanup, list_slices, slice_specs

from .conftest import GPU, gpu_devices, gpu_inventory, make_node


def test_first_publish_one_slice_owned_by_node(store):
    node = make_node(store, "node-1")
    result = publisher.publish(store, gpu_inventory(8), "node-1")
    assert result.generation == 1 and result.created == 1
    (s,) = list_slices(store, GPU, "node-1")
    assert s.name == "node-1-gpu.nvidia.com-0"
    assert s.spec.node_name == "node-1" and s.spec.driver == GPU
    assert (s.spec.pool.name, s.spec.pool.generation, s.spec.pool.resource_slice_count) == (
        "node-1",
        1,
        1,
    )
    assert [d.name for d in s.spec.devices] == [f"gpu-{i}" for i in range(8)]
    (owner,) = s.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Node",
        "node-1",
        node.metadata.uid,
        True,
    )


def test_unchanged_republish_writes_nothing(store):
    make_node(store, "node-1")
    pub = Publisher(store, GPU, "node-1")
    pub.publish(gpu_inventory(4))
    rv = store.resource_version()
    again = pub.publish(gpu_inventory(4))
    assert not again.wrote and again.generation == 1
    assert store.resource_version() == rv  # not a single write
    # also a fresh publisher (agent restart) finds nothing to do
    assert not Publisher(store, GPU, "node-1").publish(gpu_inventory(4)).wrote
    assert store.resource_version() == rv


def test_inventory_change_bumps_generation(store):
    make_node(store, "node-1")
    pub = Publisher(store, GPU, "node-1")
    assert pub.publish(gpu_inventory(4)).generation == 1
    changed = pub.publish(gpu_inventory(5))
    assert changed.generation == 2 and changed.updated == 1
    (s,) = list_slices(store, GPU, "node-1")
    assert s.spec.pool.generation == 2 and len(s.spec.devices) == 5
    # a restarted agent continues from the stored generation
    assert Publisher(store, GPU, "node-1").publish(gpu_inventory(3)).generation == 3


def test_300_devices_split_into_3_slices(store):
    make_node(store, "node-1")
    result = publisher.publish(store, gpu_inventory(300), "node-1")
    slices = list_slices(store, GPU, "node-1")
    assert len(slices) == 3 and result.slices == tuple(
        f"node-1-gpu.nvidia.com-{i}" for i in range(3)
    )
    by_name = {s.name: s for s in slices}
    assert [len(by_name[n].spec.devices) for n in result.slices] == [128, 128, 44]
    assert {s.spec.pool.resource_slice_count for s in slices} == {3}
    assert {s.spec.pool.generation for s in slices} == {1}
    names = [d.name for n in result.slices for d in by_name[n].spec.devices]
    assert names == [f"gpu-{i}" for i in range(300)]


def test_counters_in_own_slice_and_64_limit():
    counters = CounterSet(
        name="gpu-0-counter-set", counters={"memory": Counter(value=Quantity.parse("80Gi"))}
    )
    devices = tuple(
        msgspec_replace(
            d,
            consumes_counters=(
                DeviceCounterConsumption(
                    counter_set="gpu-0-counter-set",
                    counters={"memory": Counter(value=Quantity.parse("1Gi"))},
                ),
            ),
        )
        for d in gpu_devices(70)
    )
    specs = slice_specs(DriverInventory(GPU, devices, (counters,)), "node-1")
    assert [(len(s.devices), len(s.shared_counters)) for s in specs] == [(0, 1), (64, 0), (6, 0)]
    assert {s.pool.resource_slice_count for s in specs} == {3}


def msgspec_replace(obj, **changes):
    import msgspec

    return msgspec.structs.replace(obj, **changes)


def test_empty_inventory_publishes_one_empty_slice(store):
    make_node(store, "node-1")
    publisher.publish(store, DriverInventory(GPU, ()), "node-1")
    (s,) = list_slices(store, GPU, "node-1")
    assert s.spec.devices == () and s.spec.pool.resource_slice_count == 1


def test_stale_slices_removed(store):
    make_node(store, "node-1")
    pub = Publisher(store, GPU, "node-1")
    pub.publish(gpu_inventory(300))
    result = pub.publish(gpu_inventory(10))
    assert result.deleted == 2 and result.generation == 2
    (s,) = list_slices(store, GPU, "node-1")
    assert s.name == "node-1-gpu.nvidia.com-0" and s.spec.pool.resource_slice_count == 1


def test_other_drivers_and_nodes_untouched(store):
    make_node(store, "node-1")
    make_node(store, "node-2")
    publisher.publish(store, gpu_inventory(2, "node-2"), "node-2")
    publisher.publish(store, DriverInventory("dra.net", ()), "node-1")
    publisher.publish(store, gpu_inventory(2), "node-1")
    assert cleanup(store, GPU, "node-1") == 1
    remaining = sorted((s.spec.driver, s.spec.node_name) for s in store.list(ResourceSlice))
    assert remaining == [("dra.net", "node-1"), (GPU, "node-2")]


def test_node_deletion_removes_slices(store):
    make_node(store, "node-1")
    make_node(store, "node-2")
    publisher.publish(store, gpu_inventory(300), "node-1")
    publisher.publish(store, gpu_inventory(1, "node-2"), "node-2")
    assert len(list_slices(store, GPU, "node-1")) == 3
    store.delete(Node, "node-1")
    assert list_slices(store, GPU, "node-1") == []
    assert len(list_slices(store, GPU, "node-2")) == 1


def test_owner_added_when_node_appears_later_without_bump(store):
    publisher.publish(store, gpu_inventory(2), "node-1")
    (s,) = list_slices(store, GPU, "node-1")
    assert s.metadata.owner_references == ()
    make_node(store, "node-1")
    result = publisher.publish(store, gpu_inventory(2), "node-1")
    assert result.generation == 1 and result.updated == 1
    (s,) = list_slices(store, GPU, "node-1")
    assert s.metadata.owner_references[0].kind == "Node"


def test_catalog_profiles_publish(store):
    """Mixed cluster: every driver of every catalog profile publishes valid slices."""
    for name in ("h100x8", "a100-40x8-mig", "tpu-v5e-2x4"):
        node = f"n-{name}"
        store.create(profile(name).node(node))
        for inventory in profile(name).inventories(node):
            result = publisher.publish(store, inventory, node)
            slices = list_slices(store, inventory.driver, node)
            assert len(slices) == len(result.slices)
            assert sum(len(s.spec.devices) for s in slices) == len(inventory.devices)
            assert sum(len(s.spec.shared_counters) for s in slices) == len(
                inventory.shared_counters
            )
            assert all(not (s.spec.devices and s.spec.shared_counters) for s in slices)
            limit = 64 if inventory.shared_counters else 128
            assert all(len(s.spec.devices) <= limit for s in slices)
