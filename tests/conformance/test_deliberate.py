"""kubedra's deliberate differences from upstream, each pinned on both sides.

The differential runs classify a mismatch as deliberate only through the rules in
`compare.DELIBERATE`; each rule has its test here showing upstream's behaviour (from the
oracle) and kubedra's.
"""

from __future__ import annotations

from kubedra.allocator import Features
from tests.conformance.compare import DELIBERATE
from tests.conformance.oracle import Oracle
from tests.conformance.scenario import Scenario, oracle_outcome

STABLE = Features(consumable_capacity=False, binding_conditions=False,
                  fractional_capacity_range=False)  # fmt: skip
V1 = "resource.k8s.io/v1"


def _pools_scenario() -> Scenario:
    def slice_(name: str, pool: str) -> dict[str, object]:
        return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "d.example.com", "nodeName": "node-a",
                         "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "dev"}]}}  # fmt: skip

    return Scenario(
        features=STABLE,
        node="node-a",
        node_labels={},
        classes=({"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "c"},
                  "spec": {}},),
        slices=(slice_("s-b", "pool-b"), slice_("s-a", "pool-a")),
        claims=({"apiVersion": V1, "kind": "ResourceClaim",
                 "metadata": {"name": "claim", "namespace": "default"},
                 "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                     "deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}}]}}},),
    )


def _pool(outcome: object) -> str:
    results = getattr(outcome, "results", ())
    return str(results[0]["devices"]["results"][0]["pool"])


def test_every_deliberate_class_is_pinned_here() -> None:
    assert [rule.name for rule in DELIBERATE] == [
        "stable allocator: random pool and slice order upstream"
    ]


def test_stable_allocator_order_is_random_upstream_and_sorted_in_kubedra(oracle: Oracle) -> None:
    scenario = _pools_scenario()
    request = scenario.oracle_request()
    stable = {_pool(oracle_outcome(oracle.ask("alloc", request))) for _ in range(40)}
    assert stable == {"pool-a", "pool-b"}  # Go map order: either pool comes first
    newer = oracle_outcome(oracle.ask("alloc", {**request, "allocators": ["incubating"]}))
    assert _pool(newer) == "pool-a"  # the newer implementations sort pools
    assert _pool(scenario.run_kubedra()) == "pool-a"  # kubedra: always the sorted order
