"""Fixture builders for allocator tests: plain dicts decoded into the real API models."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubedra.allocator import (
    AllocatedState,
    Allocation,
    DeviceRef,
    Features,
    Inventory,
    NodeInfo,
    allocate,
)
from kubedra.allocator.types import DEFAULT_FEATURES
from kubedra.api.codec import decode_object
from kubedra.api.core import NodeSelector
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    AllocationResult,
    DeviceClass,
    DeviceRequestAllocationResult,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)

A, B = "driver-a", "driver-b"
NODE1 = NodeInfo("node-1", {"region": "region-1"})
NODE2 = NodeInfo("node-2", {"region": "region-2"})


@dataclass(frozen=True)
class V:
    """A version attribute value."""

    text: str


def _attr(value: Any) -> dict[str, Any]:
    if isinstance(value, V):
        return {"version": value.text}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, dict):
        return value  # already in wire form (lists, or deliberately empty)
    raise TypeError(value)


def dev(
    name: str,
    attrs: Mapping[str, Any] | None = None,
    capacity: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A device; capacity values are quantity strings or full DeviceCapacity dicts."""
    d: dict[str, Any] = {"name": name}
    if attrs:
        d["attributes"] = {k: _attr(v) for k, v in attrs.items()}
    if capacity:
        d["capacity"] = {
            k: v if isinstance(v, dict) else {"value": str(v)} for k, v in capacity.items()
        }
    d.update(extra)
    return d


def slice_(
    name: str,
    devices: Sequence[dict[str, Any]] = (),
    *,
    driver: str = A,
    pool: str = "pool-1",
    node: str | None = "node-1",
    gen: int = 1,
    count: int = 1,
    selector: dict[str, Any] | None = None,
    all_nodes: bool = False,
    per_device: bool = False,
    counters: Sequence[dict[str, Any]] = (),
) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": gen, "resourceSliceCount": count},
    }
    if selector is not None:
        spec["nodeSelector"] = selector
    elif all_nodes:
        spec["allNodes"] = True
    elif per_device:
        spec["perDeviceNodeSelection"] = True
    elif node is not None and not counters:
        spec["nodeName"] = node
    if devices:
        spec["devices"] = list(devices)
    if counters:
        spec["sharedCounters"] = list(counters)
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }
    obj = decode_object(raw).obj
    assert isinstance(obj, ResourceSlice)
    return obj


def counter_set(name: str, **counters: str) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}


def consumes(set_name: str, **counters: str) -> dict[str, Any]:
    return {"counterSet": set_name, "counters": {k: {"value": v} for k, v in counters.items()}}


def region(value: str, key: str = "region") -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
        ]
    }


def klass(
    name: str = "class-a",
    driver: str | None = A,
    selectors: Sequence[str] = (),
    config: Sequence[dict[str, Any]] = (),
) -> DeviceClass:
    sels = [f'device.driver == "{driver}"'] if driver else []
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in [*sels, *selectors]]}
    if config:
        spec["config"] = [{"opaque": c} for c in config]
    obj = decode_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": spec,
        }
    ).obj
    assert isinstance(obj, DeviceClass)
    return obj


CLASSES = {"class-a": klass("class-a", A), "class-b": klass("class-b", B)}


