"""Hypothesis strategies for DRA objects, valid and invalid, for the validation differential.

A document is a valid base of one kind with one to three mutations, each setting one field
to a value drawn from that field's family: names, label keys and values, qualified names,
quantities, counts, enums, list sizes around their limits. Values sit mostly near the rules'
edges (63/64 characters, empty, upper case, one '/' too many), so a sample of a few hundred
documents crosses most rules. Left out by construction, because kubedra and a default 1.37
API server differ there on purpose (docs/compatibility.md, "Validation"): list-valued
attributes (an alpha feature the server drops), an explicitly empty `devices` or
`sharedCounters` list, CEL expression contents (checked by the CEL layer, not here), the
status of a DeviceTaintRule (the server drops it on create), wrong JSON types and numbers
beyond int64 (decoding errors without field paths upstream), and `adminAccess: true` (the
server looks up the namespace's label: the embedded store does that on create, not the
stateless validation compared here).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tests.api import manifests

Strategy = st.SearchStrategy[Any]
_ASCII = "abcxyzABZ0129-._/ "


def _texts(edges: list[str], alphabet: str = _ASCII, max_size: int = 12) -> Strategy:
    return st.one_of(st.sampled_from(edges), st.text(alphabet=alphabet, max_size=max_size))


LABELS = _texts(
    ["gpu-0", "a", "0", "A", "gpu_0", "-a", "a-", "a.b", "", "x" * 63, "x" * 64, "9a", "a b", "é"]
)
SUBDOMAINS = _texts(
    [
        "gpu.example.com",
        "a",
        "GPU.example.com",
        "a..b",
        "-a.com",
        "a.-b",
        "x" * 63,
        "x" * 64 + ".com",
        "a" * 253,
        "a" * 254,
        "a_b.com",
        "",
        "a.",
        "a/b",
        "Gpu",
    ]
)
LABEL_NAMES = _texts(
    ["app", "App.Name_1", "a", "", "-a", "a-", "x" * 63, "x" * 64, "a b", "a.b", "é"]
)
LABEL_VALUES = _texts(["", "v", "V_1.a-b", "-v", "v-", "x" * 63, "x" * 64, "a b", "a/b"])
IDENTIFIERS = _texts(
    ["memory", "m", "_x", "x9", "9x", "a-b", "", "x" * 32, "x" * 33, "A"], alphabet="abzAZ09_-."
)


def prefixed(names: Strategy) -> Strategy:
    """`name`, `prefix/name`, `/name` or `prefix/name/x`: label keys, qualified names."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        name = draw(names)
        shape = draw(st.sampled_from(["bare", "prefixed", "prefixed", "two-slashes", "empty"]))
        if shape == "bare":
            return str(name)
        if shape == "empty":
            return f"/{name}"
        key = f"{draw(SUBDOMAINS)}/{name}"
        return f"{key}/x" if shape == "two-slashes" else key

    return build()


def label_keys() -> Strategy:
    return prefixed(LABEL_NAMES)


def qualified_names() -> Strategy:
    return prefixed(IDENTIFIERS)


QUANTITIES = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "10Gi",
        "15Gi",
        "20Gi",
        "40Gi",
        "80Gi",
        "81Gi",
        "100Gi",
        "1500m",
        "0.5",
        "-1",
        "-10Gi",
        "1k",
        "1Ki",
        "7",
    ]
)
COUNTS = st.sampled_from([-1, 0, 1, 2, 3, 32, 33, 9223372036854775807])
BOOLS = st.sampled_from([True, False])


def enum(*values: str) -> Strategy:
    return st.sampled_from([*values, "", "other", values[0].lower(), values[0].upper()])


def lists_of(item: Strategy, limit: int) -> Strategy:
    """Lists around a limit: empty, a few, at the limit, one over."""
    return st.sampled_from([0, 1, 2, limit, limit + 1]).flatmap(
        lambda n: st.lists(item, min_size=n, max_size=n)
    )


def maps_of(keys: Strategy, values: Strategy, max_size: int = 3) -> Strategy:
    return st.dictionaries(keys, values, max_size=max_size)


# --- field value families ------------------------------------------------------------------

