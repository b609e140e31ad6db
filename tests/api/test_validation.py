"""API-server validation: one invalid object per rule, asserting the exact path and message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.validation import check, validate
from kubedra.errors import ValidationError
from tests.api.manifests import (
    DELETE,
    allocated_claim_doc,
    claim_doc,
    class_doc,
    counters_slice_doc,
    mutate,
    pod_doc,
    shared_device_slice_doc,
    slice_doc,
    taint_rule_doc,
    template_doc,
)

LABEL = (
    "must be a lowercase RFC 1123 label: at most 63 lower case alphanumeric characters or '-', "
    "starting and ending with an alphanumeric character (e.g. 'gpu-0')"
)
SUBDOMAIN = (
    "must be a lowercase RFC 1123 subdomain: at most 253 characters, dot-separated labels of "
    "lower case alphanumerics or '-', each starting and ending with an alphanumeric "
    "(e.g. 'gpu.example.com')"
)
REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)
ONE_OF_NODE = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
DEV = "spec.devices[0]"
REQ = "spec.devices.requests"
CONDITION = {"type": "Ready", "status": "True", "reason": "Up", "lastTransitionTime": "2026-01-01T00:00:00Z"}


def attrs(n: int) -> dict[str, Any]:
    return {f"a{i}": {"int": i} for i in range(n)}


def devices(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"gpu-{i}", **extra} for i in range(n)]


# (id, base document, dotted path to change, new value or DELETE, expected path, message)
CASES: list[tuple[str, Callable[[], dict[str, Any]], str, Any, str, str]] = [
    # --- metadata
    ("name-required", class_doc, "metadata.name", DELETE, "metadata.name",
     "Required value: name or generateName is required"),
    ("name-subdomain", class_doc, "metadata.name", "High_Memory", "metadata.name",
     f'Invalid value: "High_Memory": {SUBDOMAIN}'),
    ("namespace-label", claim_doc, "metadata.namespace", "team.a", "metadata.namespace",
     f'Invalid value: "team.a": {LABEL}'),
    ("label-key", claim_doc, "metadata.labels", {"-bad": "x"}, "metadata.labels",
     'Invalid value: "-bad": name part must be at most 63 alphanumeric characters, \'-\', \'_\' '
     "or '.', starting and ending with an alphanumeric character"),
    ("label-value", claim_doc, "metadata.labels", {"app": "a b"}, "metadata.labels",
     "Invalid value: \"a b\": a valid label value must be empty or at most 63 alphanumeric "
     "characters, '-', '_' or '.', starting and ending with an alphanumeric character"),
    # --- ResourceSlice spec
    ("slice-driver-required", slice_doc, "spec.driver", DELETE, "spec.driver", "Required value"),
    ("slice-driver-length", slice_doc, "spec.driver", "a" * 64 + ".com", "spec.driver",
     f'Invalid value: "{"a" * 64}.com": must be no more than 63 characters'),
    ("pool-name-required", slice_doc, "spec.pool.name", "", "spec.pool.name", "Required value"),
    ("pool-name-part", slice_doc, "spec.pool.name", "zone-a/Node_1", "spec.pool.name",
     f"Invalid value: \"zone-a/Node_1\": each '/'-separated part {SUBDOMAIN}"),
    ("pool-generation", slice_doc, "spec.pool.generation", -1, "spec.pool.generation",
     "Invalid value: -1: must be greater than or equal to 0"),
    ("pool-slice-count", slice_doc, "spec.pool.resourceSliceCount", 0,
     "spec.pool.resourceSliceCount", "Invalid value: 0: must be greater than zero"),
    ("node-selection-none", slice_doc, "spec.nodeName", DELETE, "spec",
     f"Required value: {ONE_OF_NODE} is required"),
    ("node-selection-many", slice_doc, "spec.allNodes", True, "spec",
     f'Invalid value: "{{`nodeName`, `allNodes`}}": {ONE_OF_NODE} is required, but multiple '
     "fields are set"),
    ("all-nodes-false", slice_doc, "spec", {"driver": "d.example.com", "allNodes": False,
     "pool": {"name": "p", "resourceSliceCount": 1}}, "spec.allNodes",
     "Invalid value: false: must be either unset or set to true"),
    ("node-name-empty", slice_doc, "spec.nodeName", "", "spec.nodeName",
     'Invalid value: "": must be either unset or set to a non-empty string'),
    ("node-selector-one-term", slice_doc, "spec", {"driver": "d.example.com",
     "nodeSelector": {"nodeSelectorTerms": []}, "pool": {"name": "p", "resourceSliceCount": 1}},
     "spec.nodeSelector.nodeSelectorTerms", "Invalid value: 0: must have exactly one node selector term"),
    ("node-selector-operator", slice_doc, "spec", {"driver": "d.example.com", "nodeSelector": {
     "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]},
     "pool": {"name": "p", "resourceSliceCount": 1}},
     "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
     'Invalid value: "Near": not a valid selector operator'),
    ("node-selector-value", slice_doc, "spec", {"driver": "d.example.com", "nodeSelector": {
     "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a b"]}]}]},
     "pool": {"name": "p", "resourceSliceCount": 1}},
     "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]",
     "Invalid value: \"a b\": a valid label value must be empty or at most 63 alphanumeric "
     "characters, '-', '_' or '.', starting and ending with an alphanumeric character"),
    ("devices-and-counters", slice_doc, "spec.sharedCounters",
     [{"name": "c", "counters": {"memory": {"value": "1"}}}], "spec",
     'Invalid value: "": only one of `sharedCounters` or `devices` is allowed'),
    ("too-many-devices", slice_doc, "spec.devices", devices(129), "spec.devices",
     "Too many: 129: must have at most 128 items"),
    ("too-many-devices-with-taints", slice_doc, "spec.devices",
     devices(65, taints=[{"key": "k", "effect": "NoSchedule"}]), "spec.devices",
     "Too many: 65: must have at most 64 items"),
    ("duplicate-device", slice_doc, "spec.devices", devices(1) + devices(1), "spec.devices[1]",
     'Duplicate value: "gpu-0"'),
    ("device-name", slice_doc, "spec.devices.0.name", "GPU0", f"{DEV}.name",
     f'Invalid value: "GPU0": {LABEL}'),
    ("attribute-name-identifier", slice_doc, "spec.devices.0.attributes",
     {"product-name": {"string": "x"}}, f"{DEV}.attributes",
     "Invalid value: \"product-name\": the name must be a C identifier: letters, digits and '_', "
     "not starting with a digit (e.g. 'memory')"),
    ("attribute-name-too-long", slice_doc, "spec.devices.0.attributes",
     {"a" * 33: {"int": 1}}, f"{DEV}.attributes",
     f'Invalid value: "{"a" * 33}": the name must be no more than 32 characters'),
    ("attribute-empty-domain", slice_doc, "spec.devices.0.attributes",
     {"/model": {"string": "x"}}, f"{DEV}.attributes",
     'Invalid value: "/model": the domain must not be empty'),
    ("attribute-two-values", slice_doc, "spec.devices.0.attributes",
     {"model": {"string": "x", "int": 1}}, f"{DEV}.attributes[model]",
     'Invalid value: "{int, string}": exactly one value must be specified'),
    ("attribute-no-value", slice_doc, "spec.devices.0.attributes", {"model": {}},
     f"{DEV}.attributes[model]", 'Invalid value: "{}": exactly one value must be specified'),
    ("attribute-string-too-long", slice_doc, "spec.devices.0.attributes",
     {"model": {"string": "x" * 65}}, f"{DEV}.attributes[model].string",
     "Too long: may not be more than 64 bytes"),
    ("attribute-bad-version", slice_doc, "spec.devices.0.attributes",
     {"driverVersion": {"version": "550.54"}}, f"{DEV}.attributes[driverVersion].version",
     'Invalid value: "550.54": must be a semantic version (semver 2.0.0)'),
    ("too-many-attributes", slice_doc, "spec.devices.0.attributes", attrs(32), DEV,
     "Invalid value: 33: the total number of attributes and capacities must not exceed 32"),
    ("capacity-name", slice_doc, "spec.devices.0.capacity", {"9mem": {"value": "1Gi"}},
     f"{DEV}.capacity", "Invalid value: \"9mem\": the name must be a C identifier: letters, "
     "digits and '_', not starting with a digit (e.g. 'memory')"),
    ("request-policy-needs-multi", shared_device_slice_doc,
     "spec.devices.0.allowMultipleAllocations", DELETE, f"{DEV}.capacity[memory].requestPolicy",
     "Forbidden: allowMultipleAllocations must be true"),
    ("request-policy-both", shared_device_slice_doc,
     "spec.devices.0.capacity.memory.requestPolicy.validValues", ["10Gi"],
     f"{DEV}.capacity[memory].requestPolicy", 'Forbidden: exactly one policy can be specified, '
     'cannot specify "validValues" and "validRange" at the same time'),
    ("request-policy-default-required", shared_device_slice_doc,
     "spec.devices.0.capacity.memory.requestPolicy.default", DELETE,
     f"{DEV}.capacity[memory].requestPolicy.default",
     "Required value: required when validRange is defined"),
    ("request-policy-min-over-capacity", shared_device_slice_doc,
     "spec.devices.0.capacity.memory.requestPolicy", {"default": "100Gi",
     "validRange": {"min": "100Gi"}}, f"{DEV}.capacity[memory].requestPolicy.validRange.min",
     'Invalid value: "100Gi": min is larger than capacity value: 80Gi'),
    ("request-policy-step-multiple", shared_device_slice_doc,
     "spec.devices.0.capacity.memory.requestPolicy.default", "15Gi",
     f"{DEV}.capacity[memory].requestPolicy.validRange.step",
     'Invalid value: "15Gi": value is not a multiple of a given step (10Gi) from (10Gi)'),
    ("valid-values-sorted", shared_device_slice_doc,
     "spec.devices.0.capacity.memory.requestPolicy", {"default": "20Gi",
     "validValues": ["20Gi", "10Gi"]}, f"{DEV}.capacity[memory].requestPolicy.validValues[1]",
     'Invalid value: "10Gi": values must be sorted in ascending order'),
    ("valid-values-default", shared_device_slice_doc,
     "spec.devices.0.capacity.memory.requestPolicy", {"default": "30Gi",
     "validValues": ["10Gi", "20Gi"]}, f"{DEV}.capacity[memory].requestPolicy.validValues",
     'Invalid value: "30Gi": default value is not valid according to the requestPolicy'),
    ("too-many-consumptions", slice_doc, "spec.devices.0.consumesCounters",
     [{"counterSet": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(3)],
     f"{DEV}.consumesCounters", "Too many: 3: must have at most 2 items"),
    ("consumption-counters-required", slice_doc, "spec.devices.0.consumesCounters",
     [{"counterSet": "s0", "counters": {}}], f"{DEV}.consumesCounters[0].counters", "Required value"),
    ("per-device-node-without-flag", slice_doc, "spec.devices.0.nodeName", "node-1", DEV,
     'Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` can only be set if '
     "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"),
    ("taint-effect", slice_doc, "spec.devices.0.taints", [{"key": "k", "effect": "Evict"}],
     f"{DEV}.taints[0].effect",
     'Unsupported value: "Evict": supported values: "NoExecute", "NoSchedule", "None"'),
    ("taint-effect-required", slice_doc, "spec.devices.0.taints", [{"key": "k"}],
     f"{DEV}.taints[0].effect", "Required value"),
    ("binding-conditions-pair", slice_doc, "spec.devices.0.bindingConditions", ["ready"],
     f"{DEV}.bindingFailureConditions",
     "Invalid value: []: bindingFailureConditions are required to use bindingConditions"),
    ("binding-conditions-too-many", slice_doc, "spec.devices.0.bindingConditions",
     ["a", "b", "c", "d", "e"], f"{DEV}.bindingConditions", "Too many: 5: must have at most 4 items"),
    ("counter-set-duplicate", counters_slice_doc, "spec.sharedCounters",
     [{"name": "c", "counters": {"m": {"value": "1"}}}] * 2, "spec.sharedCounters[1]",
     'Duplicate value: "c"'),
    ("counter-name", counters_slice_doc, "spec.sharedCounters.0.counters",
     {"Memory": {"value": "1"}}, "spec.sharedCounters[0].counters",
     f'Invalid value: "Memory": {LABEL}'),
    ("too-many-counter-sets", counters_slice_doc, "spec.sharedCounters",
     [{"name": f"c{i}", "counters": {"m": {"value": "1"}}} for i in range(9)],
     "spec.sharedCounters", "Too many: 9: must have at most 8 items"),
    # --- DeviceClass
    ("class-selector-cel-required", class_doc, "spec.selectors", [{}], "spec.selectors[0].cel",
     "Required value"),
    ("class-expression-required", class_doc, "spec.selectors", [{"cel": {"expression": ""}}],
     "spec.selectors[0].cel.expression", "Required value"),
    ("class-expression-too-long", class_doc, "spec.selectors",
     [{"cel": {"expression": "true || " * 1300 + "true"}}], "spec.selectors[0].cel.expression",
     "Too long: may not be more than 10240 bytes"),
    ("class-too-many-selectors", class_doc, "spec.selectors",
     [{"cel": {"expression": "true"}}] * 33, "spec.selectors", "Too many: 33: must have at most 32 items"),
    ("class-config-parameters-object", class_doc, "spec.config.0.opaque.parameters", [1, 2],
     "spec.config[0].opaque.parameters",
     'Invalid value: "<value omitted>": parameters must be a valid JSON object'),
    ("class-config-driver", class_doc, "spec.config.0.opaque.driver", "Bad_Driver",
     "spec.config[0].opaque.driver", f'Invalid value: "Bad_Driver": {SUBDOMAIN}'),
    ("class-extended-resource", class_doc, "spec.extendedResourceName", "gpu",
     "spec.extendedResourceName",
     "Invalid value: \"gpu\": a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
    ("class-extended-resource-kubernetes-io", class_doc, "spec.extendedResourceName",
     "deviceclass.resource.kubernetes.io/gpu", "spec.extendedResourceName",
     'Invalid value: "deviceclass.resource.kubernetes.io/gpu": must not have "kubernetes.io/" domain'),
    # --- ResourceClaim
    ("too-many-requests", claim_doc, "spec.devices.requests",
     [{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)],
     REQ, "Too many: 33: must have at most 32 items"),
    ("duplicate-request", claim_doc, "spec.devices.requests.1.name", "gpu", f"{REQ}[1]",
     'Duplicate value: "gpu"'),
    ("request-name", claim_doc, "spec.devices.requests.0.name", "GPU", f"{REQ}[0].name",
     f'Invalid value: "GPU": {LABEL}'),
    ("request-neither", claim_doc, "spec.devices.requests.0.exactly", DELETE, f"{REQ}[0]",
     "Required value: exactly one of `exactly` or `firstAvailable` is required"),
    ("request-both", claim_doc, "spec.devices.requests.0.firstAvailable",
     [{"name": "a", "deviceClassName": "c"}], f"{REQ}[0]",
     "Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but "
     "multiple fields are set"),
    ("class-name-required", claim_doc, "spec.devices.requests.0.exactly.deviceClassName", DELETE,
     f"{REQ}[0].exactly.deviceClassName", "Required value"),
    ("count-with-all", claim_doc, "spec.devices.requests.0.exactly.allocationMode", "All",
     f"{REQ}[0].exactly.count", "Invalid value: 2: must not be specified when allocationMode is 'All'"),
    ("allocation-mode", claim_doc, "spec.devices.requests.0.exactly.allocationMode", "Some",
     f"{REQ}[0].exactly.allocationMode",
     'Unsupported value: "Some": supported values: "All", "ExactCount"'),
    ("too-many-subrequests", claim_doc, "spec.devices.requests.1.firstAvailable",
     [{"name": f"s{i}", "deviceClassName": "c"} for i in range(9)], f"{REQ}[1].firstAvailable",
     "Too many: 9: must have at most 8 items"),
    ("duplicate-subrequest", claim_doc, "spec.devices.requests.1.firstAvailable.1.name", "rdma",
     f"{REQ}[1].firstAvailable[1]", 'Duplicate value: "rdma"'),
    ("toleration-exists-value", claim_doc, "spec.devices.requests.0.exactly.tolerations",
     [{"key": "k", "operator": "Exists", "value": "v"}], f"{REQ}[0].exactly.tolerations[0].value",
     'Invalid value: "v": must be empty for operator `Exists`'),
    ("toleration-operator", claim_doc, "spec.devices.requests.0.exactly.tolerations",
     [{"key": "k", "operator": "In"}], f"{REQ}[0].exactly.tolerations[0].operator",
     'Unsupported value: "In": supported values: "Equal", "Exists"'),
    ("constraint-unknown-request", claim_doc, "spec.devices.constraints.0.requests", ["gpu", "tpu"],
     "spec.devices.constraints[0].requests[1]", f'Invalid value: "tpu": {REF}'),
    ("constraint-not-qualified", claim_doc, "spec.devices.constraints.0.matchAttribute", "numa",
     "spec.devices.constraints[0].matchAttribute",
     'Invalid value: "numa": a fully qualified name must be a domain and a name separated by a slash'),
    ("constraint-neither", claim_doc, "spec.devices.constraints.0.matchAttribute", DELETE,
     "spec.devices.constraints[0]",
     'Required value: exactly one of "matchAttribute" or "distinctAttribute" is required'),
    ("config-unknown-request", claim_doc, "spec.devices.config.0.requests", ["nic/ib"],
     "spec.devices.config[0].requests[0]", f'Invalid value: "nic/ib": {REF}'),
    ("config-opaque-required", claim_doc, "spec.devices.config.0.opaque", DELETE,
     "spec.devices.config[0].opaque",
     "Required value: exactly one configuration type (opaque) is required"),
    ("reserved-without-allocation", allocated_claim_doc, "status.allocation", DELETE,
     "status.reservedFor", "Forbidden: may not be specified when `allocated` is not set"),
    ("reserved-too-many", allocated_claim_doc, "status.reservedFor",
     [{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(257)],
     "status.reservedFor", "Too many: 257: must have at most 256 items"),
    ("reserved-duplicate-uid", allocated_claim_doc, "status.reservedFor",
     [{"resource": "pods", "name": "a", "uid": "u"}, {"resource": "pods", "name": "b", "uid": "u"}],
     "status.reservedFor[1]", 'Duplicate value: "u"'),
    ("result-request", allocated_claim_doc, "status.allocation.devices.results.0.request", "tpu",
     "status.allocation.devices.results[0].request", f'Invalid value: "tpu": {REF}'),
    ("result-share-id", allocated_claim_doc, "status.allocation.devices.results.0.shareID", "X",
     "status.allocation.devices.results[0].shareID",
     'Invalid value: "X": must be a lower-case RFC 4122 UUID'),
    ("device-status-not-allocated", allocated_claim_doc, "status.devices",
     [{"driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-7"}], "status.devices[0]",
     'Invalid value: "gpu.nvidia.com/node-1/gpu-7": must be an allocated device in the claim'),
    # --- ResourceClaimTemplate
    ("template-metadata-name", template_doc, "spec.metadata.name", "x", "spec.metadata.name",
     "Forbidden: cannot be set"),
    ("template-spec-path", template_doc, "spec.spec.devices.requests.0.exactly.count", -1,
     "spec.spec.devices.requests[0].exactly.count", "Invalid value: -1: must be greater than zero"),
    # --- DeviceTaintRule
    ("taint-rule-key", taint_rule_doc, "spec.taint.key", "", "spec.taint.key", "Required value"),
    ("taint-rule-effect", taint_rule_doc, "spec.taint.effect", "PreferNoSchedule",
     "spec.taint.effect",
     'Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"'),
    ("taint-rule-device", taint_rule_doc, "spec.deviceSelector.device", "GPU 0",
     "spec.deviceSelector.device", f'Invalid value: "GPU 0": {LABEL}'),
    # --- Pod
    ("pod-claim-source", pod_doc, "spec.resourceClaims.0.resourceClaimName", "c",
     "spec.resourceClaims[0]", 'Invalid value: "gpus": at most one of `resourceClaimName` or '
     "`resourceClaimTemplateName` may be specified"),
    ("pod-container-claim-ref", pod_doc, "spec.containers.0.resources.claims.0.name", "tpus",
     "spec.containers[0].resources.claims[0]",
     "Not found: 'tpus': must be one of the names in pod.spec.resourceClaims"),
    ("pod-containers-required", pod_doc, "spec.containers", [], "spec.containers", "Required value"),
    # --- found by the differential against kube-apiserver (tests/e2e/test_validation_differential.py)
    ("finalizer-not-qualified", claim_doc, "metadata.finalizers", ["app"], "metadata.finalizers[0]",
     'Invalid value: "app": name is neither a standard finalizer name nor is it fully qualified'),
    ("generate-name-slash", taint_rule_doc, "metadata.generateName", "x/-", "metadata.generateName",
     "Invalid value: \"x/-\": may not contain '/'"),
    ("owner-reference-event", claim_doc, "metadata.ownerReferences",
     [{"apiVersion": "/v1", "kind": "Event", "name": "e", "uid": "u"}], "metadata.ownerReferences[0]",
     'Invalid value: "e": /v1, Kind=Event is disallowed from being an owner'),
    ("status-condition-duplicate", allocated_claim_doc, "status.devices",
     [{"driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0", "conditions": [CONDITION] * 2}],
     "status.devices[0].conditions[1]", 'Duplicate value: "Ready"'),
    ("status-conditions-too-many", allocated_claim_doc, "status.devices",
     [{"driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0",
       "conditions": [{**CONDITION, "type": f"T{i}"} for i in range(9)]}],
     "status.devices[0].conditions", "Too many: 9: must have at most 8 items"),
    ("result-share-id-empty", allocated_claim_doc, "status.allocation.devices.results.0.shareID", "",
     "status.allocation.devices.results[0].shareID", 'Invalid value: "": must be a lower-case RFC 4122 UUID'),
    ("pod-claim-ref-repeated", pod_doc, "spec.containers.0.resources.claims",
     [{"name": "gpus"}, {"name": "gpus", "request": "a b"}], "spec.containers[0].resources.claims[1]",
     'Duplicate value: "gpus"'),
    ("request-both-subrequest-class", claim_doc, "spec.devices.requests.0.firstAvailable",
     [{"name": "a", "deviceClassName": "A/b"}], f"{REQ}[0].firstAvailable[0].deviceClassName",
     f'Invalid value: "A/b": {SUBDOMAIN}'),
    ("too-many-taints-each-effect", slice_doc, "spec.devices.0.taints", [{"key": "k"}] * 17,
     f"{DEV}.taints[16].effect", "Required value"),
    ("attribute-long-key-full-path", slice_doc, "spec.devices.0.attributes", {"x" * 97: {}},
     f"{DEV}.attributes[{'x' * 97}]", 'Invalid value: "{}": exactly one value must be specified'),
    ("attribute-long-key-short-path", slice_doc, "spec.devices.0.attributes", {"x" * 97: {}},
     f"{DEV}.attributes[{'x' * 47}...{'x' * 46}]", 'Invalid value: "{}": exactly one value must be specified'),
    # --- unknown fields
    ("unknown-field", claim_doc, "spec.devices.requests.0.exactly.devicClassName", "x",
     f"{REQ}[0].exactly.devicClassName", f'unknown field "{REQ}[0].exactly.devicClassName"'),
]

# What the API server accepts although it looks wrong: kubedra accepts it too, warning where
# that helps. (id, base, dotted path, new value, warning path or None, warning message)
ACCEPTED: list[tuple[str, Callable[[], dict[str, Any]], str, Any, str | None, str | None]] = [
    ("cluster-scoped-namespace", slice_doc, "metadata.namespace", "default", "metadata.namespace",
     "ResourceSlice is cluster-scoped: the namespace is ignored"),
    ("slice-driver-uppercase", slice_doc, "spec.driver", "GPU.nvidia.com", "spec.driver",
     "driver names should be lowercase; 'GPU.nvidia.com' contains uppercase characters"),
    ("config-driver-uppercase", claim_doc, "spec.devices.config.0.opaque.driver", "GPU.nvidia.com",
     None, None),
    ("attribute-domain-uppercase", slice_doc, "spec.devices.0.attributes",
     {"GPU.nvidia.com/model": {"string": "x"}}, None, None),
    ("attribute-two-slashes", slice_doc, "spec.devices.0.attributes", {"a.com/b/c": {"int": 1}},
     f"{DEV}.attributes", "'a.com/b/c' has more than one '/': the API server accepts it today, "
     "but it is no valid qualified name (`domain/name`) and a later release may refuse it"),
    ("annotation-key-uppercase-prefix", claim_doc, "metadata.annotations", {"Example.COM/x": "1"},
     None, None),
    ("count-zero-is-unset", claim_doc, "spec.devices.requests.0.exactly.count", 0, None, None),
    ("count-zero-with-all", claim_doc, "spec.devices.requests.0.exactly",
     {"deviceClassName": "c", "allocationMode": "All", "count": 0}, None, None),
    ("toleration-empty-key-equal", claim_doc, "spec.devices.requests.0.exactly.tolerations",
     [{"operator": "Equal", "value": "v"}], None, None),
    ("toleration-seconds-not-noexecute", claim_doc, "spec.devices.requests.0.exactly.tolerations",
     [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}], None, None),
    ("too-many-tolerations", claim_doc, "spec.devices.requests.0.exactly.tolerations",
     [{"operator": "Exists"}] * 17, f"{REQ}[0].exactly.tolerations",
     "17 tolerations: the API documents at most 16 (not enforced in Kubernetes 1.37; a later "
     "release may refuse more)"),
    ("capacity-request-name", claim_doc, "spec.devices.requests.0.exactly.capacity",
     {"requests": {"gpu.nvidia.com/": "1Gi"}}, f"{REQ}[0].exactly.capacity.requests[gpu.nvidia.com/]",
     "'gpu.nvidia.com/' is no capacity name a device can publish: the name must not be empty"),
    ("constraint-both", claim_doc, "spec.devices.constraints.0.distinctAttribute", "a.com/b",
     "spec.devices.constraints[0]",
     'both "matchAttribute" and "distinctAttribute" are set: only matchAttribute is applied'),
    # found by the differential against kube-apiserver
    ("class-generate-name-unchecked", class_doc, "metadata.generateName", "Not_A_Name", None, None),
    ("result-toleration-operator-defaults", allocated_claim_doc,
     "status.allocation.devices.results.0.tolerations", [{"key": "k"}], None, None),
    ("owner-references-repeated", claim_doc, "metadata.ownerReferences",
     [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}] * 2,
     "metadata.ownerReferences", "duplicate ownerReferences are dropped"),
    ("standard-finalizer", claim_doc, "metadata.finalizers", ["kubernetes", "orphan"], None, None),
]


@pytest.mark.parametrize(("base", "path", "value", "where", "message"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_object(base: Callable[[], dict[str, Any]], path: str, value: Any, where: str,
                        message: str) -> None:
    obj = decode_object(mutate(base(), path, value)).obj
    found = [(p.path, p.message) for p in validate(obj) if p.is_error]
    assert (where, message) in found, found


@pytest.mark.parametrize(("base", "path", "value", "where", "message"),
                         [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_object(base: Callable[[], dict[str, Any]], path: str, value: Any,
                         where: str | None, message: str | None) -> None:
    obj = decode_object(mutate(base(), path, value)).obj
    problems = validate(obj)
    assert [str(p) for p in problems if p.is_error] == []
    warnings = [(p.path, p.message) for p in problems if not p.is_error]
    assert warnings == ([(where, message)] if where else []), warnings


@pytest.mark.parametrize(
    "base", [slice_doc, shared_device_slice_doc, counters_slice_doc, claim_doc, allocated_claim_doc,
             class_doc, template_doc, taint_rule_doc, pod_doc]
)
def test_valid_bases_have_no_errors(base: Callable[[], dict[str, Any]]) -> None:
    assert [str(p) for p in validate(decode_object(base()).obj) if p.is_error] == []


def test_all_problems_of_an_object_are_reported_together() -> None:
    doc = mutate(mutate(claim_doc(), "spec.devices.requests.0.exactly.deviceClassName", "GPU"),
                 "spec.devices.requests.0.exactly.count", -1)
    with pytest.raises(ValidationError) as info:
        check(decode_object(doc).obj)
    paths = [p.path for p in info.value.problems]
    assert paths == [f"{REQ}[0].exactly.deviceClassName", f"{REQ}[0].exactly.count"]
    assert info.value.kind == "ResourceClaim"
    assert info.value.namespace == "default" and info.value.name == "train"


def test_type_errors_name_the_field_path() -> None:
    doc = mutate(slice_doc(), "spec.devices.0.attributes.index", {"int": "zero"})
    with pytest.raises(ValidationError) as info:
        decode_object(doc)
    assert info.value.path == "spec.devices[0].attributes.index.int"
    assert info.value.first.message == "Expected `int | null`, got `str`"


def test_bad_quantity_names_the_map_key() -> None:
    doc = mutate(slice_doc(), "spec.devices.0.capacity", {"memory": {"value": "80 Gi"}})
    with pytest.raises(ValidationError) as info:
        decode_object(doc)
    assert info.value.path == "spec.devices[0].capacity.memory.value"
    assert "quantities must match the regular expression" in info.value.first.message


def test_pod_container_fields_outside_the_model_are_not_reported() -> None:
    obj = decode_object(pod_doc()).obj
    assert [f.path for f in obj.unknown_fields] == [("spec", "containers", 0, "command")]
    assert validate(obj) == []

