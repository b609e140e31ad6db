"""The cold path's shortcuts keep upstream's answers: selector results shared between
devices alike in what a selector reads (projection), pools gathered lazily per node, and
claims prepared once per pod and reused across nodes."""

from __future__ import annotations

import itertools

import pytest

from kubedra.allocator import AllocatedState, Inventory, NodeInfo, allocate
from kubedra.allocator.projection import reads
from kubedra.api.resource import ResourceSlice
from kubedra.cel import CelEvalError, DeviceView, compile_selector
from tests.allocator.fixtures import (
    CLASSES,
    NODE1,
    NODE2,
    A,
    B,
    V,
    claim,
    dev,
    klass,
    region,
    req,
    slice_,
)

Q = "gpu.example.com"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f'device.driver == "{Q}"', ()),
        (f'device.attributes["{Q}"].model == "x"', (("attr", Q, "model"),)),
        (f'device.attributes["{Q}"]["model"] == "x"', (("attr", Q, "model"),)),
        (f'has(device.attributes["{Q}"].model)', (("attr", Q, "model"),)),
        (f'device.attributes["{Q}"].?model.orValue("") == ""', (("attr", Q, "model"),)),
        (f'device.capacity["{Q}"].memory.isGreaterThan(quantity("1"))', (("cap", Q, "memory"),)),
        (f'device.attributes["{Q}"].exists(k, k == "a")', (("attr", Q, None),)),
        (f'size(device.capacity["{Q}"]) > 1', (("cap", Q, None),)),
        ("device.allowMultipleAllocations", ()),
    ],
)
def test_projectable_reads(expression: str, expected: tuple[object, ...]) -> None:
    assert reads(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["model"] == "x"',  # dot-less: lenient mode's bare lookup
        'device.capacity["memory"].isGreaterThan(quantity("1"))',
        f'"{Q}" in device.attributes',  # the attributes map used whole
        "device.attributes.size() > 0",
        f'device.attributes[?"{Q}"].orValue({{}}).size() > 0',
        'device.attributes["a" + ".b"].x == 1',  # a computed domain
        "cel.bind(device, 1, device == 1)",  # `device` rebound
        "[device].size() == 1",
        f'device.attributes["{Q}"]["x/y"] == 1',
        "device.driver == (",  # does not parse
    ],
)
def test_not_projectable(expression: str) -> None:
    assert reads(expression) is None


def _views(sl: ResourceSlice) -> list[DeviceView]:
    return [DeviceView.of(sl.spec.driver, d) for d in sl.spec.devices]


def _direct(expression: str, view: DeviceView) -> bool | str:
    compiled = compile_selector(
        expression, consumable_capacity=True, list_attributes=True, enforce_cost_limit=False
    )
    try:
        return compiled.evaluate(view)
    except CelEvalError as exc:
        return f"error: {exc}"


def _shared(expression: str, inventory: Inventory, sl: ResourceSlice) -> list[bool | str]:
    out: list[bool | str] = []
    for entry in inventory.slice_entries(sl):
        try:
            out.append(inventory.matches(expression, entry, strict=False))
        except CelEvalError as exc:
            out.append(f"error: {exc}")
    return out


def test_shared_results_equal_device_by_device_evaluation() -> None:
    # Devices that agree on some attributes and differ on others, one with a bad version
    # (it fails every selector), values of every type (an int 1 is not the bool true),
    # the driver's own domain published bare and qualified, capacities equal in value but
    # written differently.
    devices = [
        dev("d0", {"model": "x", "n": 1, "flag": True, "v": V("1.0.0")}, {"mem": "1Gi"}),
        dev("d1", {"model": "x", "n": 1, "flag": True, "v": V("1.0.0")}, {"mem": "1Gi"}),
        dev("d2", {"model": "y", "n": True, "flag": 1, "v": V("1.0.0")}, {"mem": "1073741824"}),
        dev("d3", {f"{Q}/model": "x", "n": 2}, {f"{Q}/mem": "2Gi"}),
        dev("d4", {"model": "x", "v": V("not-a-version")}, {"mem": "1Gi"}),
        dev("d5", {"other.example.com/model": "x", "model": "z"}),
        dev("d6", {"model": "x", "n": 1, "flag": True, "v": V("1.0.0")}, {"mem": "1Gi"}),
    ]
    sl = slice_("s", devices, driver=Q)
    expressions = [
        f'device.attributes["{Q}"].model == "x"',
        f'device.attributes["{Q}"].n == 1',
        f'device.attributes["{Q}"].flag == true',
        f'has(device.attributes["{Q}"].n)',
        f'device.attributes["{Q}"].n > 0',  # errors where n is a bool
        f'device.capacity["{Q}"].mem.isGreaterThan(quantity("512Mi"))',
        f'device.attributes["{Q}"].exists(k, k == "flag")',
        'device.attributes["other.example.com"].model == "x"',
        f'device.attributes["{Q}"].v.isGreaterThan(semver("0.1.0"))',
        'device.driver == "b" || device.attributes["x.com"].y == 1',
    ]
    views = _views(sl)
    for expression in expressions:
        assert reads(expression) is not None, expression
        inventory = Inventory.build([sl])
        want = [_direct(expression, v) for v in views]
        assert _shared(expression, inventory, sl) == want, expression
    # the bad version is the device's own error, whatever its neighbours share
    assert "semantic version" in str(_shared(expressions[0], Inventory.build([sl]), sl)[4])