def _exact(
    cls: str,
    count: int | None,
    mode: str | None,
    selectors: Sequence[str],
    tolerations: Sequence[dict[str, Any]],
    capacity: Mapping[str, str] | None,
) -> dict[str, Any]:
    d: dict[str, Any] = {"deviceClassName": cls}
    if mode:
        d["allocationMode"] = mode
    if count is not None:
        d["count"] = count
    if selectors:
        d["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if tolerations:
        d["tolerations"] = list(tolerations)
    if capacity is not None:
        d["capacity"] = {"requests": dict(capacity)}
    return d


def req(
    name: str = "req-0",
    cls: str = "class-a",
    count: int | None = None,
    *,
    mode: str | None = None,
    selectors: Sequence[str] = (),
    admin: bool | None = None,
    tolerations: Sequence[dict[str, Any]] = (),
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    exact = _exact(cls, count, mode, selectors, tolerations, capacity)
    if admin is not None:
        exact["adminAccess"] = admin
    return {"name": name, "exactly": exact}


def sub(
    name: str,
    cls: str = "class-a",
    count: int | None = None,
    *,
    mode: str | None = None,
    selectors: Sequence[str] = (),
    tolerations: Sequence[dict[str, Any]] = (),
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {"name": name, **_exact(cls, count, mode, selectors, tolerations, capacity)}


def first(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def match(attr: str, *requests: str) -> dict[str, Any]:
    return {"matchAttribute": attr, **({"requests": list(requests)} if requests else {})}


def distinct(attr: str, *requests: str) -> dict[str, Any]:
    return {"distinctAttribute": attr, **({"requests": list(requests)} if requests else {})}


def claim(
    name: str,
    *requests: dict[str, Any],
    constraints: Sequence[dict[str, Any]] = (),
    config: Sequence[dict[str, Any]] = (),
    ns: str = "default",
    allocation: dict[str, Any] | None = None,
) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    raw: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }
    if allocation is not None:
        raw["status"] = {"allocation": allocation}
    obj = decode_object(raw).obj
    assert isinstance(obj, ResourceClaim)
    return obj


def taint_rule(name: str, taint: dict[str, Any], **selector: str) -> DeviceTaintRule:
    raw = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": taint},
    }
    obj = decode_object(raw).obj
    assert isinstance(obj, DeviceTaintRule)
    return obj


def ref(text: str) -> DeviceRef:
    driver, pool, device = text.split("/")
    return DeviceRef(driver, pool, device)


def state(
    allocated: Iterable[str] = (), shares: Iterable[tuple[str, Mapping[str, str]]] = ()
) -> AllocatedState:
    """Exclusively allocated devices, plus shares given as (device, consumed capacity)."""
    results = [
        DeviceRequestAllocationResult(request="r", driver=r.driver, pool=r.pool, device=r.device)
        for r in map(ref, allocated)
    ]
    for i, (text, cap) in enumerate(shares):
        r = ref(text)
        results.append(
            DeviceRequestAllocationResult(
                request="r", driver=r.driver, pool=r.pool, device=r.device,
                share_id=f"00000000-0000-0000-0000-{i:012d}",
                consumed_capacity={k: Quantity.parse(v) for k, v in cap.items()},
            )
        )  # fmt: skip
    from kubedra.api.resource import DeviceAllocationResult

    return AllocatedState().with_allocation(
        AllocationResult(devices=DeviceAllocationResult(results=tuple(results)))
    )


def run(
    claims: Sequence[ResourceClaim],
    slices: Sequence[ResourceSlice],
    *,
    classes: Mapping[str, DeviceClass] = CLASSES,
    allocated: AllocatedState | None = None,
    node: NodeInfo = NODE1,
    features: Features = DEFAULT_FEATURES,
    rules: Sequence[DeviceTaintRule] = (),
    **kwargs: Any,
) -> Allocation:
    inventory = Inventory.build(slices, rules, features=features)
    return allocate(
        claims, node, inventory, classes, allocated or AllocatedState(), features=features, **kwargs
    )


def picks(alloc: Allocation) -> list[list[str]] | None:
    """`request driver/pool/device` per result, per claim."""
    if alloc.results is None:
        return None
    return [
        [f"{r.request} {r.driver}/{r.pool}/{r.device}" for r in res.devices.results]
        for res in alloc.results
    ]


def pinned(node: str = "node-1") -> NodeSelector:
    import msgspec

    return msgspec.convert(
        {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
        NodeSelector,
    )


def selector(raw: dict[str, Any]) -> NodeSelector:
    import msgspec

    return msgspec.convert(raw, NodeSelector)
