"""A selector that pins a driver (`device.driver == "x" && ...`) lets the search pass over
other drivers' devices without evaluating it (`kubedra.allocator.projection.pinned_driver`).
Upstream evaluates it on them, so these cases put what could tell the two apart beside the
pinned driver's devices, and ask the oracle for upstream's answer: a device of another
driver that fails every selector (an unparsable version) before or after the one that fits,
an expression that errors on other drivers' devices, one that does not compile."""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.allocator import AllocatedState, Features, Inventory, NodeInfo, allocate
from kubedra.allocator.projection import pinned_driver
from kubedra.api.codec import decode_object
from tests.conformance.compare import outcomes_equal
from tests.conformance.oracle import Oracle
from tests.conformance.scenario import Scenario, oracle_outcome

V1 = "resource.k8s.io/v1"
GPU = "gpu.example.com"
NIC, LAST = "a-nic.example.com", "z-nic.example.com"  # searched before and after the GPUs
PINNED = f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "gpu"'


def _slice(driver: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": driver},
            "spec": {"driver": driver, "nodeName": "node-a",
                     "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}  # fmt: skip


def _device(name: str, **attributes: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "attributes": attributes}


def _scenario(expression: str, nic: str, nics: list[dict[str, Any]]) -> Scenario:
    klass = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": expression}}]}}  # fmt: skip
    claim = {"apiVersion": V1, "kind": "ResourceClaim",
             "metadata": {"name": "claim", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}}  # fmt: skip
    gpus = [_device(f"gpu-{i}", type={"string": "gpu"}) for i in range(2)]
    return Scenario(
        features=Features(),
        node="node-a",
        node_labels={},
        classes=(klass,),
        slices=(_slice(nic, nics), _slice(GPU, gpus)),
        claims=(claim,),
    )


BAD = {"version": "not-a-version"}
# name: (expression, the other driver, its devices, the outcome upstream gives)
CASES = {
    "other driver converts": (PINNED, NIC, [_device("nic-0", rdma={"bool": True})], "allocated"),
    "other driver fails every selector": (PINNED, NIC, [_device("nic-0", v=BAD)], "error"),
    "failing device after a converting one": (
        PINNED,
        NIC,
        [_device("nic-0", rdma={"bool": True}), _device("nic-1", v=BAD)],
        "error",
    ),
    "failing device searched after the fit": (
        PINNED,
        LAST,
        [_device("nic-0", v=BAD)],
        "allocated",
    ),
    "expression errors on other drivers": (
        f'"{GPU}" == device.driver && device.attributes["{GPU}"].type.startsWith("g")',
        NIC,
        [_device("nic-0")],
        "allocated",
    ),
    "does not compile": (f'device.driver == "{GPU}" && device.nope', NIC, [_device("n")], "error"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_pinned_driver_answers_as_upstream(oracle: Oracle, name: str) -> None:
    expression, nic, nics, kind = CASES[name]
    scenario = _scenario(expression, nic, nics)
    theirs = oracle_outcome(oracle.ask("alloc", scenario.oracle_request()))
    ours = scenario.run_kubedra()
    assert theirs.kind == kind, theirs
    assert outcomes_equal(ours, theirs), (ours, theirs)


@pytest.mark.parametrize(
    ("expression", "driver"),
    [
        (PINNED, GPU),
        (f'"{GPU}" == device.driver', GPU),
        (f'true && (device.attributes["{GPU}"].x && device.driver == "{GPU}")', GPU),
        (f'device.driver == "{GPU}" || true', None),  # not a conjunct: no pin
        (f'device.driver != "{GPU}"', None),
        (f'device.driver == b"{GPU}"', None),  # bytes never equal a string
        (f'has(device.driver) && device.driver.startsWith("{GPU}")', None),
        ("device.driver ==", None),  # does not parse
    ],
)
def test_pinned_driver_reads_only_a_top_level_conjunct(expression: str, driver: str | None) -> None:
    assert pinned_driver(expression) == driver


def test_other_drivers_devices_are_not_evaluated() -> None:
    scenario = _scenario(PINNED, NIC, [_device(f"nic-{i}", rdma={"bool": True}) for i in range(4)])
    slices = [decode_object(s).obj for s in scenario.slices]
    inventory = Inventory.build(slices)
    classes = {"gpu": decode_object(scenario.classes[0]).obj}
    claims = [decode_object(scenario.claims[0]).obj]
    out = allocate(claims, NodeInfo("node-a", {}), inventory, classes, AllocatedState())
    assert out.results is not None
    assert [r.device for r in out.results[0].devices.results] == ["gpu-0"]
    results = inventory.selector(PINNED, False).results
    nics = {e.index for e in inventory.slice_entries(slices[0])}
    gpus = {e.index for e in inventory.slice_entries(slices[1])}
    assert not nics & results.keys()
    assert gpus & results.keys()