SELECTOR = st.sampled_from(
    [
        {"cel": {"expression": "true"}},
        {},
        {"cel": {"expression": ""}},
        {"cel": {"expression": "true || " * 1300 + "true"}},
    ]
)
OPAQUE = st.fixed_dictionaries(
    {
        "driver": SUBDOMAINS,
        "parameters": st.sampled_from([{"a": 1}, {}, [1], "x", {"p": "x" * 10241}]),
    }
)
TOLERATION = st.fixed_dictionaries(
    {},
    optional={
        "key": label_keys(),
        "operator": enum("Equal", "Exists"),
        "value": LABEL_VALUES,
        "effect": enum("NoSchedule", "NoExecute", "None"),
        "tolerationSeconds": st.sampled_from([-1, 0, 5]),
    },
)
TAINT = st.fixed_dictionaries(
    {"key": label_keys()},
    optional={"value": LABEL_VALUES, "effect": enum("NoSchedule", "NoExecute", "None")},
)
ATTRIBUTE = st.one_of(
    st.fixed_dictionaries({"string": st.sampled_from(["x", "", "x" * 64, "x" * 65, "é" * 33])}),
    st.fixed_dictionaries({"int": st.sampled_from([0, -1, 7])}),
    st.fixed_dictionaries({"bool": BOOLS}),
    st.fixed_dictionaries(
        {
            "version": st.sampled_from(
                ["1.2.3", "1.2", "v1.2.3", "1.2.3-rc.1+b", "01.2.3", "1." + "1" * 63 + ".3"]
            )
        }
    ),
    st.sampled_from([{}, {"int": 1, "bool": True}, {"string": "x", "version": "1.0.0"}]),
)
RANGE = st.fixed_dictionaries({"min": QUANTITIES}, optional={"max": QUANTITIES, "step": QUANTITIES})
REQUEST_POLICY = st.fixed_dictionaries(
    {},
    optional={
        "default": QUANTITIES,
        "validValues": lists_of(QUANTITIES, 10),
        "validRange": RANGE,
    },
)
CAPACITY = st.fixed_dictionaries({"value": QUANTITIES}, optional={"requestPolicy": REQUEST_POLICY})
COUNTERS = maps_of(LABELS, st.fixed_dictionaries({"value": QUANTITIES}))
CONSUMPTION = st.fixed_dictionaries({"counterSet": LABELS, "counters": COUNTERS})
NODE_SELECTOR_REQUIREMENT = st.fixed_dictionaries(
    {
        "key": st.one_of(label_keys(), st.just("metadata.name")),
        "operator": enum("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
    },
    optional={"values": st.lists(LABEL_VALUES, max_size=2)},
)
NODE_SELECTOR = st.fixed_dictionaries(
    {
        "nodeSelectorTerms": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "matchExpressions": st.lists(NODE_SELECTOR_REQUIREMENT, max_size=2),
                    "matchFields": st.lists(NODE_SELECTOR_REQUIREMENT, max_size=1),
                },
            ),
            max_size=2,
        )
    }
)
REQUEST_REFS = st.lists(
    st.sampled_from(
        ["gpu", "nic", "nic/rdma", "nic/eth", "gpu/x", "tpu", "a/b/c", "", "GPU", "nic/"]
    ),
    max_size=3,
)
FQ_NAMES = st.one_of(qualified_names(), st.just("resource.kubernetes.io/pcieRoot"))
UUIDS = st.sampled_from(
    ["0b2f4c8e-5c1a-4d7e-9a3b-2f6e8d1c4a7b", "X", "", "0B2F4C8E-5C1A-4D7E-9A3B-2F6E8D1C4A7B"]
)


# --- valid bases -----------------------------------------------------------------------------


def rich_slice() -> dict[str, Any]:
    doc = manifests.shared_device_slice_doc()
    device = doc["spec"]["devices"][0]
    device["taints"] = [{"key": "example.com/maintenance", "value": "soon", "effect": "NoSchedule"}]
    device["bindingConditions"] = ["example.com/ready"]
    device["bindingFailureConditions"] = ["example.com/failed"]
    device["consumesCounters"] = [
        {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}
    ]
    doc["spec"]["devices"].append({"name": "gpu-1", "attributes": {"index": {"int": 1}}})
    return doc


def per_device_slice() -> dict[str, Any]:
    doc = manifests.slice_doc()
    del doc["spec"]["nodeName"]
    doc["spec"]["perDeviceNodeSelection"] = True
    doc["spec"]["devices"][0]["nodeName"] = "node-1"
    doc["spec"]["devices"].append({"name": "gpu-1", "allNodes": True})
    return doc


def rich_claim() -> dict[str, Any]:
    doc = manifests.claim_doc()
    exactly = doc["spec"]["devices"]["requests"][0]["exactly"]
    exactly["selectors"] = [{"cel": {"expression": "true"}}]
    exactly["tolerations"] = [{"key": "example.com/maintenance", "operator": "Exists"}]
    exactly["capacity"] = {"requests": {"memory": "10Gi"}}
    return doc


