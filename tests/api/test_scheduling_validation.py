"""scheduling.k8s.io/v1beta1 Workload and PodGroup, and a pod's schedulingGroup: kube-apiserver
1.37's validation (GenericWorkload, DRAWorkloadResourceClaims and
TopologyAwareWorkloadScheduling on), one rule per case, with the exact path and message.

Every case here is also sent to a real kube-apiserver with those gates by
tests/e2e/test_scheduling_differential.py (same verdict, same field paths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object, to_dict
from kubedra.api.defaults import with_defaults
from kubedra.api.gates import GATES, WORKLOAD_FEATURE_GATES, without_disabled_fields
from kubedra.api.kinds import api_version_of, resolve_kind
from kubedra.api.scheduling import PodGroup, Workload
from kubedra.api.validation import validate
from kubedra.api.validation.update import validate_update
from kubedra.errors import ValidationError
from tests.api.manifests import DELETE, grouped_pod_doc, mutate, pod_group_doc, workload_doc

LABEL = (
    "must be a lowercase RFC 1123 label: at most 63 lower case alphanumeric characters or '-', "
    "starting and ending with an alphanumeric character (e.g. 'gpu-0')"
)
SUBDOMAIN = (
    "must be a lowercase RFC 1123 subdomain: at most 253 characters, dot-separated labels of "
    "lower case alphanumerics or '-', each starting and ending with an alphanumeric "
    "(e.g. 'gpu.example.com')"
)
LABEL_NAME = (
    "name part must be at most 63 alphanumeric characters, '-', '_' or '.', starting and "
    "ending with an alphanumeric character"
)
T0 = "spec.podGroupTemplates[0]"
TEMPLATES = "spec.podGroupTemplates"
ONE_OF_TEMPLATES = "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"
ONE_OF_POLICY = "must specify one of: `basic`, `gang`"
ONE_OF_CLAIM = "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
MULTIPLE_PRIORITIES = "Invalid value: null: detected multiple priority configurations"
CONDITION = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}


def basic(name: str) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"basic": {}}, "priority": 100}


def claims(n: int) -> list[dict[str, Any]]:
    return [{"name": f"c{i}", "resourceClaimName": f"claim-{i}"} for i in range(n)]


def composite() -> list[dict[str, Any]]:
    return [{"name": "all", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
             "podGroupTemplates": [basic("inner")]}]


# (id, base document, dotted path, new value or DELETE, expected path, message)
CASES: list[tuple[str, Callable[[], dict[str, Any]], str, Any, str, str]] = [
    # --- Workload
    ("wl-name", workload_doc, "metadata.name", "Trainer", "metadata.name",
     f'Invalid value: "Trainer": {SUBDOMAIN}'),
    ("wl-no-templates", workload_doc, "spec.podGroupTemplates", DELETE, "spec",
     f'Invalid value: "": {ONE_OF_TEMPLATES}'),
    ("wl-empty-templates", workload_doc, "spec.podGroupTemplates", [], "spec",
     f'Invalid value: "": {ONE_OF_TEMPLATES}'),
    ("wl-only-composite", workload_doc, "spec", {"compositePodGroupTemplates": composite()}, "spec",
     f'Invalid value: "": {ONE_OF_TEMPLATES}'),
    ("wl-too-many-templates", workload_doc, "spec.podGroupTemplates",
     [basic(f"t{i}") for i in range(9)], TEMPLATES, "Too many: 9: must have at most 8 items"),
    ("wl-template-repeated", workload_doc, "spec.podGroupTemplates.1.name", "workers",
     f"{TEMPLATES}[1]", 'Duplicate value: {"name": "workers", "schedulingPolicy": {"basic": {}}, '
     '"resourceClaims": [{"name": "data", "resourceClaimName": "dataset"}], "disruptionMode": '
     '{"single": {}}, "priority": 100}'),
    ("wl-template-name-required", workload_doc, "spec.podGroupTemplates.0.name", "",
     f"{T0}.name", "Required value"),
    ("wl-template-name", workload_doc, "spec.podGroupTemplates.0.name", "Workers", f"{T0}.name",
     f'Invalid value: "Workers": {LABEL}'),
    ("wl-policy-missing", workload_doc, "spec.podGroupTemplates.0.schedulingPolicy", DELETE,
     f"{T0}.schedulingPolicy", f'Invalid value: "": {ONE_OF_POLICY}'),
    ("wl-policy-both", workload_doc, "spec.podGroupTemplates.0.schedulingPolicy.basic", {},
     f"{T0}.schedulingPolicy",
     'Invalid value: "{basic, gang}": must specify exactly one of: `basic`, `gang`'),
    ("wl-min-count-unset", workload_doc, "spec.podGroupTemplates.0.schedulingPolicy.gang", {},
     f"{T0}.schedulingPolicy.gang.minCount", "Required value"),
    ("wl-min-count-negative", workload_doc,
     "spec.podGroupTemplates.0.schedulingPolicy.gang.minCount", -2,
     f"{T0}.schedulingPolicy.gang.minCount",
     "Invalid value: -2: must be greater than or equal to 1"),
    ("wl-topology-two", workload_doc, "spec.podGroupTemplates.0.schedulingConstraints.topology",
     [{"key": "rack"}, {"key": "zone"}], f"{T0}.schedulingConstraints.topology",
     "Too many: 2: must have at most 1 item"),
    ("wl-topology-key-required", workload_doc,
     "spec.podGroupTemplates.0.schedulingConstraints.topology.0.key", "",
     f"{T0}.schedulingConstraints.topology[0].key", "Required value"),
    ("wl-topology-key", workload_doc,
     "spec.podGroupTemplates.0.schedulingConstraints.topology.0.key", "rack zone",
     f"{T0}.schedulingConstraints.topology[0].key", f'Invalid value: "rack zone": {LABEL_NAME}'),
    ("wl-claims-too-many", workload_doc, "spec.podGroupTemplates.0.resourceClaims", claims(5),
     f"{T0}.resourceClaims", "Too many: 5: must have at most 4 items"),
    ("wl-claim-repeated", workload_doc, "spec.podGroupTemplates.0.resourceClaims.1",
     {"name": "fabric", "resourceClaimName": "other"}, f"{T0}.resourceClaims[1]",
     'Duplicate value: {"name": "fabric", "resourceClaimName": "other"}'),
    ("wl-claim-neither", workload_doc, "spec.podGroupTemplates.0.resourceClaims.0",
     {"name": "fabric"}, f"{T0}.resourceClaims[0]", f'Invalid value: "": {ONE_OF_CLAIM}'),
    ("wl-claim-both", workload_doc,
     "spec.podGroupTemplates.0.resourceClaims.0.resourceClaimName", "fabric",
     f"{T0}.resourceClaims[0]", 'Invalid value: "{resourceClaimName, resourceClaimTemplateName}": '
     "must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`"),
    ("wl-claim-name-required", workload_doc, "spec.podGroupTemplates.0.resourceClaims.0.name", "",
     f"{T0}.resourceClaims[0].name", "Required value"),
    ("wl-claim-name", workload_doc, "spec.podGroupTemplates.0.resourceClaims.0.name", "Fabric",
     f"{T0}.resourceClaims[0].name", f'Invalid value: "Fabric": {LABEL}'),
    ("wl-claim-template-name", workload_doc,
     "spec.podGroupTemplates.0.resourceClaims.0.resourceClaimTemplateName", "fabric_v2",
     f"{T0}.resourceClaims[0].resourceClaimTemplateName", f'Invalid value: "fabric_v2": {SUBDOMAIN}'),
    ("wl-claim-claim-name-empty", workload_doc,
     "spec.podGroupTemplates.1.resourceClaims.0.resourceClaimName", "",
     f"{TEMPLATES}[1].resourceClaims[0].resourceClaimName", f'Invalid value: "": {SUBDOMAIN}'),
    ("wl-disruption-empty", workload_doc, "spec.podGroupTemplates.0.disruptionMode", {},
     f"{T0}.disruptionMode", 'Invalid value: "": must specify one of: `single`, `all`'),
    ("wl-disruption-both", workload_doc, "spec.podGroupTemplates.0.disruptionMode",
     {"single": {}, "all": {}}, f"{T0}.disruptionMode",
     'Invalid value: "{single, all}": must specify exactly one of: `single`, `all`'),
    ("wl-priority-class-name", workload_doc, "spec.podGroupTemplates",
     [{**basic("a"), "priorityClassName": "High"}, {**basic("b"), "priorityClassName": "High"}],
     f"{T0}.priorityClassName", f'Invalid value: "High": {SUBDOMAIN}'),
    ("wl-priority-too-high", workload_doc, "spec.podGroupTemplates",
     [{**basic("a"), "priority": 1_000_000_001}], f"{T0}.priority",
     "Invalid value: 1000000001: must be less than or equal to 1000000000"),
    ("wl-priorities-differ", workload_doc, "spec.podGroupTemplates.1.priority", 5, "spec",
     MULTIPLE_PRIORITIES),
    ("wl-priority-classes-differ", workload_doc, "spec.podGroupTemplates.1.priorityClassName",
     "high", "spec", MULTIPLE_PRIORITIES),
    ("wl-priority-unset-in-one", workload_doc, "spec.podGroupTemplates.1.priority", DELETE, "spec",
     MULTIPLE_PRIORITIES),
    ("wl-controller-kind-required", workload_doc, "spec.controllerRef.kind", "",
     "spec.controllerRef.kind", "Required value"),
    ("wl-controller-name-required", workload_doc, "spec.controllerRef.name", DELETE,
     "spec.controllerRef.name", "Required value"),
    ("wl-controller-kind-slash", workload_doc, "spec.controllerRef.kind", "batch/Job",
     "spec.controllerRef.kind", "Invalid value: \"batch/Job\": may not contain '/'"),
    ("wl-controller-name-dots", workload_doc, "spec.controllerRef.name", "..",
     "spec.controllerRef.name", "Invalid value: \"..\": may not be '..'"),
    ("wl-controller-name-percent", workload_doc, "spec.controllerRef.name", "a%20b",
     "spec.controllerRef.name", "Invalid value: \"a%20b\": may not contain '%'"),
    ("wl-controller-api-group", workload_doc, "spec.controllerRef.apiGroup", "Batch",
     "spec.controllerRef.apiGroup", f'Invalid value: "Batch": {SUBDOMAIN}'),
    ("wl-unknown-field", workload_doc, "spec.podGroupTemplates.0.minCount", 4,
     f"{T0}.minCount", f'unknown field "{T0}.minCount"'),
    # --- PodGroup
    ("pg-name", pod_group_doc, "metadata.name", "trainer_workers", "metadata.name",
     f'Invalid value: "trainer_workers": {SUBDOMAIN}'),
    ("pg-policy-missing", pod_group_doc, "spec.schedulingPolicy", DELETE, "spec.schedulingPolicy",
     f'Invalid value: "": {ONE_OF_POLICY}'),
    ("pg-policy-both", pod_group_doc, "spec.schedulingPolicy.basic", {}, "spec.schedulingPolicy",
     'Invalid value: "{basic, gang}": must specify exactly one of: `basic`, `gang`'),
    ("pg-min-count-zero", pod_group_doc, "spec.schedulingPolicy.gang.minCount", 0,
     "spec.schedulingPolicy.gang.minCount", "Required value"),
    ("pg-min-count-negative", pod_group_doc, "spec.schedulingPolicy.gang.minCount", -1,
     "spec.schedulingPolicy.gang.minCount", "Invalid value: -1: must be greater than or equal to 1"),
    ("pg-workload-ref-empty", pod_group_doc, "spec.workloadRef", {},
     "spec.workloadRef.workloadName", "Required value"),
    ("pg-workload-name", pod_group_doc, "spec.workloadRef.workloadName", "Trainer",
     "spec.workloadRef.workloadName", f'Invalid value: "Trainer": {SUBDOMAIN}'),
    ("pg-template-name", pod_group_doc, "spec.workloadRef.templateName", "workers.v1",
     "spec.workloadRef.templateName", f'Invalid value: "workers.v1": {LABEL}'),
    ("pg-topology-two", pod_group_doc, "spec.schedulingConstraints.topology",
     [{"key": "a"}, {"key": "b"}], "spec.schedulingConstraints.topology",
     "Too many: 2: must have at most 1 item"),
    ("pg-topology-key", pod_group_doc, "spec.schedulingConstraints.topology.0.key", "-rack",
     "spec.schedulingConstraints.topology[0].key", f'Invalid value: "-rack": {LABEL_NAME}'),
    ("pg-topology-key-prefix", pod_group_doc, "spec.schedulingConstraints.topology.0.key",
     "Topology.io/rack", "spec.schedulingConstraints.topology[0].key",
     f'Invalid value: "Topology.io/rack": prefix part {SUBDOMAIN}'),
    ("pg-claims-too-many", pod_group_doc, "spec.resourceClaims", claims(5), "spec.resourceClaims",
     "Too many: 5: must have at most 4 items"),
    ("pg-claim-repeated", pod_group_doc, "spec.resourceClaims.1.name", "fabric",
     "spec.resourceClaims[1]", 'Duplicate value: {"name": "fabric", "resourceClaimName": "dataset"}'),
    ("pg-claim-neither", pod_group_doc, "spec.resourceClaims.1", {"name": "data"},
     "spec.resourceClaims[1]", f'Invalid value: "": {ONE_OF_CLAIM}'),
    ("pg-claim-name", pod_group_doc, "spec.resourceClaims.1.name", "data.set",
     "spec.resourceClaims[1].name", f'Invalid value: "data.set": {LABEL}'),
    ("pg-claim-claim-name", pod_group_doc, "spec.resourceClaims.1.resourceClaimName", "Dataset",
     "spec.resourceClaims[1].resourceClaimName", f'Invalid value: "Dataset": {SUBDOMAIN}'),
    ("pg-disruption-empty", pod_group_doc, "spec.disruptionMode", {}, "spec.disruptionMode",
     'Invalid value: "": must specify one of: `single`, `all`'),
    ("pg-disruption-both", pod_group_doc, "spec.disruptionMode.single", {}, "spec.disruptionMode",
     'Invalid value: "{single, all}": must specify exactly one of: `single`, `all`'),
    ("pg-unknown-field", pod_group_doc, "spec.schedulingPolicy.gang.maxCount", 8,
     "spec.schedulingPolicy.gang.maxCount", 'unknown field "spec.schedulingPolicy.gang.maxCount"'),
    # --- a pod in a group
    ("pod-group-unnamed", grouped_pod_doc, "spec.schedulingGroup", {},
     "spec.schedulingGroup.podGroupName", "Invalid value: null: must specify one of: `podGroupName`"),
    ("pod-group-name", grouped_pod_doc, "spec.schedulingGroup.podGroupName", "Trainer_Workers",
     "spec.schedulingGroup.podGroupName", f'Invalid value: "Trainer_Workers": {SUBDOMAIN}'),
    ("pod-group-name-empty", grouped_pod_doc, "spec.schedulingGroup.podGroupName", "",
     "spec.schedulingGroup.podGroupName", f'Invalid value: "": {SUBDOMAIN}'),
]

# What the API server accepts (with kubedra's gates): kubedra accepts it too, warning where
# it helps. (id, base, dotted path, new value, warning path or None, warning message)
DROPPED = "feature gate is off in a Kubernetes 1.37 API server (alpha), which removes this " \
          "field before storing the object; kubedra drops it too"
ACCEPTED: list[tuple[str, Callable[[], dict[str, Any]], str, Any, str | None, str | None]] = [
    ("wl-without-controller", workload_doc, "spec.controllerRef", DELETE, None, None),
    ("wl-core-controller", workload_doc, "spec.controllerRef.apiGroup", "", None, None),
    ("wl-no-priorities", workload_doc, "spec.podGroupTemplates",
     [{"name": "a", "schedulingPolicy": {"basic": {}}},
      {"name": "b", "schedulingPolicy": {"gang": {"minCount": 1}}}], None, None),
    ("wl-composite-dropped", workload_doc, "spec.compositePodGroupTemplates", composite(),
     "spec.compositePodGroupTemplates", f"dropped: the CompositePodGroup {DROPPED}"),
    ("wl-preemption-dropped", workload_doc, "spec.podGroupTemplates.0.preemptionPolicy", "Never",
     f"{T0}.preemptionPolicy", f"dropped: the PodGroupPreemptionPolicy {DROPPED}"),
    ("wl-invalid-preemption-dropped", workload_doc, "spec.podGroupTemplates.0.preemptionPolicy",
     "Sometimes", f"{T0}.preemptionPolicy", f"dropped: the PodGroupPreemptionPolicy {DROPPED}"),
    ("pg-basic", pod_group_doc, "spec.schedulingPolicy", {"basic": {}}, None, None),
    ("pg-standalone", pod_group_doc, "spec.workloadRef", DELETE, None, None),
    ("pg-no-claims", pod_group_doc, "spec.resourceClaims", DELETE, None, None),
    ("pg-disruption-defaulted", pod_group_doc, "spec.disruptionMode", DELETE, None, None),
    ("pg-priority-zero", pod_group_doc, "spec.priority", 0, None, None),
    ("pg-parent-dropped", pod_group_doc, "spec.parentCompositePodGroupName", "Not A Name",
     "spec.parentCompositePodGroupName", f"dropped: the CompositePodGroup {DROPPED}"),
    ("pg-preemption-dropped", pod_group_doc, "spec.preemptionPolicy", "PreemptLowerPriority",
     "spec.preemptionPolicy", f"dropped: the PodGroupPreemptionPolicy {DROPPED}"),
    ("pg-large-min-count", pod_group_doc, "spec.schedulingPolicy.gang.minCount", 2**31 - 1,
     None, None),
    ("pod-without-group", grouped_pod_doc, "spec.schedulingGroup", DELETE, None, None),
]

# The status subresource of a PodGroup (a create drops the status): (id, status, path,
# message or None for a valid status).
STATUS_CASES: list[tuple[str, dict[str, Any], str | None, str | None]] = [
    ("status-valid", {"conditions": [CONDITION],
                      "resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": "tw-fabric-x1"},
                                                {"name": "data"}]}, None, None),
    ("status-condition-reason", {"conditions": [{**CONDITION, "reason": ""}]},
     "status.conditions[0].reason", "Required value"),
    ("status-condition-repeated", {"conditions": [CONDITION, {**CONDITION, "status": "False"}]},
     "status.conditions[1]", 'Duplicate value: "PodGroupInitiallyScheduled"'),
    ("status-claim-unknown", {"resourceClaimStatuses": [{"name": "scratch", "resourceClaimName": "x"}]},
     "status.resourceClaimStatuses[0].name",
     'Invalid value: "scratch": must match the name of an entry in `spec.resourceClaims`'),
    ("status-claim-name", {"resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": "X"}]},
     "status.resourceClaimStatuses[0].resourceClaimName", f'Invalid value: "X": {SUBDOMAIN}'),
    ("status-claims-repeated", {"resourceClaimStatuses": [{"name": "fabric"}, {"name": "fabric"}]},
     "status.resourceClaimStatuses[1]", 'Duplicate value: {"name": "fabric"}'),
    ("status-claims-too-many", {"resourceClaimStatuses": [{"name": "fabric"}] + [
        {"name": "data"} for _ in range(4)]}, "status.resourceClaimStatuses",
     "Too many: 5: must have at most 4 items"),  # and repeats are not looked for
    ("status-claims-too-many-unknown", {"resourceClaimStatuses": [{"name": "fabric"}, {"name": "data"},
                                                                  {"name": "c0"}, {"name": "c1"},
                                                                  {"name": "c2"}]},
     "status.resourceClaimStatuses[2].name",
     'Invalid value: "c0": must match the name of an entry in `spec.resourceClaims`'),
]

# Updates of a stored object: (id, base, dotted path, new value or DELETE, path, message or
# None where the update is allowed).
IMMUTABLE = "Invalid value: null: field is immutable"
UPDATES: list[tuple[str, Callable[[], dict[str, Any]], str, Any, str | None, str | None]] = [
    ("pg-min-count-grows", pod_group_doc, "spec.schedulingPolicy.gang.minCount", 8, None, None),
    ("pg-labels", pod_group_doc, "metadata.labels", {"team": "a"}, None, None),
    ("pg-gang-to-basic", pod_group_doc, "spec.schedulingPolicy", {"basic": {}},
     "spec.schedulingPolicy.gang", "Invalid value: null: field cannot be cleared once set"),
    ("pg-workload-ref", pod_group_doc, "spec.workloadRef.templateName", "driver",
     "spec.workloadRef", IMMUTABLE),
    ("pg-topology", pod_group_doc, "spec.schedulingConstraints.topology.0.key", "zone",
     "spec.schedulingConstraints", IMMUTABLE),
    ("pg-claims", pod_group_doc, "spec.resourceClaims.1", DELETE, "spec.resourceClaims",
     IMMUTABLE),
    ("pg-disruption", pod_group_doc, "spec.disruptionMode", {"single": {}},
     "spec.disruptionMode", IMMUTABLE),
    ("pg-disruption-unset", pod_group_doc, "spec.disruptionMode", DELETE,
     "spec.disruptionMode", IMMUTABLE),
    ("pg-priority", pod_group_doc, "spec.priority", 7, "spec.priority", IMMUTABLE),
    ("wl-min-count-grows", workload_doc, "spec.podGroupTemplates.0.schedulingPolicy.gang.minCount",
     16, None, None),
    ("wl-templates-reordered", workload_doc, "spec.podGroupTemplates",
     list(reversed(workload_doc()["spec"]["podGroupTemplates"])), None, None),
    ("wl-template-added", workload_doc, "spec.podGroupTemplates.2", basic("extra"),
     f"{TEMPLATES}[2]", "Forbidden: item may not be added"),
    ("wl-template-removed", workload_doc, "spec.podGroupTemplates.1", DELETE, TEMPLATES,
     "Forbidden: item may not be removed"),
    ("wl-basic-to-gang", workload_doc, "spec.podGroupTemplates.1.schedulingPolicy",
     {"gang": {"minCount": 2}}, f"{TEMPLATES}[1].schedulingPolicy.basic", IMMUTABLE),
    ("wl-template-claims", workload_doc, "spec.podGroupTemplates.0.resourceClaims", DELETE,
     f"{T0}.resourceClaims", IMMUTABLE),
    ("wl-template-priority", workload_doc, "spec.podGroupTemplates.0.priority", 5,
     f"{T0}.priority", IMMUTABLE),
    ("wl-controller-ref", workload_doc, "spec.controllerRef.name", "other",
     "spec.controllerRef", IMMUTABLE),
    ("wl-controller-ref-removed", workload_doc, "spec.controllerRef", DELETE,
     "spec.controllerRef", IMMUTABLE),
    ("pod-group-changed", grouped_pod_doc, "spec.schedulingGroup.podGroupName", "other",
     "spec", None),  # the pod's generic rule: only a few spec fields may change
]


def errors(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in validate(decode_object(doc).obj) if p.is_error]


@pytest.mark.parametrize(("base", "path", "value", "where", "message"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_object(base: Callable[[], dict[str, Any]], path: str, value: Any, where: str,
                        message: str) -> None:
    found = errors(mutate(base(), path, value))
    assert (where, message) in found, found


@pytest.mark.parametrize(("base", "path", "value", "where", "message"),
                         [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_object(base: Callable[[], dict[str, Any]], path: str, value: Any,
                         where: str | None, message: str | None) -> None:
    problems = validate(decode_object(mutate(base(), path, value)).obj)
    assert [str(p) for p in problems if p.is_error] == []
    warnings = [(p.path, p.message) for p in problems if not p.is_error]
    assert warnings == ([(where, message)] if where else []), warnings


@pytest.mark.parametrize("base", [workload_doc, pod_group_doc, grouped_pod_doc])
def test_valid_bases(base: Callable[[], dict[str, Any]]) -> None:
    assert validate(decode_object(base()).obj) == []


@pytest.mark.parametrize(("status", "where", "message"), [c[1:] for c in STATUS_CASES],
                         ids=[c[0] for c in STATUS_CASES])
def test_pod_group_status(status: dict[str, Any], where: str | None, message: str | None) -> None:
    found = errors({**pod_group_doc(), "status": status})
    assert (where, message) in found if where else found == [], found


def update_errors(base: dict[str, Any], path: str, value: Any) -> list[tuple[str, str]]:
    old, new = (decode_object(d).obj for d in (base, mutate(base, path, value)))
    problems = validate(new) + validate_update(old, new)
    return [(p.path, p.message) for p in problems if p.is_error]


@pytest.mark.parametrize(("base", "path", "value", "where", "message"),
                         [c[1:] for c in UPDATES], ids=[c[0] for c in UPDATES])
def test_update(base: Callable[[], dict[str, Any]], path: str, value: Any, where: str | None,
                message: str | None) -> None:
    found = update_errors(base(), path, value)
    if where is None:
        assert found == []
    elif message is None:
        assert [p for p, _ in found] == [where], found
    else:
        assert (where, message) in found, found


def test_a_gang_cannot_be_switched_to_basic_either_way() -> None:
    found = update_errors(pod_group_doc(), "spec.schedulingPolicy", {"basic": {}})
    assert [p for p, _ in found] == ["spec.schedulingPolicy.basic", "spec.schedulingPolicy.gang"]
    back = update_errors(mutate(pod_group_doc(), "spec.schedulingPolicy", {"basic": {}}),
                         "spec.schedulingPolicy", {"gang": {"minCount": 2}})
    assert back == [("spec.schedulingPolicy.basic", IMMUTABLE),
                    ("spec.schedulingPolicy.gang",
                     "Invalid value: null: field cannot be set once created")]


def test_renaming_a_template_is_an_addition_and_a_removal() -> None:
    found = update_errors(workload_doc(), "spec.podGroupTemplates.1.name", "coordinator")
    assert found == [(f"{TEMPLATES}[1]", "Forbidden: item may not be added"),
                     (TEMPLATES, "Forbidden: item may not be removed")]


# --- models, defaults, kinds -------------------------------------------------------------


def test_kinds_are_registered_with_their_version() -> None:
    assert resolve_kind("podgroups") is PodGroup and resolve_kind("pg") is PodGroup
    assert resolve_kind("Workload") is Workload and resolve_kind("workloads") is Workload
    assert api_version_of(PodGroup) == api_version_of(Workload) == "scheduling.k8s.io/v1beta1"


def test_other_versions_are_refused_by_name() -> None:
    doc = {**pod_group_doc(), "apiVersion": "scheduling.k8s.io/v1alpha3"}
    with pytest.raises(ValidationError, match=r"PodGroup is served as scheduling\.k8s\.io/v1beta1"):
        decode_object(doc)


def test_manifests_round_trip_verbatim() -> None:
    for doc in (workload_doc(), pod_group_doc(), grouped_pod_doc(),
                mutate(workload_doc(), "spec.compositePodGroupTemplates", composite())):
        obj = decode_object(doc).obj
        assert not [f for f in obj.unknown_fields if not f.silent]
        again = to_dict(obj)
        again.get("spec", {}).pop("containers", None)
        doc.get("spec", {}).pop("containers", None)
        assert again == doc


def test_pod_group_defaults_to_single_disruption() -> None:
    obj = decode_object(mutate(pod_group_doc(), "spec.disruptionMode", DELETE)).obj
    assert to_dict(with_defaults(obj, ""))["spec"]["disruptionMode"] == {"single": {}}
    kept = decode_object(pod_group_doc()).obj
    assert with_defaults(kept, "") == kept  # a mode given is kept; templates get no default
    wl = decode_object(mutate(workload_doc(), "spec.podGroupTemplates.0.disruptionMode", DELETE)).obj
    assert with_defaults(wl, "") == wl


def test_gated_off_fields_are_dropped() -> None:
    assert not GATES["CompositePodGroup"] and not GATES["PodGroupPreemptionPolicy"]
    assert WORKLOAD_FEATURE_GATES == (
        "GenericWorkload=true,DRAWorkloadResourceClaims=true,TopologyAwareWorkloadScheduling=true")
    wl = decode_object(mutate(mutate(workload_doc(), "spec.compositePodGroupTemplates", composite()),
                              "spec.podGroupTemplates.0.preemptionPolicy", "Never")).obj
    assert without_disabled_fields(wl) == decode_object(workload_doc()).obj
    pg = decode_object(mutate(pod_group_doc(), "spec.preemptionPolicy", "Never")).obj
    assert without_disabled_fields(pg) == decode_object(pod_group_doc()).obj
    plain = decode_object(pod_group_doc()).obj
    assert without_disabled_fields(plain) is plain


def test_empty_policy_structs_are_written_as_empty_objects() -> None:
    obj = decode_object(mutate(pod_group_doc(), "spec.schedulingPolicy", {"basic": {}})).obj
    assert isinstance(obj, PodGroup) and obj.spec.scheduling_policy.basic is not None
    assert to_dict(obj)["spec"]["schedulingPolicy"] == {"basic": {}}
    assert msgspec.json.encode(obj.spec.scheduling_policy) == b'{"basic":{}}'
