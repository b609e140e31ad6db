"""Table-driven allocator cases, ported in our own words from upstream's conformance table
(dra-spec §6) plus kubedra-specific ones. Each asserts the exact picks or the exact reason."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubedra.allocator import AllocatedState, Allocation, AllocationError, Features
from kubedra.allocator.types import NodeInfo
from kubedra.api.quantity import Quantity
from kubedra.api.resource import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice
from tests.allocator.fixtures import (
    CLASSES,
    NODE1,
    NODE2,
    A,
    B,
    V,
    claim,
    consumes,
    counter_set,
    dev,
    distinct,
    first,
    klass,
    match,
    picks,
    pinned,
    region,
    req,
    run,
    selector,
    slice_,
    state,
    sub,
    taint_rule,
)

INVALID = "invalid resource pools were encountered"
NO_FIT = "cannot allocate all claims"
OFF = {
    "prio": Features(prioritized_list=False),
    "admin": Features(admin_access=False),
    "taints": Features(device_taints=False),
    "part": Features(partitionable_devices=False),
    "cap": Features(consumable_capacity=False),
    "bind": Features(binding_conditions=False),
    "rules": Features(device_taint_rules=False),
}
LISTS = Features(list_type_attributes=True)
# Only what upstream's "stable" allocator supports: it is the one that runs then.
STABLE = Features(consumable_capacity=False, binding_conditions=False, fractional_capacity_range=False)


@dataclass
class Case:
    claims: list[ResourceClaim]
    slices: list[ResourceSlice] = field(default_factory=list)
    expect: list[list[str]] | None = None
    error: str | None = None
    summary: str | None = None
    classes: dict[str, DeviceClass] = field(default_factory=lambda: dict(CLASSES))
    allocated: AllocatedState | None = None
    node: NodeInfo = NODE1
    features: Features = field(default_factory=Features)
    rules: list[DeviceTaintRule] = field(default_factory=list)
    verify: Callable[[Allocation], Any] | None = None
    steps: int | None = None


CASES: dict[str, Case] = {}


def C(name: str, *claims: ResourceClaim, **kw: Any) -> None:
    assert name not in CASES, name
    CASES[name] = Case(list(claims), **kw)


def s(name: str, *devices: dict[str, Any], **kw: Any) -> ResourceSlice:
    return slice_(name, devices, **kw)


def r(request: str, device: str, driver: str = A, pool: str = "pool-1") -> str:
    return f"{request} {driver}/{pool}/{device}"


def c0(*requests: dict[str, Any], **kw: Any) -> ResourceClaim:
    return claim("claim-0", *requests, **kw)


def c1(*requests: dict[str, Any], **kw: Any) -> ResourceClaim:
    return claim("claim-1", *requests, **kw)


def result0(check: Callable[[Any], Any]) -> Callable[[Allocation], Any]:
    def verify(alloc: Allocation) -> None:
        assert alloc.results is not None
        check(alloc.results[0])

    return verify


def cfg(driver: str = A, n: int = 1) -> dict[str, Any]:
    return {"driver": driver, "parameters": {"n": n}}


def configs(alloc_result: Any) -> list[tuple[str, tuple[str, ...], int]]:
    return [(c.source, c.requests, c.opaque.parameters["n"]) for c in alloc_result.devices.config]


ONE = s("slice-1", dev("device-1"))
TWO = s("slice-1", dev("device-1"), dev("device-2"))
MEM = [s("slice-1", dev("device-1", capacity={"memory": "1Gi"}), dev("device-2", capacity={"memory": "2Gi"}))]
BIG = 'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0'
SMALL = 'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0'

# --- 6.1 basics, pools and slices --------------------------------------------------------
C("empty", expect=[])
C("simple", c0(req()), slices=[ONE], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.node_selector == pinned() or pytest.fail("selector")))
C("other-node", c0(req()), slices=[s("slice-1", dev("device-1")), s("slice-2", dev("device-2"), pool="pool-2", node="node-2")], node=NODE2, expect=[[r("req-0", "device-2", pool="pool-2")]], verify=result0(lambda x: x.node_selector == pinned("node-2") or pytest.fail("selector")))
C("small-and-large", c0(req("req-0", selectors=[SMALL]), req("req-1", selectors=[BIG])), slices=MEM, expect=[[r("req-0", "device-1"), r("req-1", "device-2")]])
C("small-and-large-backtrack-requests", c0(req("req-0", selectors=[SMALL]), req("req-1", selectors=[BIG])), slices=[s("slice-1", dev("device-2", capacity={"memory": "2Gi"}), dev("device-1", capacity={"memory": "1Gi"}))], expect=[[r("req-0", "device-1"), r("req-1", "device-2")]])
C("small-and-large-backtrack-claims", c0(req("req-0", selectors=[SMALL])), c1(req("req-0", selectors=[BIG])), slices=[s("slice-1", dev("device-2", capacity={"memory": "2Gi"}), dev("device-1", capacity={"memory": "1Gi"}))], expect=[[r("req-0", "device-1")], [r("req-0", "device-2")]])
C("devices-split-across-different-slices", c0(req(count=2)), slices=[s("slice-1", dev("device-1")), s("slice-2", dev("device-2"), pool="pool-2")], expect=[[r("req-0", "device-1"), r("req-0", "device-2", pool="pool-2")]])
C("obsolete-slice", c0(req()), slices=[s("slice-1", dev("device-1"), gen=1, count=2), s("slice-2", dev("device-2"), gen=2, count=2, node="node-2")], expect=None, summary=NO_FIT)
C("duplicate-slice", c0(req()), slices=[s("slice-1", dev("device-1"), count=2), s("slice-2", dev("device-1"), count=2)], expect=None, summary=INVALID)
C("no-slices", c0(req()), expect=None, summary=NO_FIT)
C("not-enough-suitable-devices", c0(req("req-0"), req("req-1")), slices=[ONE], expect=None)
C("no-classes", c0(req()), slices=[ONE], classes={}, error="claim default/claim-0, request req-0: could not retrieve device class class-a")
C("unknown-class", c0(req(cls="no-such-class")), slices=[ONE], error="could not retrieve device class no-such-class")
C("empty-class", c0(req(cls="")), slices=[ONE], error="claim default/claim-0, request req-0: missing device class name (unsupported request type?)")
C("already-allocated-devices", c0(req()), slices=[ONE], allocated=state(["driver-a/pool-1/device-1"]), expect=None)
C("several-different-drivers", c0(req("req-0"), req("req-1", "class-b")), slices=[ONE, s("slice-b", dev("device-1"), driver=B)], expect=[[r("req-0", "device-1"), r("req-1", "device-1", driver=B)]])
C("max-number-devices", c0(req(count=32)), slices=[s("slice-1", *[dev(f"device-{i}") for i in range(32)])], verify=lambda a: len(a.results[0].devices.results) == 32 or pytest.fail("32"))
C("many-devices-okay", c0(req(count=32)), expect=None)
C("no-allocation-from-incomplete-pools", c0(req()), slices=[s("slice-1", dev("device-1"), count=2)], expect=None, summary=NO_FIT)
C("pools-sorted-by-driver-then-name", c0(req("req-0", "any")), classes={"any": klass("any", None)}, slices=[s("slice-1", dev("device-1"), driver=B, pool="pool-1"), s("slice-2", dev("device-1"), pool="pool-2"), s("slice-3", dev("device-1"), pool="pool-10")], expect=[[r("req-0", "device-1", pool="pool-10")]])
C("slices-sorted-by-name", c0(req()), slices=[s("slice-b", dev("device-b"), count=2), s("slice-a", dev("device-a"), count=2)], expect=[[r("req-0", "device-a")]])
C("devices-in-slice-order", c0(req(count=2)), slices=[s("slice-1", dev("device-9"), dev("device-1"), dev("device-5"))], expect=[[r("req-0", "device-9"), r("req-0", "device-1")]])
C("claim-with-no-requests", c0(), slices=[ONE], expect=[[]], verify=result0(lambda x: x.node_selector is None or pytest.fail("sel")))
C("two-claims-share-no-device", c0(req()), c1(req()), slices=[TWO], expect=[[r("req-0", "device-1")], [r("req-0", "device-2")]])
C("two-claims-one-device", c0(req()), c1(req()), slices=[ONE], expect=None)
C("allocated-claim-passes-through", claim("done", req(), allocation={"devices": {"results": [{"request": "req-0", "driver": A, "pool": "pool-1", "device": "device-1"}]}}), c0(req()), slices=[TWO], allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0", "device-1")], [r("req-0", "device-2")]])
C("allocated-claim-other-node", claim("done", req(), allocation={"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]}}), slices=[ONE], expect=None, summary="claim default/done: allocation is not available on node node-1")

# --- 6.2 limits and unsupported input ------------------------------------------------------
C("too-many-devices-single-request", c0(req(count=500)), slices=[ONE], error="claim default/claim-0, request req-0: adding 500 devices exceeds the claim limit of 32, with 0 already accounted for")
C("too-many-devices-total", c0(req("req-0", count=32), req("req-1")), slices=[ONE], error="claim default/claim-0, request req-1: adding 1 devices exceeds the claim limit of 32, with 32 already accounted for")
C("unknown-selector", c0({"name": "req-0", "exactly": {"deviceClassName": "class-a", "selectors": [{}]}}), slices=[ONE], error="claim default/claim-0, request req-0, selector #0: CEL expression empty (unsupported selector type?)")
C("unknown-allocation-mode", c0(req(mode="future-mode")), slices=[ONE], error="claim default/claim-0, request req-0: unsupported count mode future-mode")
C("unknown-constraint", c0(req(), constraints=[{}]), slices=[ONE], error="claim default/claim-0, constraint #0: empty constraint (unsupported constraint type?)")
C("invalid-CEL-one-device", c0(req(selectors=["noSuchVar"])), slices=[ONE], error="claim default/claim-0: selector #0: CEL compile error:")
C("invalid-CEL-one-device-class", c0(req()), classes={"class-a": klass("class-a", None, ["noSuchVar"])}, slices=[ONE], error="class class-a: selector #0: CEL compile error:")
C("invalid-CEL-all-devices", c0(req(mode="All", selectors=["noSuchVar"])), slices=[ONE], error="undeclared reference")
C("invalid-CEL-no-devices-is-fine", c0(req(selectors=["noSuchVar"])), expect=None)
C("cel-runtime-error", c0(req(selectors=['device.attributes["driver-a"].missing == 1'])), slices=[ONE], error="claim default/claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error: no such key: missing. consider using CEL optional chaining")
C("cel-non-bool-result", c0(req(selectors=['device.attributes["driver-a"].numa'])), slices=[s("slice-1", dev("device-1", {"numa": 1}))], error="CEL runtime error: CEL result of type int could not be converted to bool")
C("cel-unsupported-attribute-value", c0(req()), slices=[s("slice-1", dev("device-1", {"empty": {}}))], error="class class-a: selector #0 on device driver-a/pool-1/device-1: CEL runtime error: attribute empty: unsupported attribute value")
C("cel-bad-version", c0(req()), slices=[s("slice-1", dev("device-1", {"v": V("1.0")}))], error="CEL runtime error: parse semantic version")
# Selectors are compiled as stored expressions (the newest environment): list attributes
# are values like any other, whatever the feature switches.
C("cel-list-attribute-feature-off", c0(req()), slices=[s("slice-1", dev("device-1", {"l": {"strings": ["a"]}}))], expect=[[r("req-0", "device-1")]])
C("in-use-device-not-evaluated", c0(req()), slices=[s("slice-1", dev("device-1", {"empty": {}}), dev("device-2"))], allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0", "device-2")]])
C("admin-access-disabled", c0(req(admin=True)), slices=[ONE], features=OFF["admin"], error="claim default/claim-0, request req-0: admin access is requested, but the feature is disabled")
C("exact-count-default-one", c0(req()), slices=[TWO], expect=[[r("req-0", "device-1")]])

# --- 6.3 allocation mode All -----------------------------------------------------------------
C("all-devices-single", c0(req(mode="All")), slices=[ONE], expect=[[r("req-0", "device-1")]])
C("all-devices-with-consumed-counters", c0(req(mode="All")), slices=[s("slice-0", counters=[counter_set("set", mem="8Gi")]), s("slice-1", dev("device-1", consumesCounters=[consumes("set", mem="4Gi")]), count=2)], expect=[[r("req-0", "device-1")]])
C("all-devices-many", c0(req(mode="All")), slices=[s("slice-1", dev("device-1")), s("slice-2", dev("device-2"), pool="pool-2")], expect=[[r("req-0", "device-1"), r("req-0", "device-2", pool="pool-2")]])
C("all-devices-of-the-incomplete-pool", c0(req(mode="All")), slices=[s("slice-1", dev("device-1"), count=2)], error="claim default/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated")
C("all-devices-of-invalid-pool", c0(req(mode="All")), slices=[s("slice-1", dev("device-1"), dev("device-1"))], error="asks for all devices, but resource pool driver-a/pool-1 is currently invalid")
C("all-devices-plus-another", c0(req(mode="All")), c1(req(cls="class-b")), slices=[ONE, s("slice-b", dev("device-1"), driver=B)], expect=[[r("req-0", "device-1")], [r("req-0", "device-1", driver=B)]])
C("all-devices-plus-another-reversed", c1(req(cls="class-b")), c0(req(mode="All")), slices=[ONE, s("slice-b", dev("device-1"), driver=B)], expect=[[r("req-0", "device-1", driver=B)], [r("req-0", "device-1")]])
C("all-devices-many-plus-another", c0(req(mode="All")), c1(req(cls="class-b")), slices=[TWO, s("slice-b", dev("device-1"), driver=B)], expect=[[r("req-0", "device-1"), r("req-0", "device-2")], [r("req-0", "device-1", driver=B)]])
C("all-devices-no-solution", c1(req()), c0(req(mode="All")), slices=[ONE], expect=None)
C("all-devices-no-solution-reversed", c0(req(mode="All")), c1(req()), slices=[ONE], expect=None)
C("all-devices-slice-without-devices", c0(req(mode="All")), slices=[s("slice-1")], expect=None)
C("all-devices-no-slices", c0(req(mode="All")), expect=None)
C("all-devices-some-allocated", c0(req(mode="All")), slices=[TWO], allocated=state(["driver-a/pool-1/device-1"]), expect=None)
C("allocation-mode-all-with-multi-host-resource-pool", c0(req(mode="All")), slices=[s("slice-1", dev("device-1"), count=2), s("slice-2", dev("device-2"), count=2, node="node-2")], expect=[[r("req-0", "device-1")]])
C("with-constraint-not-matching-int-attribute-all-devices", c0(req(mode="All"), constraints=[match("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2}))], error="claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied")
C("all-devices-with-selector", c0(req(mode="All", selectors=[BIG])), slices=MEM, expect=[[r("req-0", "device-2")]])
C("tainted-all-devices-single", c0(req(mode="All")), slices=[s("slice-1", dev("device-1", taints=[{"key": "k", "effect": "NoSchedule"}]))], expect=None)
C("tainted-all-devices-single-disabled", c0(req(mode="All")), slices=[s("slice-1", dev("device-1", taints=[{"key": "k", "effect": "NoSchedule"}]))], features=OFF["taints"], expect=[[r("req-0", "device-1")]])

# --- 6.4 admin access --------------------------------------------------------------------------
C("admin-access-enabled", c0(req(admin=True)), slices=[ONE], allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.devices.results[0].admin_access is True or pytest.fail("admin")))
C("all-devices-some-allocated-admin-access", c0(req(mode="All", admin=True)), slices=[TWO], allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("all-devices-some-allocating-admin-access", c0(req("req-0", admin=True), req("req-1", mode="All", admin=True)), slices=[TWO], expect=None)
C("count-devices-some-allocated-admin-access", c0(req(count=2, admin=True)), slices=[TWO], allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("separate-claims-share-device-admin-access", c0(req(admin=True)), c1(req(admin=True)), slices=[ONE], expect=[[r("req-0", "device-1")], [r("req-0", "device-1")]])
C("admin-access-claims-device-allocating-for-non-admin-access", c0(req()), c1(req(admin=True)), slices=[ONE], expect=[[r("req-0", "device-1")], [r("req-0", "device-1")]])
C("admin-pick-blocks-later-non-admin", c0(req(admin=True)), c1(req()), slices=[ONE], expect=None)
C("admin-result-absent-when-not-admin", c0(req(admin=False)), slices=[ONE], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.devices.results[0].admin_access is None or pytest.fail("admin")))
C("admin-namespace-label-enforced", c0(req(admin=True)), slices=[ONE], error='requires the resource.kubernetes.io/admin-access: "true" label')

# --- 6.5 network-attached / node selection -------------------------------------------------
C("network-attached-device", c0(req()), slices=[s("slice-1", dev("device-1"), selector=region("region-1"))], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.node_selector == selector(region("region-1")) or pytest.fail(str(x.node_selector))))
C("unsuccessful-allocation-network-attached-device", c0(req()), slices=[s("slice-1", dev("device-1"), selector=region("region-2"))], expect=None)
C("many-network-attached-devices", c0(req(count=4)), slices=[s("slice-1", dev("device-1"), selector=region("region-1")), s("slice-2", dev("device-2"), pool="pool-2", all_nodes=True), s("slice-3", dev("device-3"), pool="pool-3", selector=region("earth", "planet")), s("slice-4", dev("device-4"), pool="pool-4", selector={"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]})], node=NodeInfo("node-1", {"region": "region-1", "planet": "earth"}), verify=result0(lambda x: x.node_selector == selector({"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}, {"key": "planet", "operator": "In", "values": ["earth"]}], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}) or pytest.fail(str(x.node_selector))))
C("local-and-network-attached-devices", c0(req(count=2)), slices=[s("slice-1", dev("device-1"), selector=region("region-1")), s("slice-2", dev("device-2"), pool="pool-2")], verify=result0(lambda x: x.node_selector == pinned() or pytest.fail("pinned")))
C("all-nodes-only-no-selector", c0(req()), slices=[s("slice-1", dev("device-1"), all_nodes=True)], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.node_selector is None or pytest.fail("nil")))
C("duplicate-selector-requirements-merged", c0(req(count=2)), slices=[s("slice-1", dev("device-1"), selector=region("region-1")), s("slice-2", dev("device-2"), pool="pool-2", selector=region("region-1"))], verify=result0(lambda x: x.node_selector == selector(region("region-1")) or pytest.fail("merged")))
C("node-selector-two-terms", c0(req()), slices=[s("slice-1", dev("device-1"), selector={"nodeSelectorTerms": [region("region-1")["nodeSelectorTerms"][0], region("x")["nodeSelectorTerms"][0]]})], error="create NodeSelector for claim claim-0: unsupported ResourceSlice.NodeSelector with 2 terms")
C("node-selector-parse-error", c0(req()), slices=[s("slice-1", dev("device-1"), selector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["x"]}]}]})], error="failed to perform node selection for slice slice-1")
C("slice-without-node-fields-ignored", c0(req()), slices=[s("slice-1", dev("device-1"), node=None)], expect=None)

# --- 6.6 matchAttribute -----------------------------------------------------------------------
ATTRS = {"numa": 1, "driverVersion": V("1.0.0"), "stringAttribute": "s", "boolAttribute": True}
C("with-constraint", c0(req(count=2), constraints=[match("driver-a/numa"), match("driver-a/driverVersion"), match("driver-a/stringAttribute"), match("driver-a/boolAttribute")]), slices=[s("slice-1", dev("device-1", ATTRS), dev("device-2", ATTRS))], expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("with-constraint-non-existent-attribute", c0(req(count=2), constraints=[match("driver-a/missing")]), slices=[s("slice-1", dev("device-1", ATTRS), dev("device-2", ATTRS))], expect=None, verify=lambda a: (a.unsatisfiable.constraint.attribute == "driver-a/missing" and a.unsatisfiable.constraint.reason == "attribute not set") or pytest.fail(str(a.unsatisfiable)))
for kind, one, two in (("int", 1, 2), ("string", "a", "b"), ("bool", True, False), ("version", V("1.0.0"), V("2.0.0"))):
    C(f"with-constraint-not-matching-{kind}-attribute", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": one}), dev("device-2", {"a": two}))], expect=None, verify=lambda a: a.unsatisfiable.constraint.reason == "value differs" or pytest.fail("reason"))
C("with-constraint-for-request", c0(req("req-0"), req("req-1"), constraints=[match("driver-a/numa", "req-0")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2}))], expect=[[r("req-0", "device-1"), r("req-1", "device-2")]])
C("with-constraint-for-request-retry", c0(req("req-0"), req("req-1"), constraints=[match("driver-a/numa", "req-0"), match("driver-a/numa", "req-1"), match("driver-a/type")]), slices=[s("slice-1", dev("device-1", {"numa": 1, "type": "x"}), dev("device-2", {"numa": 2, "type": "y"}), dev("device-3", {"numa": 3, "type": "y"}))], expect=[[r("req-0", "device-2"), r("req-1", "device-3")]])
C("constraint-unqualified-attribute-same-driver", c0(req(count=2), constraints=[match("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"driver-a/numa": 1}))], expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("constraint-unqualified-attribute-other-driver", c0(req("req-0"), req("req-1", "class-b"), constraints=[match("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": 1})), s("slice-b", dev("device-1", {"numa": 1}), driver=B)], expect=None)
C("constraint-int-vs-bool-differ", c0(req(count=2), constraints=[match("driver-a/x")]), slices=[s("slice-1", dev("device-1", {"x": 1}), dev("device-2", {"x": True}))], expect=None)
C("constraint-across-claims-independent", c0(req(), constraints=[match("driver-a/numa")]), c1(req(), constraints=[match("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2}))], expect=[[r("req-0", "device-1")], [r("req-0", "device-2")]])
C("constraint-skips-to-matching-pair", c0(req(count=2), constraints=[match("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2}), dev("device-3", {"numa": 2}))], expect=[[r("req-0", "device-2"), r("req-0", "device-3")]])

# --- 6.7 configuration ------------------------------------------------------------------------
CLS_CFG = {"class-a": klass("class-a", A, config=[cfg(A, 1)]), "class-b": klass("class-b", B, config=[cfg(B, 2)])}
C("with-class-device-config", c0(req()), slices=[ONE], classes=CLS_CFG, verify=result0(lambda x: configs(x) == [("FromClass", (), 1)] or pytest.fail(str(configs(x)))))
C("with-class-device-config-with-multiple-request-and-configs", c0(req("req-0"), req("req-1", "class-b"), req("req-2")), slices=[TWO, s("slice-b", dev("device-1"), driver=B)], classes=CLS_CFG, verify=result0(lambda x: configs(x) == [("FromClass", ("req-0", "req-2"), 1), ("FromClass", ("req-1",), 2)] or pytest.fail(str(configs(x)))))
C("with-claim-config-for-two-requests", c0(req("req-0"), req("req-1"), req("req-2"), config=[{"requests": ["req-0", "req-1"], "opaque": cfg(A, 3)}]), slices=[s("slice-1", dev("device-1"), dev("device-2"), dev("device-3"))], verify=result0(lambda x: configs(x) == [("FromClaim", ("req-0", "req-1"), 3)] or pytest.fail(str(configs(x)))))
C("claim-with-device-config", c0(req(), config=[{"opaque": cfg(A, 4)}]), slices=[ONE], verify=result0(lambda x: configs(x) == [("FromClaim", (), 4)] or pytest.fail(str(configs(x)))))
C("class-then-claim-config-order", c0(req(), config=[{"opaque": cfg(A, 4)}]), slices=[ONE], classes=CLS_CFG, verify=result0(lambda x: configs(x) == [("FromClass", (), 1), ("FromClaim", (), 4)] or pytest.fail(str(configs(x)))))
C("prioritized-list-device-config", c0(first("req-0", sub("subReq-0", "class-b"), sub("subReq-1")), config=[{"requests": ["req-0/subReq-0"], "opaque": cfg(B, 5)}, {"requests": ["req-0/subReq-1"], "opaque": cfg(A, 6)}]), slices=[ONE], verify=result0(lambda x: configs(x) == [("FromClaim", (), 6)] or pytest.fail(str(configs(x)))))
C("prioritized-list-class-config", c0(first("req-0", sub("subReq-0", "class-b"), sub("subReq-1"))), slices=[ONE], classes=CLS_CFG, verify=result0(lambda x: configs(x) == [("FromClass", (), 1)] or pytest.fail(str(configs(x)))))
C("claim-config-naming-parent-request", c0(first("req-0", sub("subReq-0")), config=[{"requests": ["req-0"], "opaque": cfg(A, 7)}]), slices=[ONE], verify=result0(lambda x: configs(x) == [("FromClaim", (), 7)] or pytest.fail(str(configs(x)))))
C("no-config-means-empty", c0(req()), slices=[ONE], verify=result0(lambda x: x.devices.config == () or pytest.fail("config")))

# --- 6.8 prioritized list -----------------------------------------------------------------------
C("all-devices-slice-without-devices-prioritized-list", c0(first("req-0", sub("subReq-0", mode="All", selectors=[BIG]), sub("subReq-1"))), slices=[s("slice-1", dev("device-1", capacity={"memory": "1Gi"}))], expect=[[r("req-0/subReq-1", "device-1")]])
C("all-devices-no-slices-prioritized-list", c0(first("req-0", sub("subReq-0", "class-b", mode="All"), sub("subReq-1"))), slices=[ONE], expect=[[r("req-0/subReq-1", "device-1")]])
C("all-devices-some-allocated-prioritized-list", c0(first("req-0", sub("subReq-0", mode="All"), sub("subReq-1"))), slices=[TWO], allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0/subReq-1", "device-2")]])
C("prioritized-list-first-unavailable", c0(first("req-0", sub("subReq-0", "class-b"), sub("subReq-1"))), slices=[ONE], expect=[[r("req-0/subReq-1", "device-1")]])
C("prioritized-list-first-available", c0(first("req-0", sub("subReq-0"), sub("subReq-1", "class-b"))), slices=[ONE, s("slice-b", dev("device-1"), driver=B)], expect=[[r("req-0/subReq-0", "device-1")]])
C("prioritized-list-non-available", c0(first("req-0", sub("subReq-0", "class-b"), sub("subReq-1", count=2))), slices=[ONE], expect=None)
C("prioritized-list-subrequests-with-expressions", c0(first("req-0", sub("subReq-0", selectors=['device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) >= 0']), sub("subReq-1", count=2, selectors=[SMALL]))), slices=MEM, expect=[[r("req-0/subReq-1", "device-1"), r("req-0/subReq-1", "device-2")]])
C("prioritized-list-subrequests-with-constraints-ref-parent-request", c0(req("req-0"), first("req-1", sub("subReq-0", "class-a"), sub("subReq-1")), constraints=[match("driver-a/numa", "req-0", "req-1")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2}), dev("device-3", {"numa": 1}))], expect=[[r("req-0", "device-1"), r("req-1/subReq-0", "device-3")]])
C("prioritized-list-subrequests-with-constraints-ref-sub-request", c0(req("req-0"), first("req-1", sub("subReq-0", count=2), sub("subReq-1")), constraints=[match("driver-a/numa", "req-0", "req-1/subReq-0")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2}))], expect=[[r("req-0", "device-1"), r("req-1/subReq-1", "device-2")]])
C("prioritized-list-subrequests-with-allocation-mode-all", c0(first("req-0", sub("subReq-0", mode="All"), sub("subReq-1"))), slices=[TWO], allocated=state(["driver-a/pool-1/device-2"]), expect=[[r("req-0/subReq-1", "device-1")]])
C("prioritized-list-allocation-mode-all-multiple-requests", c0(req("req-0"), first("req-1", sub("subReq-0", mode="All"), sub("subReq-1"))), slices=[TWO], expect=[[r("req-0", "device-1"), r("req-1/subReq-1", "device-2")]])
C("prioritized-list-disabled", c0(first("req-0", sub("subReq-0"))), slices=[ONE], features=OFF["prio"], error="claim default/claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled")
C("prioritized-list-multi-request", c0(req("req-0"), first("req-1", sub("subReq-0", selectors=[BIG]), sub("subReq-1", "class-b"))), slices=[s("slice-1", dev("device-1", capacity={"memory": "1Gi"})), s("slice-b", dev("device-1"), driver=B)], expect=[[r("req-0", "device-1"), r("req-1/subReq-1", "device-1", driver=B)]])
C("prioritized-list-with-backtracking", c0(first("req-0", sub("subReq-0", selectors=[SMALL]), sub("subReq-1")), req("req-1", selectors=[BIG])), slices=[s("slice-1", dev("device-2", capacity={"memory": "2Gi"}), dev("device-1", capacity={"memory": "1Gi"}))], expect=[[r("req-0/subReq-0", "device-1"), r("req-1", "device-2")]])
C("prioritized-list-backtracking-lower-subrequest", c0(first("req-0", sub("subReq-0", count=2), sub("subReq-1")), req("req-1")), slices=[TWO], expect=[[r("req-0/subReq-1", "device-1"), r("req-1", "device-2")]])
C("prioritized-list-too-many-in-first-subrequest", c0(first("req-0", sub("subReq-0", count=500), sub("subReq-1"))), slices=[ONE], expect=[[r("req-0/subReq-1", "device-1")]])
C("prioritized-list-allocation-mode-all", c0(first("req-0", sub("subReq-0", mode="All"), sub("subReq-1", count=1))), slices=[TWO], allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0/subReq-1", "device-2")]])
C("prioritized-list-allocation-mode-all-with-selectors-multiple-pools", c0(first("req-0", sub("subReq-0", mode="All", selectors=[BIG]), sub("subReq-1"))), slices=[s("slice-1", dev("device-1", capacity={"memory": "2Gi"}), dev("device-2", capacity={"memory": "1Gi"})), s("slice-2", dev("device-3", capacity={"memory": "4Gi"}), pool="pool-2")], expect=[[r("req-0/subReq-0", "device-1"), r("req-0/subReq-0", "device-3", pool="pool-2")]])
C("prioritized-list-allocation-mode-all-across-nodes", c0(first("req-0", sub("subReq-0", mode="All"), sub("subReq-1"))), slices=[s("slice-1", dev("device-1")), s("slice-2", dev("device-2"), pool="pool-2", node="node-2")], expect=[[r("req-0/subReq-0", "device-1")]])
C("prioritized-list-allocation-mode-all-deviceclass-subset", c0(first("req-0", sub("subReq-0", "big", mode="All"), sub("subReq-1"))), classes={**CLASSES, "big": klass("big", A, [BIG])}, slices=MEM, expect=[[r("req-0/subReq-0", "device-2")]])
C("prioritized-list-max-allocation-limit-request", c0(first("req-0", sub("subReq-0", count=32), sub("subReq-1", count=16)), first("req-1", sub("subReq-0", count=32), sub("subReq-1", count=16))), slices=[s("slice-1", *[dev(f"device-{i}") for i in range(32)])], verify=lambda a: [x.request for x in a.results[0].devices.results] == ["req-0/subReq-1"] * 16 + ["req-1/subReq-1"] * 16 or pytest.fail("limit"), steps=75)
C("prioritized-list-max-allocation-allocation-mode-all", c0(first("req-0", sub("subReq-0", mode="All"), sub("subReq-1", count=2))), slices=[s("slice-1", *[dev(f"device-{i}") for i in range(40)])], verify=lambda a: len(a.results[0].devices.results) == 2 or pytest.fail("n"))
C("check-combinations-with-prioritized-list", c0(first("req-0", sub("subReq-0", count=5), sub("subReq-1", count=2)), req("req-1", selectors=['device.attributes["driver-a"].type == "x"'])), slices=[s("slice-1", dev("device-1", {"type": "x"}), dev("device-2", {"type": "y"}), dev("device-3", {"type": "y"}))], expect=[[r("req-0/subReq-1", "device-2"), r("req-0/subReq-1", "device-3"), r("req-1", "device-1")]])

# --- 6.9 taints ---------------------------------------------------------------------------------
NS = {"key": "ns", "value": "v", "effect": "NoSchedule"}
NE = {"key": "ne", "value": "v", "effect": "NoExecute"}
TAINTED = [s("slice-1", dev("device-1", taints=[NS]), dev("device-2", taints=[NE]))]
C("tainted-two-devices", c0(req()), slices=TAINTED, expect=None)
C("tainted-one-device-two-taints", c0(req()), slices=[s("slice-1", dev("device-1", taints=[NS, NE]))], expect=None)
TOL_NE = {"key": "ne", "operator": "Exists", "effect": "NoExecute"}
C("tainted-two-devices-tolerated", c0(req(tolerations=[TOL_NE])), slices=TAINTED, expect=[[r("req-0", "device-2")]], verify=result0(lambda x: [t.key for t in x.devices.results[0].tolerations] == ["ne"] or pytest.fail("tol")))
C("tainted-two-devices-prioritized-list-tolerated", c0(first("req-0", sub("subReq-0"), sub("subReq-1", tolerations=[TOL_NE]))), slices=TAINTED, expect=[[r("req-0/subReq-1", "device-2")]], verify=result0(lambda x: len(x.devices.results[0].tolerations) == 1 or pytest.fail("tol")))
C("tainted-no-effect", c0(req()), slices=[s("slice-1", dev("device-1", taints=[{"key": "k", "effect": "None"}]))], expect=[[r("req-0", "device-1")]])
C("tainted-unknown-effect", c0(req()), slices=[s("slice-1", dev("device-1", taints=[{"key": "k", "effect": "Future"}]))], expect=[[r("req-0", "device-1")]])
C("tainted-one-device-two-taints-both-tolerated", c0(req(tolerations=[{"key": "ns", "operator": "Equal", "value": "v"}, TOL_NE])), slices=[s("slice-1", dev("device-1", taints=[NS, NE]))], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: len(x.devices.results[0].tolerations) == 2 or pytest.fail("tol")))
C("tainted-value-mismatch", c0(req(tolerations=[{"key": "ns", "operator": "Equal", "value": "other"}])), slices=[s("slice-1", dev("device-1", taints=[NS]))], expect=None)
C("tainted-tolerate-all-keys", c0(req(tolerations=[{"operator": "Exists"}])), slices=[s("slice-1", dev("device-1", taints=[NS, NE]))], expect=[[r("req-0", "device-1")]])
C("tainted-effect-mismatch", c0(req(tolerations=[{"key": "ns", "operator": "Exists", "effect": "NoExecute"}])), slices=[s("slice-1", dev("device-1", taints=[NS]))], expect=None)
C("tainted-disabled", c0(req()), slices=TAINTED, features=OFF["taints"], expect=[[r("req-0", "device-1")]])
C("tainted-prioritized-list", c0(first("req-0", sub("subReq-0"), sub("subReq-1"))), slices=TAINTED, expect=None)
C("tainted-prioritized-list-disabled", c0(first("req-0", sub("subReq-0"), sub("subReq-1"))), slices=TAINTED, features=OFF["taints"], expect=[[r("req-0/subReq-0", "device-1")]])
C("tainted-admin-access", c0(req(admin=True)), slices=TAINTED, expect=None)
C("tainted-admin-access-disabled", c0(req(admin=True)), slices=TAINTED, features=OFF["taints"], expect=[[r("req-0", "device-1")]])
C("taint-rule-taints-device", c0(req()), slices=[TWO], rules=[taint_rule("r", NS, driver=A, device="device-1")], expect=[[r("req-0", "device-2")]])
C("taint-rule-empty-selector-all", c0(req()), slices=[TWO], rules=[taint_rule("r", NS)], expect=None)
C("taint-rule-disabled", c0(req()), slices=[TWO], rules=[taint_rule("r", NS)], features=OFF["rules"], expect=[[r("req-0", "device-1")]])
C("taint-rule-other-pool", c0(req()), slices=[ONE], rules=[taint_rule("r", NS, pool="pool-9")], expect=[[r("req-0", "device-1")]])

# --- 6.10 partitionable devices ------------------------------------------------------------------
def part(*devices: dict[str, Any], sets: list[dict[str, Any]] | None = None, pool: str = "pool-1", node: str = "node-1", count: int = 2) -> list[ResourceSlice]:
    return [
        s(f"{pool}-counters", pool=pool, count=count, counters=sets or [counter_set("gpu-0", memory="8Gi")]),
        s(f"{pool}-devices", *devices, pool=pool, node=node, count=count),
    ]


def mig(name: str, mem: str, set_name: str = "gpu-0", **attrs: Any) -> dict[str, Any]:
    return dev(name, attrs or None, consumesCounters=[consumes(set_name, memory=mem)])


C("partitionable-devices-single-device", c0(req()), slices=part(mig("device-1", "4Gi")), expect=[[r("req-0", "device-1")]])
C("partitionable-devices-prioritized-list", c0(req("req-0", selectors=['device.attributes["driver-a"].size == "4g"']), first("req-1", sub("subReq-0", selectors=['device.attributes["driver-a"].size == "6g"']), sub("subReq-1", selectors=['device.attributes["driver-a"].size == "4g"']))), slices=part(mig("device-1", "4Gi", size="4g"), mig("device-2", "6Gi", size="6g"), mig("device-3", "4Gi", size="4g")), expect=[[r("req-0", "device-1"), r("req-1/subReq-1", "device-3")]])
C("partitionable-devices-multiple-devices", c0(req("req-0"), req("req-1")), slices=part(mig("device-1", "4Gi"), mig("device-2", "6Gi"), mig("device-3", "4Gi")), expect=[[r("req-0", "device-1"), r("req-1", "device-3")]])
C("partitionable-devices-multiple-capacity-pools", c0(req(count=2)), slices=part(mig("device-1", "8Gi", "gpu-0"), mig("device-2", "8Gi", "gpu-0"), mig("device-3", "8Gi", "gpu-1"), sets=[counter_set("gpu-0", memory="8Gi"), counter_set("gpu-1", memory="8Gi")]), expect=[[r("req-0", "device-1"), r("req-0", "device-3")]])
C("partitionable-devices-multiple-counters", c0(req(count=2)), slices=part(dev("device-1", consumesCounters=[consumes("gpu-0", memory="4Gi", slices="4")]), dev("device-2", consumesCounters=[consumes("gpu-0", memory="2Gi", slices="5")]), dev("device-3", consumesCounters=[consumes("gpu-0", memory="4Gi", slices="3")]), sets=[counter_set("gpu-0", memory="8Gi", slices="7")]), expect=[[r("req-0", "device-1"), r("req-0", "device-3")]])
C("partitionable-devices-multiple-pools", c0(req()), slices=part(mig("device-1", "8Gi"), mig("device-2", "8Gi")) + part(mig("device-3", "8Gi"), pool="pool-2"), allocated=state(["driver-a/pool-1/device-1"]), expect=[[r("req-0", "device-3", pool="pool-2")]])
C("partitionable-devices-unused-counters-in-counter-set", c0(req()), slices=part(mig("device-1", "4Gi"), sets=[counter_set("gpu-0", memory="8Gi", unused="1")]), expect=[[r("req-0", "device-1")]])
C("partitionable-devices-no-capacity-available", c0(req()), slices=part(mig("device-1", "8Gi"), mig("device-2", "4Gi")), allocated=state(["driver-a/pool-1/device-1"]), expect=None)
C("partitionable-devices-overallocated-capacity-pool", c0(req()), slices=part(mig("device-1", "8Gi"), mig("device-2", "8Gi"), mig("device-3", "1Gi")), allocated=state(["driver-a/pool-1/device-1", "driver-a/pool-1/device-2"]), expect=None)
C("partitionable-devices-disabled-device-consumes-counters", c0(req()), slices=[s("slice-1", mig("device-1", "4Gi"))], features=OFF["part"], expect=None)
C("partitionable-devices-disabled-other-device-do-not-consume-counters", c0(req()), slices=[s("slice-1", mig("device-1", "4Gi"), dev("device-2"))], features=OFF["part"], expect=[[r("req-0", "device-2")]])
C("partitionable-devices-disabled-per-device-node-selection", c0(req()), slices=[s("slice-1", dev("device-1", nodeName="node-1"), per_device=True)], features=OFF["part"], expect=None)
C("partitionable-devices-per-device-node-selection-nodename", c0(req()), slices=[s("slice-1", dev("device-1", nodeName="node-2"), dev("device-2", nodeName="node-1"), per_device=True)], expect=[[r("req-0", "device-2")]], verify=result0(lambda x: x.node_selector == pinned() or pytest.fail("pin")))
C("partitionable-devices-per-device-node-selection-node-selector", c0(req()), slices=[s("slice-1", dev("device-1", nodeSelector=region("region-1")), per_device=True)], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.node_selector == selector(region("region-1")) or pytest.fail("sel")))
C("partitionable-devices-per-device-all-nodes", c0(req()), slices=[s("slice-1", dev("device-1", allNodes=True), per_device=True)], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.node_selector is None or pytest.fail("nil")))
C("partitionable-devices-with-attribute-selector", c0(req(selectors=['device.attributes["driver-a"].size == "4g"'])), slices=part(mig("device-1", "6Gi", size="6g"), mig("device-2", "4Gi", size="4g")), expect=[[r("req-0", "device-2")]])
C("partitionable-devices-same-counter-set-name-in-different-resource-slices", c0(req()), slices=[s("c1", counters=[counter_set("gpu-0", memory="8Gi")], count=3), s("c2", counters=[counter_set("gpu-0", memory="8Gi")], count=3), s("d", mig("device-1", "4Gi"), count=3)], expect=None, summary=INVALID)
C("partitionable-devices-device-counter-consumption-references-unknown-counter-set", c0(req()), slices=part(mig("device-1", "4Gi", "nope")), expect=None, summary=INVALID, verify=lambda a: a.unsatisfiable.invalid_pools == ("driver-a/pool-1: counter set nope not found",) or pytest.fail(str(a.unsatisfiable.invalid_pools)))
C("partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set", c0(req()), slices=part(dev("device-1", consumesCounters=[consumes("gpu-0", cores="1")])), expect=None, summary=INVALID, verify=lambda a: a.unsatisfiable.invalid_pools == ("driver-a/pool-1: counter cores not found in counter set gpu-0",) or pytest.fail("msg"))
C("partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool", c0(req()), slices=[s("c", counters=[counter_set("gpu-0", memory="8Gi")], pool="pool-2"), s("d", mig("device-1", "4Gi"))], expect=None, summary=INVALID)
C("partitionable-devices-devices-on-different-nodes-consume-same-counter-set", c0(first("req-0", sub("subReq-0", selectors=['device.attributes["driver-a"].size == "6g"']), sub("subReq-1"))), slices=[s("c", counters=[counter_set("gpu-0", memory="8Gi")], count=3), s("d1", mig("device-1", "6Gi", size="6g"), mig("device-2", "2Gi", size="2g"), count=3), s("d2", mig("device-3", "4Gi", size="4g"), node="node-2", count=3)], allocated=state(["driver-a/pool-1/device-3"]), expect=[[r("req-0/subReq-1", "device-2")]])
C("partitionable-devices-validation-error-on-non-targeting-slice", c0(req()), slices=[s("c", counters=[counter_set("gpu-0", memory="8Gi")], count=3), s("d1", mig("device-1", "4Gi"), count=3), s("d2", mig("device-2", "4Gi", "nope"), node="node-2", count=3)], expect=None, summary=INVALID)
C("partitionable-counters-released-after-rejection", c0(req("req-0", count=2, tolerations=[]), constraints=[match("driver-a/numa")]), slices=part(mig("device-1", "4Gi", numa=1), mig("device-2", "4Gi", numa=2), mig("device-3", "4Gi", numa=2)), expect=[[r("req-0", "device-2"), r("req-0", "device-3")]])
C("partitionable-same-pool-name-two-drivers", c0(req("req-0"), req("req-1", "class-b")), slices=[*part(mig("device-1", "8Gi")), s("cb", counters=[counter_set("gpu-0", memory="8Gi")], driver=B, count=2), s("db", mig("device-1", "8Gi"), driver=B, count=2)], expect=[[r("req-0", "device-1"), r("req-1", "device-1", driver=B)]])

# --- 6.11 binding conditions ---------------------------------------------------------------------
BC = {"bindingConditions": ["ready"], "bindingFailureConditions": ["failed"]}
C("device-binding-conditions", c0(req()), slices=[s("slice-1", dev("device-1", **BC))], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: (x.devices.results[0].binding_conditions, x.devices.results[0].binding_failure_conditions) == (("ready",), ("failed",)) or pytest.fail("bc")))
C("binding-conditions-with-and-without", c0(req(count=2)), slices=[s("slice-1", dev("device-1", **BC), dev("device-2"))], expect=[[r("req-0", "device-1"), r("req-0", "device-2")]], verify=result0(lambda x: [d.binding_conditions for d in x.devices.results] == [("ready",), ()] or pytest.fail("bc")))
C("binding-conditions-without-feature-gate", c0(req()), slices=[s("slice-1", dev("device-1", **BC))], features=OFF["bind"], expect=None)
C("binding-condition-pools-last", c0(req()), slices=[s("slice-1", dev("device-1", **BC)), s("slice-2", dev("device-2"), pool="pool-2")], expect=[[r("req-0", "device-2", pool="pool-2")]])
C("node-restriction", c0(req()), slices=[s("slice-1", dev("device-1", bindsToNode=True, **BC), selector=region("region-1"))], expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.node_selector == pinned() or pytest.fail("pin")))
C("partitionable-devices-with-binding-conditions", c0(req()), slices=part(mig("device-1", "4Gi") | BC), expect=[[r("req-0", "device-1")]], verify=result0(lambda x: x.devices.results[0].binding_conditions == ("ready",) or pytest.fail("bc")))
C("partitionable-devices-with-binding-conditions-multi-slices", c0(req(count=2)), slices=[s("slice-4", dev("device-4", **BC), count=2), s("slice-2", dev("device-2", **BC), count=2)], expect=[[r("req-0", "device-2"), r("req-0", "device-4")]])
C("partitionable-devices-with-binding-conditions-and-taints", c0(req()), slices=part(mig("device-1", "4Gi") | BC | {"taints": [NS]}), expect=None)
C("partitionable-devices-with-binding-conditions-and-taints-tolerated", c0(req(tolerations=[{"key": "ns", "operator": "Exists"}])), slices=part(mig("device-1", "4Gi") | BC | {"taints": [NS]}), expect=[[r("req-0", "device-1")]], verify=result0(lambda x: (len(x.devices.results[0].tolerations), x.devices.results[0].binding_conditions) == (1, ("ready",)) or pytest.fail("bc")))

# --- 6.12 consumable capacity ---------------------------------------------------------------------
def shared(name: str, caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return dev(name, capacity=caps, allowMultipleAllocations=True, **extra)


def rng(value: str, default: str, mn: str, mx: str | None = None, step: str | None = None) -> dict[str, Any]:
    vr: dict[str, Any] = {"min": mn}
    if mx:
        vr["max"] = mx
    if step:
        vr["step"] = step
    return {"value": value, "requestPolicy": {"default": default, "validRange": vr}}


def vals(value: str, default: str, *values: str) -> dict[str, Any]:
    return {"value": value, "requestPolicy": {"default": default, "validValues": list(values)}}


def consumed(*expected: dict[str, str]) -> Callable[[Allocation], Any]:
    def verify(a: Allocation) -> None:
        got = [{k: str(v) for k, v in d.consumed_capacity.items()} for res in a.results for d in res.devices.results]
        assert got == list(expected), got
        assert all(d.share_id for res in a.results for d in res.devices.results)

    return verify


C("consumable-capacity-disabled-feature", c0(req(capacity={"bw": "1"})), slices=[ONE], features=OFF["cap"], error="claim default/claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity feature is disabled")
C("consumable-capacity-disabled-feature-with-prioritized-list", c0(first("req-0", sub("subReq-0", capacity={"bw": "1"}))), slices=[ONE], features=OFF["cap"], error="claim default/claim-0, subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity feature is disabled")
C("consumable-capacity-multi-allocatable-device-with-missing-capacity-request", c0(req(capacity={"nope": "1"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], expect=None)
C("consumable-capacity-all-mode-with-missing-capacity-request", c0(req(mode="All", capacity={"nope": "1"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], expect=None)
C("consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request", c0(req()), c1(req()), slices=[s("slice-1", shared("device-1"))], expect=[[r("req-0", "device-1")], [r("req-0", "device-1")]], verify=consumed({}, {}))
C("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request", c0(req()), c1(req()), slices=[s("slice-1", shared("device-1", {"bw": "10"}), shared("device-2", {"bw": "10"}))], expect=[[r("req-0", "device-1")], [r("req-0", "device-2")]], verify=consumed({"bw": "10"}, {"bw": "10"}))
C("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block", c0(req()), c1(req()), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], expect=None)
C("consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request", c0(req(capacity={"bw": "1"})), c1(req(capacity={"bw": "1"})), slices=[s("slice-1", shared("device-1", {"bw": "2"}))], expect=[[r("req-0", "device-1")], [r("req-0", "device-1")]], verify=consumed({"bw": "1"}, {"bw": "1"}))
C("consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request", c0(req()), c1(req()), slices=[s("slice-1", shared("device-1", {"bw": rng("4", "2", "1")}))], expect=[[r("req-0", "device-1")], [r("req-0", "device-1")]], verify=consumed({"bw": "2"}, {"bw": "2"}))
C("consumable-capacity-multi-allocatable-device-with-zero-request-policy", c0(req()), c1(req()), slices=[s("slice-1", shared("device-1", {"bw": vals("1", "0", "0")}))], expect=[[r("req-0", "device-1")], [r("req-0", "device-1")]], verify=consumed({"bw": "0"}, {"bw": "0"}))
C("consumable-capacity-multi-allocatable-device-violates-zero-request-policy", c0(req(capacity={"bw": "1"})), slices=[s("slice-1", shared("device-1", {"bw": vals("1", "0", "0")}))], expect=None)
C("consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request", c0(req(capacity={"bw": "1"})), slices=[s("slice-1", shared("device-1", {"bw": rng("10", "2", "2")}))], verify=consumed({"bw": "2"}))
C("consumable-capacity-multi-allocatable-device-with-range-policy-step", c0(req(capacity={"bw": "3"})), slices=[s("slice-1", shared("device-1", {"bw": rng("10", "2", "2", step="2")}))], verify=consumed({"bw": "4"}))
C("consumable-capacity-range-step-exact", c0(req(capacity={"bw": "6"})), slices=[s("slice-1", shared("device-1", {"bw": rng("10", "2", "2", step="2")}))], verify=consumed({"bw": "6"}))
C("consumable-capacity-multi-allocatable-device-with-valid-values-policy", c0(req(capacity={"bw": "3"})), slices=[s("slice-1", shared("device-1", {"bw": vals("10", "1", "1", "3", "5")}))], verify=consumed({"bw": "3"}))
C("consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up", c0(req(capacity={"bw": "2"})), slices=[s("slice-1", shared("device-1", {"bw": vals("10", "1", "1", "3", "5")}))], verify=consumed({"bw": "3"}))
C("consumable-capacity-valid-values-above-all", c0(req(capacity={"bw": "6"})), slices=[s("slice-1", shared("device-1", {"bw": vals("10", "1", "1", "3", "5")}))], expect=None)
C("consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request", c0(req(capacity={"bw": "1"})), c1(req(capacity={"bw": "2"})), slices=[s("slice-1", shared("device-1", {"bw": rng("2", "2", "2")}))], expect=None)
C("consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy", c0(req(capacity={"bw": "6"})), slices=[s("slice-1", shared("device-1", {"bw": rng("10", "1", "1", mx="4")}))], expect=None)
C("consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining", c0(req(capacity={"bw": "4"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}), shared("device-2", {"bw": "10"}))], allocated=state(shares=[("driver-a/pool-1/device-1", {"bw": "6"})]), expect=[[r("req-0", "device-1")]])
C("consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device", c0(req(capacity={"bw": "5"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}), shared("device-2", {"bw": "10"}))], allocated=state(shares=[("driver-a/pool-1/device-1", {"bw": "6"})]), expect=[[r("req-0", "device-2")]])
C("consumable-capacity-with-multi-allocatable-device-backtrack", c0(req("req-0", capacity={"bw": "1"}), req("req-1", capacity={"bw": "1"}), constraints=[match("driver-a/numa")]), c1(req(capacity={"bw": "9"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}, attributes={"numa": {"int": 1}}), shared("device-2", {"bw": "10"}, attributes={"numa": {"int": 2}}))], expect=[[r("req-0", "device-1"), r("req-1", "device-1")], [r("req-0", "device-2")]])
C("consumable-capacity-multi-allocatable-device-with-subrequest", c0(first("req-0", sub("subReq-0", capacity={"bw": "4"}), sub("subReq-1", capacity={"bw": "2"}))), slices=[s("slice-1", shared("device-1", {"bw": "3"}))], expect=[[r("req-0/subReq-1", "device-1")]])
C("consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity", c0(req(capacity={"bw": "1"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], allocated=state(shares=[("driver-a/pool-1/device-1", {"bw": "10"})]), expect=None)
C("consumable-capacity-allocation-mode-all-filter-out-no-capacity", c0(req(mode="All", capacity={"bw": "1"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}), shared("device-2"))], expect=[[r("req-0", "device-1")]])
C("consumable-capacity-allocation-mode-all-filter-out-insufficient-capacity", c0(req(mode="All", capacity={"bw": "5"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}), shared("device-2", {"bw": "4"}))], expect=[[r("req-0", "device-1")]])
C("consumable-capacity-allocation-mode-all-allocating-sufficient", c0(req("req-0", capacity={"bw": "5"}), req("req-1", mode="All", capacity={"bw": "5"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], expect=[[r("req-0", "device-1"), r("req-1", "device-1")]])
C("consumable-capacity-allocation-mode-all-in-use-sufficient", c0(req(mode="All", capacity={"bw": "5"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], allocated=state(shares=[("driver-a/pool-1/device-1", {"bw": "5"})]), expect=[[r("req-0", "device-1")]])
C("consumable-capacity-allocation-mode-all-allocating-insufficient", c0(req("req-0", capacity={"bw": "6"}), req("req-1", mode="All", capacity={"bw": "5"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], expect=None)
C("consumable-capacity-allocation-mode-all-in-use-insufficient", c0(req(mode="All", capacity={"bw": "5"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}), shared("device-2", {"bw": "10"}))], allocated=state(shares=[("driver-a/pool-1/device-1", {"bw": "6"})]), expect=None)  # 1.37: a device others use up stays in "All", which then fails
C("consumable-capacity-dedicated-device-with-consumable-capacity-request", c0(req(capacity={"bw": "1"})), slices=[s("slice-1", dev("device-1", capacity={"bw": "10"}))], expect=[[r("req-0", "device-1")]], verify=lambda a: (a.results[0].devices.results[0].consumed_capacity == {} and a.results[0].devices.results[0].share_id is None) or pytest.fail("dedicated"))
C("consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request", c0(req(capacity={"bw": "1"})), c1(req(capacity={"bw": "1"})), slices=[s("slice-1", dev("device-1", capacity={"bw": "10"}))], expect=None)
C("consumable-capacity-dedicated-device-request-too-big", c0(req(capacity={"bw": "11"})), slices=[s("slice-1", dev("device-1", capacity={"bw": "10"}))], expect=None)
C("allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector", c0(req("req-0", "dedicated")), classes={**CLASSES, "dedicated": klass("dedicated", A, ["device.allowMultipleAllocations == false"])}, slices=[s("slice-1", shared("device-1"), dev("device-2"))], expect=[[r("req-0", "device-2")]])
C("allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated", c0(req()), slices=[s("slice-1", shared("device-1"))], allocated=state(["driver-a/pool-1/device-1"]), expect=None)
C("allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable", c0(req()), slices=[s("slice-1", dev("device-1", capacity={"bw": "10"}))], allocated=state(shares=[("driver-a/pool-1/device-1", {"bw": "1"})]), expect=None)
C("allow-multiple-allocations-with-partitionable-device", c0(first("req-0", sub("subReq-0", count=2, capacity={"bw": "1"}), sub("subReq-1", capacity={"bw": "1"}))), slices=part(shared("device-1", {"bw": "10"}, consumesCounters=[consumes("gpu-0", memory="6Gi")]), shared("device-2", {"bw": "10"}, consumesCounters=[consumes("gpu-0", memory="6Gi")])), expect=[[r("req-0/subReq-1", "device-1")]])
C("allow-multiple-allocations-shared-device-counters-once", c0(req("req-0", capacity={"bw": "1"}), req("req-1", capacity={"bw": "1"})), slices=part(shared("device-1", {"bw": "10"}, consumesCounters=[consumes("gpu-0", memory="6Gi")])), expect=[[r("req-0", "device-1"), r("req-1", "device-1")]])
C("allow-multiple-allocations-with-shared-device-counter-cross-cycle", c0(req(capacity={"bw": "1"})), slices=part(shared("device-1", {"bw": "10"}, consumesCounters=[consumes("gpu-0", memory="6Gi")]), shared("device-2", {"bw": "10"}, consumesCounters=[consumes("gpu-0", memory="6Gi")])), allocated=state(shares=[("driver-a/pool-1/device-1", {"bw": "10"})]), expect=None)
C("consumable-capacity-disabled-multi-device-is-dedicated", c0(req()), c1(req()), slices=[s("slice-1", shared("device-1"))], features=OFF["cap"], expect=None)
C("consumable-capacity-qualified-name", c0(req(capacity={"driver-a/bw": "3"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], expect=None)  # names match literally
C("consumable-capacity-qualified-name-published", c0(req(capacity={"driver-a/bw": "3"})), slices=[s("slice-1", shared("device-1", {"driver-a/bw": "10"}))], verify=consumed({"driver-a/bw": "3"}))
C("consumable-capacity-share-ids-deterministic", c0(req(capacity={"bw": "1"})), slices=[s("slice-1", shared("device-1", {"bw": "10"}))], verify=lambda a: a.results[0].devices.results[0].share_id == run([c0(req(capacity={"bw": "1"}))], [s("slice-1", shared("device-1", {"bw": "10"}))]).results[0].devices.results[0].share_id or pytest.fail("share id"))

# --- 6.13 distinctAttribute --------------------------------------------------------------------------
C("with-distinct-constraints", c0(req("req-0"), req("req-1"), req("req-2"), req("req-3"), constraints=[distinct("driver-a/numa")]), slices=[s("slice-1", *[dev(f"device-{i}", {"numa": i}) for i in range(4)])], expect=[[r(f"req-{i}", f"device-{i}") for i in range(4)]])
C("with-distinct-constraints-attribute-not-set", c0(req(count=2), constraints=[distinct("driver-a/numa")]), slices=[s("slice-1", dev("device-1"), dev("device-2"))], expect=None)
C("with-distinct-constraints-unknown-type-attribute", c0(req(count=2), constraints=[distinct("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": {}}), dev("device-2", {"numa": 2}))], error="unsupported attribute value")
C("with-distinct-constraints-with-subrequests", c0(req("req-0", capacity={"bw": "1"}), first("req-1", sub("subReq-0", capacity={"bw": "1"})), req("req-2", capacity={"bw": "1"}), constraints=[distinct("driver-a/numa", "req-0", "req-1")]), slices=[s("slice-1", shared("device-1", {"bw": "10"}, attributes={"numa": {"int": 1}}), shared("device-2", {"bw": "10"}, attributes={"numa": {"int": 2}}))], expect=[[r("req-0", "device-1"), r("req-1/subReq-0", "device-2"), r("req-2", "device-1")]])
C("distinct-constraint-one-multi-allocatable-device-with-distinct-constraint", c0(req("req-0"), req("req-1"), constraints=[distinct("driver-a/numa")]), slices=[s("slice-1", shared("device-1", attributes={"numa": {"int": 1}}))], expect=None)
C("distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint", c0(req("req-0"), req("req-1"), constraints=[distinct("driver-a/numa")]), slices=[s("slice-1", shared("device-1", attributes={"numa": {"int": 1}}), shared("device-2", attributes={"numa": {"int": 2}}))], expect=[[r("req-0", "device-1"), r("req-1", "device-2")]])
C("distinct-three-devices-compares-all", c0(req(count=3), constraints=[distinct("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2}), dev("device-3", {"numa": 1}), dev("device-4", {"numa": 3}))], expect=[[r("req-0", "device-1"), r("req-0", "device-2"), r("req-0", "device-4")]])
C("distinct-with-consumable-capacity-off", c0(req(), constraints=[distinct("driver-a/numa")]), slices=[s("slice-1", dev("device-1", {"numa": 0}))], features=OFF["cap"], expect=[[r("req-0", "device-1")]])
C("distinct-unsupported-by-stable-allocator", c0(req(), constraints=[distinct("driver-a/numa")]), slices=[ONE], features=STABLE, error="empty constraint (unsupported constraint type?)")

# --- 6.14 list-type attributes --------------------------------------------------------------------
def lst(kind: str, *values: Any) -> dict[str, Any]:
    return {kind: list(values)}


C("list-attributes-match-scalar-string-values", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": "x"}), dev("device-2", {"a": "x"}))], features=LISTS, expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("list-attributes-match-list-with-common-elements", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("strings", "x", "y")}), dev("device-2", {"a": lst("strings", "y", "z")}))], features=LISTS, expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("list-attributes-match-partially-common-elements", c0(req(count=3), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("strings", "x", "y")}), dev("device-2", {"a": lst("strings", "y", "z")}), dev("device-3", {"a": lst("strings", "z", "x")}))], features=LISTS, expect=None)
C("list-attributes-match-without-common-elements", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("strings", "x")}), dev("device-2", {"a": lst("strings", "y")}))], features=LISTS, expect=None)
C("list-attributes-match-mixed-scalar-and-list", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": "y"}), dev("device-2", {"a": lst("strings", "x", "y")}))], features=LISTS, expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("list-attributes-match-list-of-int-values", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("ints", 1, 2)}), dev("device-2", {"a": lst("ints", 2, 3)}))], features=LISTS, expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("list-attributes-match-list-of-version-values", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("versions", "1.0.0", "2.0.0")}), dev("device-2", {"a": lst("versions", "2.0.0")}))], features=LISTS, expect=[[r("req-0", "device-1"), r("req-0", "device-2")]])
C("list-attributes-distinct-all-distinct", c0(req(count=2), constraints=[distinct("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("strings", "x", "y")}), dev("device-2", {"a": lst("strings", "y", "z")}), dev("device-3", {"a": lst("strings", "z")}))], features=LISTS, expect=[[r("req-0", "device-1"), r("req-0", "device-3")]])
C("list-attributes-distinct-with-common-elements", c0(req(count=2), constraints=[distinct("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("strings", "x", "y")}), dev("device-2", {"a": "y"}))], features=LISTS, expect=None)
C("list-attributes-disabled-match-constraint-with-lists", c0(req(count=2), constraints=[match("driver-a/a")]), slices=[s("slice-1", dev("device-1", {"a": lst("strings", "x")}), dev("device-2", {"a": lst("strings", "x")}))], expect=None)  # a list is a value of unknown type: never equal

# --- 6.15 multi-host pools, generations, invalid pools ---------------------------------------------
C("multi-host-resource-pool-with-stale-slice-for-current-node", c0(req()), slices=[s("slice-1", dev("device-1"), gen=1, count=2), s("slice-2", dev("device-2"), gen=2, count=2, node="node-2")], expect=None)
C("multi-host-resource-pool-complete-update-from-node-1-to-node-2", c0(req()), slices=[s("slice-1", dev("device-1"), gen=1, count=1), s("slice-2", dev("device-2"), gen=2, count=1, node="node-2")], expect=[[r("req-0", "device-1")]])
C("multi-host-resource-pool-complete-update-from-node-2-to-node-1", c0(req()), slices=[s("slice-1", dev("device-1"), gen=2, count=1), s("slice-2", dev("device-2"), gen=1, count=1, node="node-2")], expect=[[r("req-0", "device-1")]])
C("multi-host-resource-pool-incomplete-update-from-node-2-to-node-1", c0(req()), slices=[s("slice-1", dev("device-1"), gen=2, count=2), s("slice-2", dev("device-2"), gen=1, count=1, node="node-2")], expect=None)
C("different-resourceslices-in-pool-can-target-different-nodes", c0(req()), slices=[s("slice-1", dev("device-1"), count=2), s("slice-2", dev("device-2"), count=2, node="node-2")], expect=[[r("req-0", "device-1")]])
C("newer-generation-replaces-older-on-node", c0(req()), slices=[s("slice-1", dev("device-1"), gen=1), s("slice-2", dev("device-2"), gen=2)], expect=[[r("req-0", "device-2")]])
C("invalid-pool-is-ok-if-devices-can-be-allocated-from-other", c0(req()), slices=[s("slice-1", dev("device-1"), dev("device-1")), s("slice-2", dev("device-2"), pool="pool-2")], expect=[[r("req-0", "device-2", pool="pool-2")]])
C("invalid-pool-is-error-if-no-other-device-can-be-allocated", c0(req(count=2)), slices=[s("slice-1", dev("device-1"), dev("device-1")), s("slice-2", dev("device-2"), pool="pool-2")], expect=None, summary=INVALID, verify=lambda a: a.unsatisfiable.invalid_pools == ("driver-a/pool-1: duplicate device name device-1",) or pytest.fail("invalid"))

# --- 6.16 search effort -------------------------------------------------------------------------------
FOUR = [dev(f"device-{i}") for i in range(1, 5)]
C("check-combinations-within-single-request-single-pool-single-slice", c0(req(count=5)), slices=[s("slice-1", *FOUR)], expect=None, steps=16)
C("check-combinations-within-single-request-single-pool-multiple-slices", c0(req(count=5)), slices=[s(f"slice-{i}", d, count=4) for i, d in enumerate(FOUR)], expect=None, steps=16)
C("check-combinations-within-single-request-many-pools", c0(req(count=5)), slices=[s(f"slice-{i}", d, pool=f"pool-{i}") for i, d in enumerate(FOUR)], expect=None, steps=16)
C("check-combinations-with-backtracking", c0(req("req-1", count=2), req("req-2", selectors=['device.attributes["driver-a"].type == "x"'])), slices=[s("slice-1", dev("device-1", {"type": "x"}), dev("device-2", {"type": "y"}), dev("device-3", {"type": "y"}))], expect=[[r("req-1", "device-2"), r("req-1", "device-3"), r("req-2", "device-1")]], steps=12)
C("check-combinations-with-backtracking-across-slices-and-pools", c0(req("req-1", count=2), req("req-2", selectors=['device.attributes["driver-a"].type == "x"'])), slices=[s("slice-1", dev("device-1", {"type": "x"})), s("slice-2", dev("device-2", {"type": "y"}), pool="pool-2"), s("slice-3", dev("device-3", {"type": "y"}, **BC), pool="pool-3")], expect=[[r("req-1", "device-2", pool="pool-2"), r("req-1", "device-3", pool="pool-3"), r("req-2", "device-1")]], steps=12)


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_allocator_table(case: Case, request: pytest.FixtureRequest) -> None:
    kwargs: dict[str, Any] = {}
    if request.node.callspec.id == "admin-namespace-label-enforced":
        kwargs["namespace_labels"] = {"kubernetes.io/metadata.name": "default"}
    call = lambda: run(case.claims, case.slices, classes=case.classes, allocated=case.allocated, node=case.node, features=case.features, rules=case.rules, **kwargs)  # noqa: E731
    if case.error is not None:
        with pytest.raises(AllocationError, match=re.escape(case.error)):
            call()
        return
    alloc = call()
    if (case.expect is None and case.verify is None) or case.summary is not None:
        assert alloc.results is None, picks(alloc)
        assert alloc.unsatisfiable is not None
        if case.summary is not None:
            assert alloc.unsatisfiable.summary == case.summary
    elif case.expect is not None:
        assert picks(alloc) == case.expect
    if case.verify is not None:
        case.verify(alloc)
    if case.steps is not None:
        assert alloc.steps == case.steps
    if alloc.results is not None:
        assert all(res.allocation_timestamp is None for res in alloc.results)


def test_case_count() -> None:
    assert len(CASES) >= 120


def test_inputs_not_mutated() -> None:
    import msgspec

    claims = [c0(req(capacity={"bw": "1"})), c1(req())]
    slices = [s("slice-1", shared("device-1", {"bw": "10"}), dev("device-2"))]
    before = msgspec.json.encode([*claims, *slices], enc_hook=str)
    run(claims, slices)
    assert msgspec.json.encode([*claims, *slices], enc_hook=str) == before
    assert Quantity.parse("1") == Quantity.parse("1")
