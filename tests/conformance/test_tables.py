"""The hand-written allocator table (tests/allocator/test_table.py) against upstream.

Each case of the table, ported in our own words from upstream's tests and extended, runs
through the oracle too: the table's expectations are then upstream's behaviour at the pinned
version, not our reading of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.allocator import AllocatedState
from kubedra.api.codec import to_dict
from kubedra.api.resource import ResourceSlice
from tests.allocator.test_table import CASES, Case
from tests.conformance.compare import judge, step_budget
from tests.conformance.oracle import Oracle
from tests.conformance.runner import asker
from tests.conformance.scenario import Scenario, Wire, oracle_outcome, to_api_form

# kubedra-only behaviour, outside upstream's allocator (see docs/compatibility.md).
KUBEDRA_ONLY = {"admin-namespace-label-enforced"}


def held_claim(state: AllocatedState, slices: list[ResourceSlice]) -> Wire:
    """A claim whose status holds what `state` holds (shares carry the aggregated capacity
    on their first result, named as the device publishes it)."""
    published = {
        (sl.spec.driver, sl.spec.pool.name, d.name): d for sl in slices for d in sl.spec.devices
    }
    results: list[Wire] = [
        {"request": "r", "driver": ref.driver, "pool": ref.pool, "device": ref.device}
        for ref in sorted(state.devices)
    ]
    charged: set[object] = set()
    for ref, share in sorted(state.shares):
        result: Wire = {"request": "r", "driver": ref.driver, "pool": ref.pool,
                        "device": ref.device, "shareID": share}  # fmt: skip
        device = published.get((ref.driver, ref.pool, ref.device))
        if ref not in charged and device is not None:
            charged.add(ref)
            spelled = {(k if "/" in k else f"{ref.driver}/{k}"): k for k in device.capacity}
            result["consumedCapacity"] = {
                spelled.get(fq, fq): _quantity(nanos) for fq, nanos in state.consumed(ref).items()
            }
        results.append(result)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "held", "namespace": "other"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": "class-a"}}]}},
            "status": {"allocation": {"devices": {"results": results}}}}  # fmt: skip


def _quantity(nanos: int) -> str:
    from kubedra.api.quantity import Quantity

    return str(Quantity.from_nanos(nanos))


def scenario(case: Case) -> Scenario:
    def wire(obj: Any) -> Wire:
        return to_dict(obj)

    allocated = (held_claim(case.allocated, case.slices),) if case.allocated else ()
    return Scenario(
        features=case.features,
        node=case.node.name,
        node_labels=case.node.labels,
        classes=tuple(wire(c) for c in case.classes.values()),
        slices=tuple(wire(s) for s in case.slices),
        # Only unallocated claims reach upstream's allocator (the scheduler checks the others).
        claims=tuple(
            to_api_form(wire(c)) for c in case.claims if not (c.status and c.status.allocation)
        ),
        allocated=allocated,
        taint_rules=tuple(wire(r) for r in case.rules),
    )


@pytest.mark.parametrize(
    "name", [n for n in CASES if n not in KUBEDRA_ONLY]
)
def test_table_case_matches_upstream(name: str, oracle: Oracle) -> None:
    sc = scenario(CASES[name])
    theirs = oracle_outcome(oracle.ask("alloc", sc.oracle_request()))
    ours = sc.run_kubedra(max_steps=step_budget(theirs))
    verdict = judge(sc, ours, theirs, asker(oracle, sc))
    assert verdict.status != "unexplained", f"{verdict.why}\n{sc.manifests()}"
