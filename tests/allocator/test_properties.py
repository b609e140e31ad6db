"""Property tests: the allocator against an independent brute-force search."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubedra.allocator import AllocatedState, DeviceRef, Inventory, RequestKey, allocate
from tests.allocator.fixtures import CLASSES, NODE1, claim, dev, match, ref, req, slice_, state

SELECTORS = {
    None: lambda a: True,
    'device.attributes["driver-a"].num >= 1': lambda a: a["num"] >= 1,
    'device.attributes["driver-a"].s == "a"': lambda a: a["s"] == "a",
    '"s" in device.attributes["driver-a"] && device.attributes["driver-a"].num != 2': lambda a: (
        a["num"] != 2
    ),
}


@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    n_pools = draw(st.integers(1, 2))
    n_devices = draw(st.integers(0, 6))
    devices = []  # (pool, name, attrs) in upstream order: pool-1 first, slice order within
    for i in range(n_devices):
        pool = f"pool-{draw(st.integers(1, n_pools))}"
        attrs = {"num": draw(st.integers(0, 2)), "s": draw(st.sampled_from(["a", "b"]))}
        devices.append((pool, f"device-{i}", attrs))
    devices.sort(key=lambda d: d[0])  # stable: keeps index order within a pool
    n_requests = draw(st.integers(1, 3))
    requests = [
        (f"req-{i}", draw(st.integers(1, 2)), draw(st.sampled_from(list(SELECTORS))))
        for i in range(n_requests)
    ]
    constraint = None
    if draw(st.booleans()):
        attr = draw(st.sampled_from(["num", "s"]))
        names = draw(st.sets(st.sampled_from([r[0] for r in requests])))
        constraint = (attr, tuple(sorted(names)))
    allocated = draw(st.sets(st.sampled_from([d[1] for d in devices]))) if devices else set()
    return {
        "devices": devices,
        "requests": requests,
        "constraint": constraint,
        "allocated": allocated,
    }


def build(sc: dict[str, Any]) -> tuple[Any, ...]:
    pools: dict[str, list[dict[str, Any]]] = {}
    for pool, name, attrs in sc["devices"]:
        pools.setdefault(pool, []).append(dev(name, attrs))
    slices = [slice_(f"slice-{p}", ds, pool=p) for p, ds in pools.items()]
    constraints = []
    if sc["constraint"] is not None:
        attr, names = sc["constraint"]
        constraints = [match(f"driver-a/{attr}", *names)]
    c = claim(
        "claim-0",
        *[req(n, count=k, selectors=[e] if e else []) for n, k, e in sc["requests"]],
        constraints=constraints,
    )
    allocated = state([f"driver-a/{p}/{n}" for p, n, _ in sc["devices"] if n in sc["allocated"]])
    return slices, c, allocated


def brute_force(sc: dict[str, Any]) -> list[tuple[str, str]] | None:
    """First solution in upstream's order: per request, combinations of devices in order."""
    devices = sc["devices"]
    free = [i for i, d in enumerate(devices) if d[1] not in sc["allocated"]]
    options = []
    for _, count, expr in sc["requests"]:
        ok = [i for i in free if SELECTORS[expr](devices[i][2])]
        options.append(list(itertools.combinations(ok, count)))
    for choice in itertools.product(*options):
        used = [i for combo in choice for i in combo]
        if len(set(used)) != len(used):
            continue
        if sc["constraint"] is not None:
            attr, names = sc["constraint"]
            vals = {
                devices[i][2][attr]
                for (name, _, _), combo in zip(sc["requests"], choice, strict=True)
                if not names or name in names
                for i in combo
            }
            if len(vals) > 1:
                continue
        return [
            (name, f"{devices[i][0]}/{devices[i][1]}")
            for (name, _, _), combo in zip(sc["requests"], choice, strict=True)
            for i in combo
        ]
    return None


def check_valid(sc: dict[str, Any], got: Sequence[tuple[str, str]]) -> None:
    by_name = {f"{p}/{n}": attrs for p, n, attrs in sc["devices"]}
    used = [d for _, d in got]
    assert len(set(used)) == len(used), "device reused"
    for name, d in got:
        assert d.split("/")[1] not in sc["allocated"], "allocated device reused"
        expr = next(e for n, _, e in sc["requests"] if n == name)
        assert SELECTORS[expr](by_name[d])
    for name, count, _ in sc["requests"]:
        assert sum(1 for n, _ in got if n == name) == count
    if sc["constraint"] is not None:
        attr, names = sc["constraint"]
        assert len({by_name[d][attr] for n, d in got if not names or n in names}) <= 1


def run_one(sc: dict[str, Any], order: Any = None) -> list[tuple[str, str]] | None:
    slices, c, allocated = build(sc)
    inventory = Inventory.build(slices)
    result = allocate([c], NODE1, inventory, CLASSES, allocated, order=order)
    if result.results is None:
        return None
    return [(x.request, f"{x.pool}/{x.device}") for x in result.results[0].devices.results]


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_first_fit_equals_brute_force(sc: dict[str, Any]) -> None:
    expected = brute_force(sc)
    got = run_one(sc)
    if got is not None:
        check_valid(sc, got)
    assert got == expected


def _reverse(key: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
    return list(reversed(refs))


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_order_hook_never_changes_feasibility(sc: dict[str, Any]) -> None:
    got = run_one(sc, order=_reverse)
    assert (got is None) == (brute_force(sc) is None)
    if got is not None:
        check_valid(sc, got)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_state_from_claims_blocks_reuse(sc: dict[str, Any]) -> None:
    """Allocating twice with the state rebuilt from the first result never reuses devices."""
    slices, c, allocated = build(sc)
    inventory = Inventory.build(slices)
    first = allocate([c], NODE1, inventory, CLASSES, allocated)
    if first.results is None:
        return
    after = allocated.with_allocation(first.results[0])
    second = allocate([c], NODE1, inventory, CLASSES, after)
    if second.results is not None:
        a = {(x.pool, x.device) for x in first.results[0].devices.results}
        b = {(x.pool, x.device) for x in second.results[0].devices.results}
        assert not a & b
    assert isinstance(AllocatedState.from_claims([]), AllocatedState)
    assert ref("d/p/x") == DeviceRef("d", "p", "x")
