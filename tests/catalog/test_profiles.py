"""The hardware catalog: every profile builds valid nodes and slices with realistic content."""

from __future__ import annotations

import re
from collections import Counter as Tally

import pytest

from kubedra.api.core import Node
from kubedra.api.meta import ObjectMeta
from kubedra.api.quantity import Quantity
from kubedra.api.resource import Device, ResourcePool, ResourceSlice, ResourceSliceSpec
from kubedra.api.validation import validate
from kubedra.catalog import NVLINK_DOMAIN_ATTRIBUTE, PROFILES, DriverInventory, profile

NAMES = (
    "h100x8",
    "h200x8",
    "a100-80x8",
    "a100-40x8-mig",
    "h100x8-mig",
    "l4x4",
    "b200x8",
    "tpu-v5e-2x4",
    "tpu-v6e-2x4",
)
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "resource.kubernetes.io/numaNode"
UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def slices(node: str, inv: DriverInventory) -> list[ResourceSlice]:
    """Split like the driver does: counter sets alone (<= 8 per slice), devices <= 64/128."""
    counters = [inv.shared_counters[i : i + 8] for i in range(0, len(inv.shared_counters), 8)]
    limit = 64 if any(d.consumes_counters for d in inv.devices) else 128
    devices = [inv.devices[i : i + limit] for i in range(0, len(inv.devices), limit)]
    pool = ResourcePool(name=node, generation=1, resource_slice_count=len(counters) + len(devices))
    specs = [
        ResourceSliceSpec(driver=inv.driver, pool=pool, node_name=node, shared_counters=c)
        for c in counters
    ]
    specs += [
        ResourceSliceSpec(driver=inv.driver, pool=pool, node_name=node, devices=d) for d in devices
    ]
    return [
        ResourceSlice(
            api_version="resource.k8s.io/v1",
            kind="ResourceSlice",
            metadata=ObjectMeta(name=f"{node}-{inv.driver}-{n}"),
            spec=spec,
        )
        for n, spec in enumerate(specs)
    ]


def inventory(name: str, driver: str, node: str = "node-a") -> DriverInventory:
    (inv,) = [i for i in profile(name).inventories(node) if i.driver == driver]
    return inv


def attr(d: Device, key: str) -> object:
    return d.attributes[key].value


def test_profile_names_are_exactly_the_catalog() -> None:
    assert tuple(PROFILES) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_slice_and_node_validates(name: str) -> None:
    p = profile(name)
    assert p.source and p.description
    node = p.node("node-a")
    assert validate(node) == []
    for inv in p.inventories("node-a"):
        for rs in slices("node-a", inv):
            assert validate(rs) == [], rs.metadata.name


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("h100x8", {"gpu.nvidia.com": 8, "dra.net": 4}),
        ("h200x8", {"gpu.nvidia.com": 8, "dra.net": 4}),
        ("a100-80x8", {"gpu.nvidia.com": 8, "dra.net": 4}),
        ("a100-40x8-mig", {"gpu.nvidia.com": 8 * 26, "dra.net": 4}),
        ("h100x8-mig", {"gpu.nvidia.com": 8 * 26, "dra.net": 4}),
        ("l4x4", {"gpu.nvidia.com": 4}),
        ("b200x8", {"gpu.nvidia.com": 8, "dra.net": 4}),
        ("tpu-v5e-2x4", {"tpu.google.com": 8}),
        ("tpu-v6e-2x4", {"tpu.google.com": 8}),
    ],
)
def test_device_counts_per_driver(name: str, counts: dict[str, int]) -> None:
    invs = profile(name).inventories("node-a")
    assert {i.driver: len(i.devices) for i in invs} == counts


@pytest.mark.parametrize(
    ("name", "product", "memory", "cc"),
    [
        ("h100x8", "NVIDIA H100 80GB HBM3", "81559Mi", "9.0.0"),
        ("h200x8", "NVIDIA H200", "143771Mi", "9.0.0"),
        ("a100-80x8", "NVIDIA A100-SXM4-80GB", "81920Mi", "8.0.0"),
        ("l4x4", "NVIDIA L4", "23034Mi", "8.9.0"),
        ("b200x8", "NVIDIA B200", "183359Mi", "10.0.0"),
    ],
)
def test_full_gpu_attributes_and_memory(name: str, product: str, memory: str, cc: str) -> None:
    p = profile(name)
    assert p.gpu_model == product
    gpus = inventory(name, "gpu.nvidia.com").devices
    assert [d.name for d in gpus] == [f"gpu-{i}" for i in range(p.gpu_count)]
    for i, d in enumerate(gpus):
        assert attr(d, "type") == "gpu"
        assert attr(d, "productName") == product
        assert attr(d, "index") == attr(d, "minor") == i
        assert d.attributes["cudaComputeCapability"].version == cc
        assert d.attributes["driverVersion"].version == "580.126.9"
        assert attr(d, "pcieBusID") == attr(d, "resource.kubernetes.io/pciBusID")
        assert str(attr(d, PCIE_ROOT)).startswith("pci0000:")
        assert d.capacity["memory"].value == Quantity.parse(memory)
        assert UUID_RE.match(str(attr(d, "uuid")))