def rich_allocated_claim() -> dict[str, Any]:
    doc = manifests.allocated_claim_doc()
    result = doc["status"]["allocation"]["devices"]["results"][0]
    result["tolerations"] = [{"key": "k", "operator": "Exists"}]
    doc["status"]["allocation"]["devices"]["config"] = [
        {
            "source": "FromClaim",
            "requests": ["gpu"],
            "opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}},
        }
    ]
    doc["status"]["reservedFor"][0]["uid"] = "0b2f4c8e-5c1a-4d7e-9a3b-2f6e8d1c4a7b"
    doc["status"]["devices"] = [
        {
            "driver": "gpu.nvidia.com",
            "pool": "node-1",
            "device": "gpu-0",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Up",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    ]
    return doc


def rich_class() -> dict[str, Any]:
    doc = manifests.class_doc()
    doc["spec"]["extendedResourceName"] = "example.com/gpu"
    return doc


BASES: dict[str, Callable[[], dict[str, Any]]] = {
    "slice": rich_slice,
    "per-device-slice": per_device_slice,
    "counters-slice": manifests.counters_slice_doc,
    "claim": rich_claim,
    "allocated-claim": rich_allocated_claim,
    "class": rich_class,
    "template": manifests.template_doc,
    "taint-rule": manifests.taint_rule_doc,
    "pod": manifests.pod_doc,
}

_META: list[tuple[str, Strategy]] = [
    ("metadata.name", SUBDOMAINS),
    ("metadata.generateName", SUBDOMAINS),
    ("metadata.labels", maps_of(label_keys(), LABEL_VALUES)),
    ("metadata.annotations", maps_of(label_keys(), st.just("x"))),
    (
        "metadata.finalizers",
        st.lists(
            st.one_of(
                label_keys(), st.sampled_from(["kubernetes", "orphan", "foregroundDeletion"])
            ),
            max_size=2,
        ),
    ),
    (
        "metadata.ownerReferences",
        st.lists(
            st.fixed_dictionaries(
                {
                    "apiVersion": st.sampled_from(["v1", "apps/v1", "", "a/b/c", "/v1", "apps/"]),
                    "kind": st.sampled_from(["Pod", "", "Event"]),
                    "name": st.sampled_from(["p", ""]),
                    "uid": st.sampled_from(["u", ""]),
                },
                optional={"controller": BOOLS},
            ),
            max_size=2,
        ),
    ),
]
_DEVICE = "spec.devices.0"
_SLICE: list[tuple[str, Strategy]] = [
    ("spec.driver", SUBDOMAINS),
    ("spec.pool.name", st.one_of(SUBDOMAINS, st.sampled_from(["a/b", "a//b", "A/b"]))),
    ("spec.pool.generation", COUNTS),
    ("spec.pool.resourceSliceCount", COUNTS),
    ("spec.nodeName", SUBDOMAINS),
    ("spec.allNodes", BOOLS),
    ("spec.nodeSelector", NODE_SELECTOR),
    ("spec.devices", st.lists(st.fixed_dictionaries({"name": LABELS}), min_size=1, max_size=3)),
    (f"{_DEVICE}.name", LABELS),
    (f"{_DEVICE}.attributes", maps_of(qualified_names(), ATTRIBUTE)),
    (f"{_DEVICE}.attributes.productName", ATTRIBUTE),
    (f"{_DEVICE}.capacity", maps_of(qualified_names(), CAPACITY)),
    (f"{_DEVICE}.capacity.memory.requestPolicy", REQUEST_POLICY),
    (f"{_DEVICE}.capacity.memory.requestPolicy.validRange", RANGE),
    (f"{_DEVICE}.capacity.memory.requestPolicy.default", QUANTITIES),
    (f"{_DEVICE}.capacity.memory.requestPolicy.validValues", lists_of(QUANTITIES, 10)),
    (f"{_DEVICE}.consumesCounters.0.counters", COUNTERS),
    (f"{_DEVICE}.consumesCounters.0.counterSet", LABELS),
    ("spec.perDeviceNodeSelection", BOOLS),
    (f"{_DEVICE}.allowMultipleAllocations", BOOLS),
    (f"{_DEVICE}.taints", lists_of(TAINT, 16)),
    (f"{_DEVICE}.taints.0", TAINT),
    (f"{_DEVICE}.consumesCounters", lists_of(CONSUMPTION, 2)),
    (f"{_DEVICE}.bindingConditions", lists_of(label_keys(), 4)),
    (f"{_DEVICE}.bindingFailureConditions", lists_of(label_keys(), 4)),
    (f"{_DEVICE}.nodeName", SUBDOMAINS),
    (f"{_DEVICE}.allNodes", BOOLS),
    (f"{_DEVICE}.nodeSelector", NODE_SELECTOR),
    ("spec.devices.1.name", LABELS),
]
_REQ = "spec.devices.requests"
_CLAIM: list[tuple[str, Strategy]] = [
    (f"{_REQ}.0.name", LABELS),
    (f"{_REQ}.1.name", LABELS),
    (f"{_REQ}.0.exactly.deviceClassName", SUBDOMAINS),
    (f"{_REQ}.0.exactly.count", COUNTS),
    (f"{_REQ}.0.exactly.allocationMode", enum("ExactCount", "All")),
    (f"{_REQ}.0.exactly.selectors", lists_of(SELECTOR, 32)),
    (f"{_REQ}.0.exactly.tolerations", lists_of(TOLERATION, 16)),
    (f"{_REQ}.0.exactly.tolerations.0", TOLERATION),
    (
        f"{_REQ}.0.exactly.capacity",
        st.fixed_dictionaries({"requests": maps_of(qualified_names(), QUANTITIES)}),
    ),
    # adminAccess: true needs a labelled namespace: the store's check, not validation's
    (f"{_REQ}.0.exactly.adminAccess", st.just(False)),
    (
        f"{_REQ}.0.firstAvailable",
        st.lists(
            st.fixed_dictionaries({"name": LABELS, "deviceClassName": SUBDOMAINS}), max_size=2
        ),
    ),
    (
        f"{_REQ}.1.firstAvailable",
        lists_of(st.fixed_dictionaries({"name": LABELS, "deviceClassName": SUBDOMAINS}), 8),
    ),
    (f"{_REQ}.1.firstAvailable.0.name", LABELS),
    (f"{_REQ}.1.firstAvailable.0.count", COUNTS),
    (f"{_REQ}.1.firstAvailable.0.allocationMode", enum("ExactCount", "All")),
    (f"{_REQ}.1.firstAvailable.0.tolerations", st.lists(TOLERATION, max_size=2)),
    (
        f"{_REQ}",
        lists_of(
            st.fixed_dictionaries(
                {
                    "name": LABELS,
                    "exactly": st.fixed_dictionaries({"deviceClassName": st.just("c")}),
                }
            ),
            32,
        ),
    ),
    ("spec.devices.constraints.0.requests", REQUEST_REFS),
    ("spec.devices.constraints.0.matchAttribute", FQ_NAMES),
    ("spec.devices.constraints.0.distinctAttribute", FQ_NAMES),
    (
        "spec.devices.constraints",
        lists_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "requests": REQUEST_REFS,
                    "matchAttribute": FQ_NAMES,
                    "distinctAttribute": FQ_NAMES,
                },
            ),
            32,
        ),
    ),
    ("spec.devices.config.0.requests", REQUEST_REFS),
    ("spec.devices.config.0.opaque", OPAQUE),
    ("spec.devices.config", lists_of(st.fixed_dictionaries({"opaque": OPAQUE}), 32)),
]
_RESULT = "status.allocation.devices.results.0"
_STATUS: list[tuple[str, Strategy]] = [
    (f"{_RESULT}.request", st.sampled_from(["gpu", "nic/rdma", "nic", "tpu", "a/b/c", ""])),
    (f"{_RESULT}.driver", SUBDOMAINS),
    (f"{_RESULT}.pool", st.one_of(SUBDOMAINS, st.sampled_from(["a/b", "a//b"]))),
    (f"{_RESULT}.device", LABELS),
    (f"{_RESULT}.shareID", UUIDS),
    (f"{_RESULT}.tolerations", st.lists(TOLERATION, max_size=2)),
    (f"{_RESULT}.bindingConditions", lists_of(label_keys(), 4)),
    (f"{_RESULT}.bindingFailureConditions", lists_of(label_keys(), 4)),
    ("status.allocation.devices.config.0.source", enum("FromClaim", "FromClass")),
    ("status.allocation.devices.config.0.requests", REQUEST_REFS),
    ("status.allocation.nodeSelector", NODE_SELECTOR),
    (
        "status.reservedFor",
        st.lists(
            st.fixed_dictionaries(
                {
                    "resource": st.sampled_from(["pods", ""]),
                    "name": st.sampled_from(["p", ""]),
                    "uid": st.sampled_from(["u1", "u2", ""]),
                }
            ),
            max_size=3,
        ),
    ),
    ("status.devices.0.device", LABELS),
    ("status.devices.0.shareID", UUIDS),
    (
        "status.devices.0.conditions",
        lists_of(
            st.just(
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Up",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ),
            8,
        ),
    ),
    (
        "status.devices",
        st.lists(
            st.fixed_dictionaries(
                {"driver": SUBDOMAINS, "pool": st.just("node-1"), "device": LABELS}
            ),
            max_size=2,
        ),
    ),
]

MUTATIONS: dict[str, list[tuple[str, Strategy]]] = {
    "slice": _META + _SLICE,
    "per-device-slice": _META + _SLICE,
    "counters-slice": [
        *_META,
        (
            "spec.sharedCounters",
            lists_of(st.fixed_dictionaries({"name": LABELS, "counters": COUNTERS}), 8),
        ),
        ("spec.sharedCounters.0.name", LABELS),
        ("spec.sharedCounters.0.counters", COUNTERS),
    ],
    "claim": _META + _CLAIM,
    "allocated-claim": _CLAIM[:4] + _STATUS,
    "class": [
        *_META,
        ("spec.selectors", lists_of(SELECTOR, 32)),
        ("spec.config", lists_of(st.fixed_dictionaries({"opaque": OPAQUE}), 32)),
        ("spec.config.0.opaque", OPAQUE),
        (
            "spec.extendedResourceName",
            st.one_of(
                label_keys(),
                st.sampled_from(
                    [
                        "example.com/gpu",
                        "requests.example.com/x",
                        "kubernetes.io/gpu",
                        "a.kubernetes.io/x",
                        "gpu",
                    ]
                ),
            ),
        ),
    ],
    "template": [
        *_META,
        (
            "spec.metadata",
            st.fixed_dictionaries(
                {},
                optional={
                    "labels": maps_of(label_keys(), LABEL_VALUES),
                    "annotations": maps_of(label_keys(), st.just("x")),
                    "name": st.just("x"),
                    "namespace": st.just("default"),
                    "generateName": st.just("x-"),
                },
            ),
        ),
        (f"spec.spec.{_REQ[5:]}.0.exactly.count", COUNTS),
        (f"spec.spec.{_REQ[5:]}.0.name", LABELS),
    ],
    "taint-rule": [
        *_META,
        ("spec.deviceSelector.driver", SUBDOMAINS),
        ("spec.deviceSelector.pool", st.one_of(SUBDOMAINS, st.just("a/b"))),
        ("spec.deviceSelector.device", LABELS),
        ("spec.taint", TAINT),
    ],
    "pod": [
        *_META,
        (
            "spec.resourceClaims",
            st.lists(
                st.fixed_dictionaries(
                    {"name": LABELS},
                    optional={
                        "resourceClaimName": SUBDOMAINS,
                        "resourceClaimTemplateName": SUBDOMAINS,
                    },
                ),
                max_size=2,
            ),
        ),
        (
            "spec.containers.0.resources.claims",
            st.lists(
                st.fixed_dictionaries(
                    {"name": st.sampled_from(["gpus", "tpus", ""])}, optional={"request": LABELS}
                ),
                max_size=3,
            ),
        ),
        ("spec.nodeSelector", maps_of(label_keys(), LABEL_VALUES)),
        ("spec.tolerations", st.lists(TOLERATION, max_size=2)),
    ],
}


def put(doc: dict[str, Any], path: str, value: Any) -> bool:
    """Set the field at the dotted path in place, where its parent exists; False (nothing
    changed) where an earlier mutation removed the way there. Parents are never made up:
    a made-up parent would lack its required fields."""
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = doc
    for part in parents:
        if not _has(node, part, new=False):
            return False
        node = node[part]
    if not _has(node, last, new=True):
        return False
    node[last] = copy.deepcopy(value)
    return True


def _has(node: Any, part: str | int, new: bool) -> bool:
    """Whether `node[part]` exists (or, for a new map key, may be set)."""
    if isinstance(part, int):
        return isinstance(node, list) and part < len(node)
    return isinstance(node, dict) and (new or part in node)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid base with one to three field mutations."""
    kind = draw(st.sampled_from(sorted(BASES)))
    doc = BASES[kind]()
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path, values = draw(st.sampled_from(MUTATIONS[kind]))
        put(doc, path, draw(values))
    return doc
