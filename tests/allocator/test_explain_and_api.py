"""Explanations, the state round trip, the search budget and inventory reuse."""

from __future__ import annotations

import pytest

from kubedra.allocator import (
    STAGES,
    AllocatedState,
    AllocationTimeout,
    Inventory,
    RequestFunnel,
    allocate,
    explain,
)
from kubedra.api.quantity import Quantity
from tests.allocator.fixtures import CLASSES, NODE1, claim, dev, match, req, slice_, state

SLICES = [
    slice_("slice-1", [
        dev("device-1", {"numa": 1}, taints=[{"key": "k", "effect": "NoSchedule"}]),
        dev("device-2", {"numa": 2}),
        dev("device-3", {"numa": 3}, capacity={"memory": "2Gi"}),
        dev("device-4", {"numa": 4}),
    ]),
    slice_("slice-b", [dev("device-1")], driver="driver-b"),
]  # fmt: skip


def test_funnel_counts_each_stage() -> None:
    c = claim("c", req(count=3, selectors=['device.attributes["driver-a"].numa >= 1']))
    inv = Inventory.build(SLICES)
    alloc = allocate([c], NODE1, inv, CLASSES, state(["driver-a/pool-1/device-4"]))
    assert alloc.results is None and alloc.unsatisfiable is not None
    assert alloc.unsatisfiable.summary == "cannot allocate all claims"
    (f,) = alloc.unsatisfiable.funnels
    assert isinstance(f, RequestFunnel)
    assert (f.claim, f.request, f.wanted) == ("default/c", "req-0", 3)
    assert f.counts == (5, 4, 4, 3, 2, 2)
    assert [s for s, _ in f.rows()] == list(STAGES)
    assert f.bottleneck == "free"


def test_first_failed_constraint_named() -> None:
    c = claim("c", req(count=2), constraints=[match("driver-a/numa")])
    alloc = allocate([c], NODE1, Inventory.build(SLICES), CLASSES, AllocatedState())
    assert alloc.unsatisfiable is not None
    failure = alloc.unsatisfiable.constraint
    assert failure is not None
    assert (failure.kind, failure.attribute, failure.index, failure.reason) == (
        "matchAttribute",
        "driver-a/numa",
        0,
        "value differs",
    )


def test_explain_reports_cel_error_with_expression_and_device() -> None:
    expr = 'device.attributes["driver-a"].missing'
    c = claim("c", req(selectors=[expr]))
    e = explain([c], NODE1, Inventory.build(SLICES), CLASSES, AllocatedState())
    assert e.error is not None and "CEL runtime error: no such key: missing" in e.error
    assert e.cel_expression == expr
    assert e.cel_device == "driver-a/pool-1/device-1"


def test_explain_success_has_funnels() -> None:
    e = explain([claim("c", req())], NODE1, Inventory.build(SLICES), CLASSES, AllocatedState())
    assert e.summary == "allocated" and e.allocation is not None and e.allocation.ok
    assert e.funnels[0].fit == 3


def test_state_from_claims_round_trip() -> None:
    shared = dev("device-1", capacity={"bw": "10"}, allowMultipleAllocations=True)
    inv = Inventory.build([slice_("s", [shared, dev("device-2")])])
    c1 = claim("c1", req(capacity={"bw": "4"}), req("req-1", cls="class-a"))
    first = allocate([c1], NODE1, inv, CLASSES, AllocatedState())
    assert first.results is not None
    persisted = claim("c1", req(capacity={"bw": "4"}), allocation={"devices": {"results": [
        {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device,
         **({"shareID": r.share_id, "consumedCapacity": {k: str(v) for k, v in r.consumed_capacity.items()}} if r.share_id else {})}
        for r in first.results[0].devices.results]}})  # fmt: skip
    rebuilt = AllocatedState.from_claims([persisted])
    assert rebuilt.devices == frozenset({("driver-a", "pool-1", "device-2")})
    assert rebuilt.consumed(("driver-a", "pool-1", "device-1")) == {
        "bw": Quantity.parse("4").nanos  # keyed as the device publishes it (upstream)
    }  # type: ignore[arg-type]
    again = allocate([claim("c2", req(capacity={"bw": "6"}))], NODE1, inv, CLASSES, rebuilt)
    assert again.results is not None
    too_much = allocate([claim("c3", req(capacity={"bw": "7"}))], NODE1, inv, CLASSES, rebuilt)
    assert too_much.results is None


def test_admin_results_are_invisible_in_state() -> None:
    admin = claim("a", req(admin=True), allocation={"devices": {"results": [
        {"request": "req-0", "driver": "driver-a", "pool": "pool-1", "device": "device-1", "adminAccess": True}]}})  # fmt: skip
    assert AllocatedState.from_claims([admin]).devices == frozenset()


def test_search_budget_stops_with_clear_error() -> None:
    # 10 + 11 devices out of 20: every combination for req-0 is tried before giving up.
    devices = [dev(f"device-{i}") for i in range(20)]
    c = claim("c", req(count=10), req("req-1", count=11))
    inv = Inventory.build([slice_("s", devices)])
    with pytest.raises(
        AllocationTimeout,
        match="timed out trying to allocate devices on node node-1: search budget of 1000 steps exhausted",
    ):
        allocate([c], NODE1, inv, CLASSES, AllocatedState(), max_steps=1000)
    with pytest.raises(AllocationTimeout, match=r"search stopped after 0.05s"):
        allocate([c], NODE1, inv, CLASSES, AllocatedState(), timeout_s=0.05)


def test_inventory_reused_across_calls_and_nodes() -> None:
    inv = Inventory.build(
        [
            slice_("s1", [dev("device-1")]),
            slice_("s2", [dev("device-2")], pool="pool-2", node="node-2"),
        ]
    )
    from kubedra.allocator import NodeInfo

    for _ in range(3):
        a1 = allocate([claim("c", req())], NODE1, inv, CLASSES, AllocatedState())
        a2 = allocate([claim("c", req())], NodeInfo("node-2", {}), inv, CLASSES, AllocatedState())
        assert a1.results and a1.results[0].devices.results[0].device == "device-1"
        assert a2.results and a2.results[0].devices.results[0].device == "device-2"


def test_order_hook_reorders_first_fit() -> None:
    inv = Inventory.build([slice_("s", [dev("device-1"), dev("device-2"), dev("device-3")])])
    seen = []

    def last_first(key, refs):  # type: ignore[no-untyped-def]
        seen.append(key)
        return list(reversed(refs))[:1]  # drops devices on purpose: they stay available

    a = allocate(
        [claim("c", req(count=2))], NODE1, inv, CLASSES, AllocatedState(), order=last_first
    )
    assert a.results is not None
    assert [r.device for r in a.results[0].devices.results] == ["device-3", "device-1"]
    assert seen[0] == ("default/c", "req-0")
