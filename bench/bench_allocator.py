"""Allocator benchmarks: typical GPU claims on one node (warm caches, inventory built once)."""

from __future__ import annotations

import time
from typing import Any

from bench.harness import Row, per_call
from kubedra.allocator import AllocatedState, AllocationTimeout, Inventory, NodeInfo, allocate
from kubedra.api.codec import decode_object
from kubedra.api.resource import DeviceClass, ResourceClaim, ResourceSlice

GPU, NIC = "gpu.example.com", "nic.example.com"
NODE = NodeInfo("node-1", {"zone": "a"})
ROOT = "resource.kubernetes.io/pcieRoot"


def _obj(raw: dict[str, Any]) -> Any:
    return decode_object(raw).obj


def _slice(
    name: str,
    driver: str,
    devices: list[dict[str, Any]],
    counters: list[dict[str, Any]] | None = None,
    count: int = 1,
) -> ResourceSlice:
    """A slice of devices, or (1.35+: never both in one slice) of shared counters."""
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": count},
        "nodeName": "node-1",
    }
    if devices:
        spec["devices"] = devices
    if counters:
        spec["sharedCounters"] = counters
    return _obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": spec,
        }
    )  # type: ignore[no-any-return]


def _class(name: str, driver: str) -> DeviceClass:
    return _obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
    )  # type: ignore[no-any-return]


def _claim(
    requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None
) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return _obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
            "spec": {"devices": devices},
        }
    )  # type: ignore[no-any-return]


def _gpus() -> list[dict[str, Any]]:
    return [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "index": {"int": i},
                "productName": {"string": "H100"},
                "nvlinkDomain": {"string": f"nvl-{i // 8}"},
                ROOT: {"string": f"pci-{i // 2}"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(8)
    ]


def _nics() -> list[dict[str, Any]]:
    return [
        {"name": f"nic-{i}", "attributes": {ROOT: {"string": f"pci-{i // 2}"}}} for i in range(8)
    ]


def _mig() -> list[ResourceSlice]:
    profiles = (
        [("1g.10gb", 1, "10Gi")] * 7 + [("3g.40gb", 3, "40Gi")] * 2 + [("7g.80gb", 7, "80Gi")]
    )
    devices = [
        {
            "name": f"mig-{i}",
            "attributes": {"profile": {"string": p}},
            "consumesCounters": [
                {
                    "counterSet": "gpu-0",
                    "counters": {"slices": {"value": str(s)}, "memory": {"value": m}},
                }
            ],
        }
        for i, (p, s, m) in enumerate(profiles)
    ]
    counters = [{"name": "gpu-0", "counters": {"slices": {"value": "7"},
                                              "memory": {"value": "80Gi"}}}]  # fmt: skip
    return [_slice("mig", GPU, devices, count=2), _slice("mig-counters", GPU, [], counters, 2)]


def _time(fn: Any, calls: int) -> float:
    fn()  # warm caches
    return per_call(fn, calls) * 1e6


def run() -> list[Row]:
    classes = {"gpu": _class("gpu", GPU), "nic": _class("nic", NIC)}
    inv = Inventory.build([_slice("gpus", GPU, _gpus()), _slice("nics", NIC, _nics())])
    mig_inv = Inventory.build(_mig())
    empty = AllocatedState()
    rows: list[Row] = []

    def case(
        name: str, target_us: float, inventory: Inventory, claim: ResourceClaim, calls: int
    ) -> None:
        def once() -> None:
            assert allocate([claim], NODE, inventory, classes, empty).results is not None

        us = _time(once, calls)
        rows.append(Row("allocator", name, us, "µs/call", f"< {target_us:g} µs", us < target_us))

    one = _claim(
        [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "gpu",
                    "selectors": [
                        {
                            "cel": {
                                "expression": (
                                    f'device.attributes["{GPU}"].productName == "H100" && '
                                    f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi"))'
                                    " >= 0"
                                )
                            }
                        }
                    ],
                },
            }
        ]
    )
    case("1 GPU + CEL selector, 8-GPU node", 50, inv, one, 2000)
    eight = _claim(
        [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 8}}],
        [{"matchAttribute": f"{GPU}/nvlinkDomain"}],
    )
    case("8 GPUs + matchAttribute nvlinkDomain", 500, inv, eight, 500)
    pair = _claim(
        [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu"}},
            {"name": "nic", "exactly": {"deviceClassName": "nic"}},
        ],
        [{"matchAttribute": ROOT}],
    )
    case("GPU+NIC matchAttribute pcieRoot, 8+8", 1000, inv, pair, 1000)
    mig = _claim(
        [
            {
                "name": "mig",
                "exactly": {
                    "deviceClassName": "gpu",
                    "selectors": [
                        {"cel": {"expression": f'device.attributes["{GPU}"].profile == "3g.40gb"'}}
                    ],
                },
            }
        ]
    )
    case("MIG 3g.40gb on partitionable A100", 200, mig_inv, mig, 1000)

    # Worst case: 10 + 11 devices out of 20 -> every combination of the first request is
    # tried before the search can fail; bounded by the timeout.
    worst_inv = Inventory.build([_slice("many", GPU, [{"name": f"gpu-{i}"} for i in range(20)])])
    worst = _claim(
        [
            {"name": "a", "exactly": {"deviceClassName": "gpu", "count": 10}},
            {"name": "b", "exactly": {"deviceClassName": "gpu", "count": 11}},
        ]
    )
    start = time.perf_counter()
    note = "finished (unexpected)"
    try:
        allocate([worst], NODE, worst_inv, classes, empty, timeout_s=1.0)
    except AllocationTimeout as exc:
        note = f"stopped: {exc}"[:90]
    ms = (time.perf_counter() - start) * 1e3
    rows.append(
        Row(
            "allocator",
            "worst case 10+11 of 20, timeout 1s",
            ms,
            "ms",
            "≈ 1000 ms, clear error",
            note.startswith("stopped") and ms < 1500,
            note,
        )
    )
    return rows