def test_results_shared_across_nodes_in_one_inventory() -> None:
    slices = [
        slice_(f"s{i}", [dev("nic", {"model": "m"}), dev("gpu", {"model": "g"})], node=f"n{i}")
        for i in range(3)
    ]
    inventory = Inventory.build(slices)
    cls = {"class-a": klass("class-a", A, [f'device.attributes["{A}"].model == "g"'])}
    c = claim("c", req())
    for i in range(3):
        out = allocate([c], NodeInfo(f"n{i}"), inventory, cls, AllocatedState())
        assert out.results is not None
        assert [r.device for r in out.results[0].devices.results] == ["gpu"]


def test_pools_the_same_whichever_node_is_asked_first() -> None:
    slices = [
        slice_("a1", [dev("d0"), dev("d1")], node="node-1"),
        slice_("a2", [dev("d0")], node="node-2", pool="pool-2"),
        slice_("shared", [dev("s0")], pool="shared", selector=region("region-2")),
        slice_("all", [dev("x0")], driver=B, pool="all", all_nodes=True),
    ]

    def shape(inventory: Inventory, node: NodeInfo) -> list[tuple[str, list[str]]]:
        return [(p.id, [e.ref.device for e, _ in p.devices]) for p in inventory.pools_for(node)]

    expected = {n.name: shape(Inventory.build(slices), n) for n in (NODE1, NODE2)}
    for order in itertools.permutations([NODE1, NODE2, NODE1, NODE2]):
        inventory = Inventory.build(slices)
        for node in order:
            assert shape(inventory, node) == expected[node.name]
    assert [p for p, _ in expected["node-2"]] == [f"{A}/pool-2", f"{A}/shared", f"{B}/all"]
    # the labels count when a slice selects nodes by label
    moved = NodeInfo("node-1", {"region": "region-2"})
    inventory = Inventory.build(slices)
    assert f"{A}/shared" not in [p for p, _ in shape(inventory, NODE1)]
    assert f"{A}/shared" in [p for p, _ in shape(inventory, moved)]


def test_prepared_claims_reused_across_nodes_without_state() -> None:
    slices = [
        slice_(f"s{i}", [dev("d0", {"m": 1}), dev("d1", {"m": 2})], node=f"n{i}") for i in range(3)
    ]
    inventory = Inventory.build(slices)
    c = claim("c", req(count=2), constraints=[{"matchAttribute": f"{A}/m"}])
    nodes = [NodeInfo(f"n{i}") for i in range(3)]
    for node in nodes:  # the constraint cannot hold: every node fails the same way
        out = allocate([c], node, inventory, CLASSES, AllocatedState())
        assert out.results is None
        assert out.unsatisfiable is not None and out.unsatisfiable.constraint is not None
    ok = claim("ok", req(count=2))
    for node in nodes:
        out = allocate([ok], node, inventory, CLASSES, AllocatedState())
        assert out.results is not None and len(out.results[0].devices.results) == 2


def test_a_class_changed_in_place_is_seen() -> None:
    inventory = Inventory.build([slice_("s", [dev("d0")])])
    classes = dict(CLASSES)
    c = claim("c", req())
    assert allocate([c], NODE1, inventory, classes, AllocatedState()).results is not None
    classes["class-a"] = klass("class-a", B)  # the same mapping, another class
    assert allocate([c], NODE1, inventory, classes, AllocatedState()).results is None