def test_node_labels_and_resources() -> None:
    node: Node = profile("h100x8").node("gpu-node-7")
    labels = node.metadata.labels
    assert labels["kubernetes.io/hostname"] == "gpu-node-7"
    assert labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert node.status is not None
    cap, alloc = node.status.capacity, node.status.allocatable
    assert cap["cpu"] == Quantity.from_int(192)
    assert cap["memory"] == Quantity.parse("2Ti")
    assert alloc["nvidia.com/gpu"] == Quantity.from_int(8)
    assert Quantity.parse("191") < alloc["cpu"] < cap["cpu"]
    assert Quantity.parse("1900Gi") < alloc["memory"] < cap["memory"]

    tpu = profile("tpu-v6e-2x4").node("tpu-0")
    assert tpu.metadata.labels["cloud.google.com/gke-tpu-topology"] == "2x4"
    assert tpu.metadata.labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    assert tpu.status is not None
    assert tpu.status.allocatable["google.com/tpu"] == Quantity.from_int(8)
    assert "nvidia.com/gpu" not in tpu.status.capacity


@pytest.mark.parametrize("name", ["h100x8", "h200x8", "a100-80x8", "a100-40x8-mig", "b200x8"])
def test_each_nic_shares_its_pcie_root_and_numa_with_two_gpus(name: str) -> None:
    gpus = [d for d in inventory(name, "gpu.nvidia.com").devices if attr(d, "type") == "gpu"]
    nics = inventory(name, "dra.net").devices
    roots = Tally(attr(g, PCIE_ROOT) for g in gpus)
    for nic in nics:
        root = attr(nic, PCIE_ROOT)
        assert roots[root] == 2
        assert attr(nic, "dra.net/rdma") is True
        assert {attr(g, NUMA) for g in gpus if attr(g, PCIE_ROOT) == root} == {attr(nic, NUMA)}
        assert attr(nic, "dra.net/numaNode") == attr(nic, NUMA)
    assert {attr(n, PCIE_ROOT) for n in nics} == set(roots)


def test_p4d_nic_naming_matches_aws() -> None:
    nics = inventory("a100-40x8-mig", "dra.net").devices
    assert nics[0].name == "pci-0000-10-1b-0"
    assert [attr(n, "dra.net/rdmaDevice") for n in nics] == [
        "rdmap16s27",
        "rdmap32s27",
        "rdmap144s27",
        "rdmap160s27",
    ]


def test_nvlink_domain_per_node_and_absent_on_pcie() -> None:
    key = NVLINK_DOMAIN_ATTRIBUTE.removeprefix("gpu.nvidia.com/")
    a = {attr(d, key) for d in inventory("h100x8", "gpu.nvidia.com", "a").devices}
    b = {attr(d, key) for d in inventory("h100x8", "gpu.nvidia.com", "b").devices}
    assert len(a) == len(b) == 1
    assert a != b
    assert all(key not in d.attributes for d in inventory("l4x4", "gpu.nvidia.com").devices)
    assert profile("l4x4").inventories("a")[0].driver == "gpu.nvidia.com"
    assert len(profile("l4x4").inventories("a")) == 1  # no RDMA NIC on the L4 box


def test_uuids_are_deterministic_and_unique_across_nodes() -> None:
    def uuids(name: str, node: str) -> list[object]:
        return [attr(d, "uuid") for d in profile(name).inventories(node)[0].devices]

    assert uuids("h100x8", "n1") == uuids("h100x8", "n1")
    every = [u for node in ("n1", "n2", "n3") for u in uuids("h100x8", node)]
    every += uuids("tpu-v5e-2x4", "n1") + uuids("tpu-v6e-2x4", "n2")
    assert len(every) == len(set(every)) == 3 * 8 + 16
    assert profile("h100x8").node("n1").metadata.uid == profile("h100x8").node("n1").metadata.uid


def test_tpu_topology_attributes() -> None:
    for name, gen, acc in [
        ("tpu-v5e-2x4", "v5litepod", "tpu-v5-lite-podslice"),
        ("tpu-v6e-2x4", "v6e", "tpu-v6e-slice"),
    ]:
        chips = inventory(name, "tpu.google.com").devices
        assert [d.name for d in chips] == [str(i) for i in range(8)]
        for i, d in enumerate(chips):
            assert (attr(d, "index"), attr(d, "tpuGen"), attr(d, "accelerator")) == (i, gen, acc)
            assert (attr(d, "topology"), attr(d, "chipCount"), attr(d, "brand")) == (
                "2x4",
                8,
                "Google",
            )


def test_profile_lookup_error_lists_known_names() -> None:
    with pytest.raises(KeyError) as err:
        profile("nope")
    message = str(err.value)
    assert "nope" in message
    assert all(n in message for n in NAMES)
