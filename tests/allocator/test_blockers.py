"""Blockers: one row per failure kind, each asserting the named stage and its numbers.

Every row runs the real allocator on the real inventory; the blocker comes from the failed
search (`diagnose`), or from `explain` where the allocator answers with an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kubedra.allocator import (
    AllocatedState,
    Blocker,
    Features,
    Inventory,
    diagnose,
    explain,
    holders_of,
)
from kubedra.api.resource import ResourceClaim, ResourceSlice
from tests.allocator.fixtures import (
    CLASSES,
    NODE1,
    claim,
    consumes,
    counter_set,
    dev,
    distinct,
    first,
    match,
    region,
    req,
    slice_,
    sub,
)

NUMA = "driver-a/numa"
TAINT = {"key": "k", "value": "v", "effect": "NoSchedule"}


def held(name: str, *devices: str, **result: Any) -> ResourceClaim:
    """A claim of another workload that holds `devices` of driver-a/pool-1."""
    results = [
        {"request": "r", "driver": "driver-a", "pool": "pool-1", "device": d, **result}
        for d in devices
    ]
    return claim(name, req("r"), allocation={"devices": {"results": results}})


def numa_devices(*values: int) -> list[ResourceSlice]:
    return [slice_("s", [dev(f"device-{i}", {"numa": v}) for i, v in enumerate(values)])]


def partitions(*sizes: str) -> list[ResourceSlice]:
    """Partitions of one 8Gi GPU sharing its counter set gpu-0."""
    return [
        slice_("counters", counters=[counter_set("gpu-0", memory="8Gi")], count=2),
        slice_(
            "parts",
            [dev(f"part-{i}", consumesCounters=[consumes("gpu-0", memory=s)]) for i, s in enumerate(sizes)],
            count=2,
        ),
    ]


SHARED = [slice_("s", [dev("device-0", capacity={"bw": "10"}, allowMultipleAllocations=True)])]
WITH_NIC = [*numa_devices(1, 2), slice_("n", [dev("nic-0")], driver="driver-b", pool="pool-2")]


@dataclass
class Row:
    id: str
    claims: list[ResourceClaim]
    slices: list[ResourceSlice]
    kind: str
    have: int
    need: int
    detail: str  # a part of the blocker's detail
    request: str = "req-0"
    others: list[ResourceClaim] = field(default_factory=list)  # claims already allocated
    holders: tuple[tuple[str, int], ...] = ()
    release: tuple[str, ...] = ()  # the claims whose release makes it fit, checked
    options: dict[str, Any] = field(default_factory=dict)


ROWS = [
    Row("in-pools", [claim("c", req(count=3))], numa_devices(1, 2), "in pools", 2, 3,
        "2 device(s) in the node's pools, 3 needed"),
    Row("class-selectors", [claim("c", req(cls="class-b"))], numa_devices(1, 2), "class selectors", 0, 1,
        "class class-b admits 0 of the node's 2 device(s), 1 needed"),
    # A stage short of devices also names the later ones that leave fewer still.
    Row("in-pools-then-class", [claim("c", req(cls="class-b", count=4))], WITH_NIC, "in pools", 3, 4,
        "3 device(s) in the node's pools, 1 pass class class-b, 4 needed"),
    Row("class-then-selectors",
        [claim("c", req(count=3, selectors=['device.attributes["driver-a"].numa == 1']))], WITH_NIC,
        "class selectors", 2, 3,
        "class class-a admits 2 of the node's 3 device(s), 1 pass the request's selectors, 3 needed"),
    Row("binding-conditions-off", [claim("c", req())],
        [slice_("s", [dev("device-0", bindingConditions=["ready"], bindingFailureConditions=["failed"])])],
        "class selectors", 0, 1, "class class-a admits 0 of the node's 1 device(s) (1 need binding "
        "conditions, a feature that is off), 1 needed", options={"features": Features(binding_conditions=False)}),
    Row("request-selectors", [claim("c", req(selectors=['device.attributes["driver-a"].numa == 9']))],
        numa_devices(1, 2), "request selectors", 0, 1,
        "the request's selectors admit 0 of 2 device(s) of class class-a, 1 needed"),
    Row("taint", [claim("c", req(count=2, tolerations=[{"key": "ok", "operator": "Exists"}]))],
        [slice_("s", [dev("device-0", taints=[{"key": "ok", "effect": "NoSchedule"}, TAINT]), dev("device-1")])],
        "untainted", 1, 2,
        "1 of 2 matching device(s) have a taint the request does not tolerate: device-0 (k=v:NoSchedule); 1 left"),
    Row("free", [claim("c", req(count=2))], numa_devices(1, 2, 3), "free", 1, 2,
        "1 of 3 matching device(s) free, 2 needed", others=[held("x", "device-0"), held("y", "device-1")],
        holders=(("default/x", 1), ("default/y", 1)), release=("default/x",)),
    Row("free-release-would-not-help", [claim("c", req(count=3), constraints=[match(NUMA)])],
        numa_devices(1, 2, 3, 4), "free", 2, 3, "2 of 4 matching device(s) free, 3 needed",
        others=[held("x", "device-0", "device-1")], holders=(("default/x", 2),)),
    Row("counters", [claim("c", req())], partitions("8Gi", "4Gi"), "counters", 0, 1,
        "counter set gpu-0 of pool pool-1: memory has 0 left, part-1 needs 4Gi, used by allocated part-0",
        others=[held("x", "part-0")], holders=(("default/x", 1),), release=("default/x",)),
    Row("capacity", [claim("c", req(capacity={"bw": "4"}))], SHARED, "capacity", 0, 1,
        "capacity bw: at most 2 left on one device (device-0), 4 asked",
        others=[held("x", "device-0", shareID="00000000-0000-0000-0000-000000000001",
                     consumedCapacity={"bw": "8"})], holders=(("default/x", 1),), release=("default/x",)),
    Row("all-mode-busy", [claim("c", req(mode="All"))], numa_devices(1, 2, 3), "allocationMode All", 2, 3,
        "allocationMode All: 1 of the 3 matching device(s) unavailable (device-1: in use)",
        others=[held("x", "device-1")], holders=(("default/x", 1),), release=("default/x",)),
    Row("first-available", [claim("c", first("req-0", sub("big", count=3), sub("other", cls="class-b")))],
        numa_devices(1, 2), "firstAvailable", 0, 1,
        "no subrequest fits, in order: big: 2 device(s) in the node's pools, 3 needed; "
        "other: class class-b admits 0 of the node's 2 device(s), 1 needed"),
    Row("match-attribute", [claim("c", req(count=3), constraints=[match(NUMA)])], numa_devices(1, 1, 2, 2),
        "matchAttribute", 2, 3, "matchAttribute driver-a/numa: at most 2 of the 3 devices share one value (1), 3 needed"),
    Row("match-attribute-pairs",
        [claim("c", req("gpu", count=2), req("nic", "class-b", count=2), constraints=[match("root", "gpu", "nic")])],
        [slice_("g", [dev(f"gpu-{i}", {"root": f"r{i // 2}"}) for i in range(4)]),
         slice_("n", [dev(f"nic-{i}", {"root": f"r{i}"}) for i in range(2)], driver="driver-b")],
        "matchAttribute", 3, 4,
        "matchAttribute root: at most 3 of the 4 devices share one value (r0: gpu 2 of 2, nic 1 of 2), 4 needed",
        request="gpu,nic"),
    Row("distinct-attribute", [claim("c", req(count=3), constraints=[distinct(NUMA)])], numa_devices(1, 1, 2),
        "distinctAttribute", 2, 3, "distinctAttribute driver-a/numa: 2 distinct value(s) among the candidates, 3 devices need one each"),
    Row("claims-together", [claim("c1", req(count=2)), claim("c2", req(count=2))], numa_devices(1, 2, 3),
        "claims together", 0, 1, "fits alone, but not beside default/c1: their devices leave too few", request=""),
    Row("requests-together", [claim("c", req("a", count=2), req("b", count=2))], numa_devices(1, 2, 3),
        "requests together", 0, 4,
        "each request and constraint holds alone, not all at once: 4 device(s) needed from 3 candidate(s)",
        request=""),
    Row("allocated-claim-elsewhere",
        [claim("c", req(), allocation={"devices": {"results": []}, "nodeSelector": region("region-2")})],
        numa_devices(1), "allocated claim's node selector", 0, 1,
        "already allocated, with a node selector that excludes this node", request=""),
    Row("admin-access-label", [claim("c", req(admin=True))], numa_devices(1), "admin access", 0, 1,
        'admin access to devices requires the resource.kubernetes.io/admin-access: "true" label',
        request="", options={"namespace_labels": {"team": "a"}}),
    Row("results-limit", [claim("c", req(count=20), req("req-1", count=13))], numa_devices(1),
        "results limit", 32, 33, "33 device(s) needed, more than the 32 a claim may hold", request="req-1"),
    # The static check counts the smaller subrequest (16 devices); only "big" is usable here.
    Row("results-limit-subrequests",
        [claim("c", first("req-0", sub("small", cls="class-b"), sub("big", count=20)), req("req-1", count=15))],
        numa_devices(*[1] * 35), "results limit", 32, 35,
        "35 device(s) needed, more than the 32 a claim may hold", request=""),
    Row("search-budget", [claim("c", req(count=3), constraints=[distinct(NUMA)])], numa_devices(*[1] * 8),
        "search budget", 0, 1, "search budget of 5 steps exhausted", request="", options={"max_steps": 5}),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_blocker_named_with_its_numbers(row: Row) -> None:
    state = AllocatedState.from_claims(row.others)
    e = explain(row.claims, NODE1, Inventory.build(row.slices), CLASSES, state,
                holders=holders_of(row.others), **row.options)  # fmt: skip
    assert e.allocation is None or not e.allocation.ok
    assert len(e.blockers) == 1, e.blockers
    (b,) = e.blockers
    assert (b.kind, b.have, b.need) == (row.kind, row.have, row.need)
    assert row.detail in b.detail
    assert b.request == row.request
    assert b.holders == row.holders
    assert b.release == row.release
    assert b.short and "\n" not in b.short  # the PodScheduled form exists and is one line


def test_every_claim_gets_its_own_blocker() -> None:
    claims = [claim("a", req(cls="class-b")), claim("b", req(count=5))]
    e = explain(claims, NODE1, Inventory.build(numa_devices(1, 2)), CLASSES, AllocatedState())
    assert [(b.claim, b.kind) for b in e.blockers] == [
        ("default/a", "class selectors"),
        ("default/b", "in pools"),
    ]


def test_a_fitting_node_has_no_blocker() -> None:
    e = explain([claim("c", req(count=2))], NODE1, Inventory.build(numa_devices(1, 2)), CLASSES,
                AllocatedState())  # fmt: skip
    assert e.allocation is not None and e.allocation.ok and e.blockers == ()


ANSWERED_BY_ERROR = ("allocated-claim-elsewhere", "results-limit")  # no search to diagnose


@pytest.mark.parametrize("row", [r for r in ROWS if not r.options and r.id not in ANSWERED_BY_ERROR],
                         ids=lambda r: r.id)  # fmt: skip
def test_guard_blockers_never_name_a_stage_that_has_enough(row: Row) -> None:
    """The class of bug: a blocker whose numbers say it is not blocking."""
    from kubedra.allocator import allocate

    state = AllocatedState.from_claims(row.others)
    found = allocate(row.claims, NODE1, Inventory.build(row.slices), CLASSES, state)
    assert found.unsatisfiable is not None
    for b in diagnose(found.unsatisfiable):
        assert isinstance(b, Blocker) and b.have < b.need, b


def test_a_class_blocker_suggests_a_class_that_admits_enough() -> None:
    def fix(*requests: dict[str, Any]) -> str:
        e = explain([claim("c", *requests)], NODE1, Inventory.build(numa_devices(1, 2)), CLASSES,
                    AllocatedState())  # fmt: skip
        (b,) = e.blockers
        assert b.kind == "class selectors"
        return b.fix

    assert fix(req(cls="class-b", count=2)) == "class class-a would admit 2"
    # The request's own selectors still apply under the other class: one device is too few.
    assert fix(req(cls="class-b", count=2, selectors=['device.attributes["driver-a"].numa == 1'])) == ""


# The short form (the PodScheduled condition's, the nearest node's) names what each number
# counts: never "class X admits 0 of 1 devices" where the 1 is the count needed.
SHORTS = {
    "in-pools": "2 devices on the node, 3 needed",
    "in-pools-then-class": "3 devices on the node, 1 of class class-b, 4 needed",
    "class-selectors": "0 devices of class class-b, 1 needed",
    "class-then-selectors": "2 devices of class class-a, 1 pass the selectors, 3 needed",
    "request-selectors": "0 of the 2 devices of class class-a pass the selectors, 1 needed",
    "taint": "1 of 2 matching devices untainted, 2 needed",
    "free": "1 of 3 matching devices free, 2 needed",
    "match-attribute": "at most 2 devices share one driver-a/numa, 3 needed",
    "distinct-attribute": "2 distinct driver-a/numa values, 3 needed",
}


def _blocker(row: Row) -> Blocker:
    state = AllocatedState.from_claims(row.others)
    e = explain(row.claims, NODE1, Inventory.build(row.slices), CLASSES, state,
                holders=holders_of(row.others), **row.options)  # fmt: skip
    (b,) = e.blockers
    return b


@pytest.mark.parametrize("row", [r for r in ROWS if r.id in SHORTS], ids=lambda r: r.id)
def test_short_form_names_what_each_number_counts(row: Row) -> None:
    assert _blocker(row).short == SHORTS[row.id]


# Whether the node could hold the claim with every device free, and if not, the blocker on
# the node so emptied: from the stage, from the release check, else a search.
EVER = {
    "in-pools": (False, "in pools"),
    "request-selectors": (False, "request selectors"),
    "taint": (False, "untainted"),  # a taint stays when the devices are freed
    "free": (True, None),  # a release was found
    "free-release-would-not-help": (False, "matchAttribute"),  # no two devices share a numa
    "all-mode-busy": (True, None),
    "match-attribute": (False, "matchAttribute"),
    "claims-together": (False, "claims together"),
    "requests-together": (False, "requests together"),
}


@pytest.mark.parametrize("row", [r for r in ROWS if r.id in EVER], ids=lambda r: r.id)
def test_a_blocker_says_whether_the_node_could_ever_hold_the_claim(row: Row) -> None:
    b = _blocker(row)
    fits, kind = EVER[row.id]
    assert b.fits_free is fits
    assert (b.limit.kind if b.limit is not None else None) == kind


def test_a_blocker_measures_the_devices_the_claim_selects_and_those_free() -> None:
    """What ranks nodes for "nearest": devices passing the selectors and free now, each
    request's counted up to what it needs, and what the claim needs of one node."""
    slices = [*numa_devices(1, 1, 1, 2), slice_("n", [dev("nic-0")], driver="driver-b", pool="pool-2")]
    c = claim("c", req("gpus", count=3, selectors=['device.attributes["driver-a"].numa == 1']),
              req("nics", "class-b", count=2), constraints=[match(NUMA, "gpus")])  # fmt: skip
    others = [held("x", "device-0")]
    e = explain([c], NODE1, Inventory.build(slices), CLASSES, AllocatedState.from_claims(others))
    (b,) = e.blockers
    assert (b.kind, b.matching, b.usable, b.needed) == ("free", 4, 3, 5)
    assert b.wants == ("3 devices of class class-a matching its selectors and 2 devices of class "
                       "class-b, gpus sharing one driver-a/numa")
    # The gpus are short of free devices only; with all free, the nics still lack the class.
    assert b.fits_free is False and b.limit is not None
    assert (b.limit.kind, b.limit.request, b.limit.short) == (
        "class selectors", "nics", "1 device of class class-b, 2 needed")
