"""Regression tests for differences from upstream (k8s.io/dynamic-resource-allocation
v0.37.2) that the differential runs (tests/conformance) found, each shrunk to a minimal
scenario. Each expected outcome is upstream's answer for that scenario.
"""

from __future__ import annotations

import pytest

from kubedra.allocator import AllocationError, Features
from kubedra.api.quantity import Quantity
from tests.allocator.fixtures import (
    CLASSES,
    NODE1,
    claim,
    consumes,
    counter_set,
    dev,
    distinct,
    klass,
    picks,
    req,
    run,
    slice_,
)

A_DEVICE = [slice_("slice-1", [dev("device-1")])]


def test_more_slices_than_the_pool_declares_make_it_incomplete() -> None:
    # Two slices of one generation with resourceSliceCount 1: upstream counts them exactly.
    slices = [slice_("slice-1", [dev("device-1")]), slice_("slice-2", [dev("device-2")])]
    found = run([claim("c", req())], slices)
    assert found.results is None or pytest.fail(str(picks(found)))


def test_all_with_more_slices_than_declared_fails_as_being_updated() -> None:
    slices = [slice_("slice-1", [dev("device-1")]), slice_("slice-2", [dev("device-2")])]
    with pytest.raises(AllocationError, match="is currently being updated"):
        run([claim("c", req(mode="All"))], slices)


def test_field_selector_with_two_values_fails_node_selection() -> None:
    # nodeaffinity parses every requirement first: matchFields In needs exactly one value.
    selector = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1", "node-2"]}]}]}  # fmt: skip
    slices = [slice_("slice-1", [dev("device-1")], selector=selector)]
    with pytest.raises(AllocationError, match="failed to perform node selection for slice"):
        run([claim("c", req())], slices)


def test_bad_per_device_selector_fails_only_once_the_search_reaches_it() -> None:
    # Upstream checks a device's node after the class and request selectors.
    bad = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "Exists"}]}]}  # fmt: skip
    slices = [slice_("slice-1", [dev("device-1", nodeName="node-1"),
                                 dev("device-2", nodeSelector=bad)], per_device=True)]  # fmt: skip
    assert picks(run([claim("c", req())], slices)) == [["req-0 driver-a/pool-1/device-1"]]
    with pytest.raises(AllocationError, match="field selectors support In and NotIn"):
        run([claim("c", req(count=2))], slices)


def test_explaining_a_misfit_does_not_evaluate_selectors_the_search_skipped() -> None:
    # claim-0 cannot be met ("All" finds no device with memory), so the search never runs
    # claim-1's selector, which fails on the device: the node is unsuitable, not an error.
    slices = [slice_("slice-1", [dev("device-1")])]
    claims = [
        claim("claim-0", req(mode="All", capacity={"memory": "1"})),
        claim("claim-1", req(selectors=['device.attributes["driver-a"].model == "x"'])),
    ]
    found = run(claims, slices)
    assert found.results is None and found.unsatisfiable is not None


def test_fractional_range_steps_are_counted_in_milli_units() -> None:
    shared = dev("device-1", allowMultipleAllocations=True, capacity={"memory": {
        "value": "16Gi", "requestPolicy": {"validRange": {"min": "500m", "step": "250m"}}}})  # fmt: skip
    claims = [claim("c", req(capacity={"memory": "600m"}))]
    found = run(claims, [slice_("slice-1", [shared])])
    assert found.results is not None
    assert found.results[0].devices.results[0].consumed_capacity == {
        "memory": Quantity.parse("750m")
    }
    whole = run(claims, [slice_("slice-1", [shared])],
                features=Features(fractional_capacity_range=False))  # fmt: skip
    assert whole.results is not None  # whole units: 600m -> 1, min 500m -> 1, step -> 1
    assert str(whole.results[0].devices.results[0].consumed_capacity["memory"]) == "1"


def test_stored_selectors_see_allow_multiple_allocations_whatever_the_features() -> None:
    classes = {"class-a": klass("class-a", selectors=["device.allowMultipleAllocations"])}
    slices = [slice_("slice-1", [dev("device-1", allowMultipleAllocations=True)])]
    found = run([claim("c", req())], slices, classes=classes,
                features=Features(consumable_capacity=False))  # fmt: skip
    assert picks(found) == [["req-0 driver-a/pool-1/device-1"]]


def test_distinct_list_value_joins_only_an_empty_set_without_list_attributes() -> None:
    slices = [slice_("slice-1", [dev("device-1", {"a": {"strings": ["x"]}}),
                                 dev("device-2", {"a": {"strings": ["y"]}})])]  # fmt: skip
    found = run([claim("c", req(count=2), constraints=[distinct("driver-a/a")])], slices)
    assert found.results is None


def test_derived_attributes_are_refused_while_the_alpha_feature_is_off() -> None:
    derived = req()
    derived["exactly"]["derivedAttributes"] = [{"name": "driver-a/x", "expression": "1"}]
    with pytest.raises(AllocationError, match="cannot handle request with derived attributes"):
        run([claim("c", derived)], A_DEVICE)


def test_slices_with_compatibility_groups_are_ignored_while_the_alpha_feature_is_off() -> None:
    grouped = consumes("cs", slots="1")
    grouped["compatibilityGroups"] = ["g1"]
    slices = [
        slice_("slice-1", [dev("device-1", consumesCounters=[grouped])], count=2),
        slice_("slice-2", counters=[counter_set("cs", slots="1")], count=2, all_nodes=True),
    ]
    found = run([claim("c", req())], slices)
    assert found.results is None  # the pool is incomplete without the ignored slice


def test_the_stable_allocator_searches_pools_in_sorted_order() -> None:
    # Deliberate: upstream's "stable" implementation (only newer features all off) walks
    # pools in Go map order, so its pick varies; kubedra takes the newer implementations'
    # sorted order (pinned against upstream in tests/conformance/test_deliberate.py).
    stable = Features(consumable_capacity=False, binding_conditions=False,
                      fractional_capacity_range=False)  # fmt: skip
    slices = [slice_("slice-b", [dev("device-1")], pool="pool-b"),
              slice_("slice-a", [dev("device-1")], pool="pool-a")]  # fmt: skip
    found = run([claim("c", req())], slices, features=stable, classes=CLASSES, node=NODE1)
    assert picks(found) == [["req-0 driver-a/pool-a/device-1"]]
