"""API-server validation of scheduling.k8s.io/v1beta1 Workload and PodGroup, and of a pod's
`spec.schedulingGroup`, as kube-apiserver 1.37 does it with the gates of
`kubedra.api.gates.GATES`.

Upstream validates these kinds mostly with rules declared on the Go types (unions,
formats, list limits, immutability) and a few handwritten ones (one priority for every
template of a Workload, the metadata, a status entry per group claim). The server runs the
handwritten rules first and reports the declared ones after them; so does this module.
Field paths and wording are the server's: a union with no member is reported at the
union (`spec.schedulingPolicy`), a repeated list key at the repeated item. Fields of gates
that are off are dropped before validating, as the server drops them (with a warning).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.api.codec import plain
from kubedra.api.defaults import with_defaults
from kubedra.api.gates import disabled_fields, without_disabled_fields
from kubedra.api.meta import Model
from kubedra.api.scheduling import (
    HIGHEST_USER_PRIORITY,
    MAX_GROUP_CLAIMS,
    MAX_TEMPLATES,
    MAX_TOPOLOGY_CONSTRAINTS,
    DisruptionMode,
    PodGroup,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    PodGroupStatus,
    PodGroupTemplate,
    TypedLocalObjectReference,
    Workload,
    WorkloadSpec,
)
from kubedra.api.validation import names
from kubedra.api.validation.meta import conditions
from kubedra.api.validation.report import Path, Report

FIELD_IMMUTABLE = "field is immutable"


def _dropped(r: Report, obj: Workload | PodGroup) -> None:
    for path, gate in disabled_fields(obj):
        r.warn(
            path,
            f"dropped: the {gate} feature gate is off in a Kubernetes 1.37 API server (alpha), "
            "which removes this field before storing the object; kubedra drops it too",
        )


# --- Workload -----------------------------------------------------------------------------


def validate_workload(r: Report, wl: Workload) -> None:
    _dropped(r, wl)
    spec = without_disabled_fields(wl).spec
    _one_priority(r, spec)
    if not spec.pod_group_templates and not spec.composite_pod_group_templates:
        r.invalid(
            ("spec",), "", "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"
        )
    elif spec.pod_group_templates and spec.composite_pod_group_templates:
        r.invalid(
            ("spec",),
            "{podGroupTemplates, compositePodGroupTemplates}",
            "must specify exactly one of: `podGroupTemplates`, `compositePodGroupTemplates`",
        )
    if spec.controller_ref is not None:
        _controller_ref(r, ("spec", "controllerRef"), spec.controller_ref)
    path: Path = ("spec", "podGroupTemplates")
    if r.within(path, spec.pod_group_templates, MAX_TEMPLATES):
        _unique_items(r, path, spec.pod_group_templates, "name")
        for i, t in enumerate(spec.pod_group_templates):
            _template(r, (*path, i), t)


def _one_priority(r: Report, spec: WorkloadSpec) -> None:
    """Every template of a Workload has the same priority class and priority (or none):
    groups of one workload are scheduled and preempted at one priority."""
    seen = {(t.priority_class_name or "", t.priority) for t in spec.pod_group_templates}
    if len(seen) > 1:
        r.invalid(("spec",), None, "detected multiple priority configurations")


def _controller_ref(r: Report, path: Path, ref: TypedLocalObjectReference) -> None:
    if ref.api_group:
        r.valid((*path, "apiGroup"), ref.api_group, names.dns_subdomain)
    r.name((*path, "kind"), ref.kind, names.path_segment_name)
    r.name((*path, "name"), ref.name, names.path_segment_name)


def _template(r: Report, path: Path, t: PodGroupTemplate) -> None:
    r.name((*path, "name"), t.name, names.dns_label)
    _group_fields(
        r,
        path,
        t.scheduling_policy,
        t.scheduling_constraints,
        t.resource_claims,
        t.disruption_mode,
        t.priority_class_name,
        t.priority,
        "PodGroupTemplate",
    )


# --- PodGroup -----------------------------------------------------------------------------


def validate_pod_group(r: Report, pg: PodGroup) -> None:
    _dropped(r, pg)
    pg = with_defaults(without_disabled_fields(pg), "")
    spec, sp = pg.spec, ("spec",)
    ref = spec.workload_ref
    if ref is not None:
        r.name((*sp, "workloadRef", "workloadName"), ref.workload_name, names.dns_subdomain)
        r.name((*sp, "workloadRef", "templateName"), ref.template_name, names.dns_label)
    _group_fields(
        r,
        sp,
        spec.scheduling_policy,
        spec.scheduling_constraints,
        spec.resource_claims,
        spec.disruption_mode,
        spec.priority_class_name,
        spec.priority,
        "PodGroupSpec",
    )
    if spec.priority and not spec.priority_class_name:
        r.warn(
            (*sp, "priority"),
            f"{spec.priority}: the API server's Priority admission sets a pod group's priority "
            "from `priorityClassName` (0 without a class) and refuses another value",
        )
    if pg.status is not None:
        _status(r, pg.status, spec.resource_claims)


def _status(r: Report, st: PodGroupStatus, claims: Sequence[PodGroupResourceClaim]) -> None:
    """The status subresource's rules (a create drops the status). The handwritten ones
    (conditions, each entry naming a group claim) look at every entry; the declared ones
    (at most 4, unique names, claim names) stop at a list that is too long."""
    conditions(r, ("status", "conditions"), st.conditions)
    path: Path = ("status", "resourceClaimStatuses")
    known = {c.name for c in claims}
    for i, s in enumerate(st.resource_claim_statuses):
        if s.name not in known:
            r.invalid((*path, i, "name"), s.name, "must match the name of an entry in "
                      "`spec.resourceClaims`")  # fmt: skip
    if not r.within(path, st.resource_claim_statuses, MAX_GROUP_CLAIMS):
        return
    _unique_items(r, path, st.resource_claim_statuses, "name")
    for i, s in enumerate(st.resource_claim_statuses):
        if s.resource_claim_name is not None:
            r.valid((*path, i, "resourceClaimName"), s.resource_claim_name, names.dns_subdomain)


# --- what templates and groups share ------------------------------------------------------


def _group_fields(
    r: Report,
    path: Path,
    policy: PodGroupSchedulingPolicy,
    constraints: PodGroupSchedulingConstraints | None,
    claims: Sequence[PodGroupResourceClaim],
    disruption: DisruptionMode | None,
    priority_class_name: str | None,
    priority: int | None,
    struct: str,
) -> None:
    _policy(r, (*path, "schedulingPolicy"), policy)
    if constraints is not None:
        cp = (*path, "schedulingConstraints", "topology")
        if r.within(cp, constraints.topology, MAX_TOPOLOGY_CONSTRAINTS):
            for i, c in enumerate(constraints.topology):
                r.name((*cp, i, "key"), c.key, names.label_key)
    _claims(r, (*path, "resourceClaims"), claims)
    if disruption is not None:
        _union(r, (*path, "disruptionMode"), {"single": disruption.single, "all": disruption.all})
    if priority_class_name:
        r.valid((*path, "priorityClassName"), priority_class_name, names.dns_subdomain)
    if (
        r.int32((*path, "priority"), priority, struct)
        and priority is not None
        and priority > HIGHEST_USER_PRIORITY
    ):
        r.invalid(
            (*path, "priority"), priority, f"must be less than or equal to {HIGHEST_USER_PRIORITY}"
        )


def _policy(r: Report, path: Path, policy: PodGroupSchedulingPolicy) -> None:
    _union(r, path, {"basic": policy.basic, "gang": policy.gang})
    if policy.gang is None:
        return
    mp = (*path, "gang", "minCount")
    count = policy.gang.min_count
    if not r.int32(mp, count, "GangSchedulingPolicy"):
        return
    if count == 0:
        r.required(mp)  # zero is what an unset minCount decodes to
    elif count < 1:
        r.invalid(mp, count, "must be greater than or equal to 1")


def _claims(r: Report, path: Path, claims: Sequence[PodGroupResourceClaim]) -> None:
    if not r.within(path, claims, MAX_GROUP_CLAIMS):
        return
    _unique_items(r, path, claims, "name")
    for i, c in enumerate(claims):
        cp = (*path, i)
        _union(
            r,
            cp,
            {
                "resourceClaimName": c.resource_claim_name,
                "resourceClaimTemplateName": c.resource_claim_template_name,
            },
        )
        r.name((*cp, "name"), c.name, names.dns_label)
        for field, value in (
            ("resourceClaimName", c.resource_claim_name),
            ("resourceClaimTemplateName", c.resource_claim_template_name),
        ):
            if value is not None:
                r.valid((*cp, field), value, names.dns_subdomain)


def _union(r: Report, path: Path, members: dict[str, object]) -> None:
    """Exactly one member set (upstream's declared unions and their words)."""
    listed = ", ".join(f"`{m}`" for m in members)
    chosen = [m for m, value in members.items() if value is not None]
    if not chosen:
        r.invalid(path, "", f"must specify one of: {listed}")
    elif len(chosen) > 1:
        r.invalid(path, "{" + ", ".join(chosen) + "}", f"must specify exactly one of: {listed}")


def _unique_items(r: Report, path: Path, items: Sequence[Model], key: str) -> None:
    """A list keyed by `key`: each repeat reported at its item, the item as its value."""
    seen: set[object] = set()
    for i, item in enumerate(items):
        value = getattr(item, key)
        if value in seen:
            r.duplicate((*path, i), plain(item))
        seen.add(value)


# --- updates ------------------------------------------------------------------------------


def pod_group_update(r: Report, old: PodGroup, new: PodGroup) -> None:
    """Only `schedulingPolicy.gang.minCount` of a group's spec may change."""
    before = with_defaults(without_disabled_fields(old), "").spec
    after = with_defaults(without_disabled_fields(new), "").spec
    sp: Path = ("spec",)
    if before.workload_ref != after.workload_ref:
        r.invalid((*sp, "workloadRef"), None, FIELD_IMMUTABLE)
    _policy_update(r, (*sp, "schedulingPolicy"), before.scheduling_policy, after.scheduling_policy)
    _fixed_group_fields(r, sp, before, after)


def workload_update(r: Report, old: Workload, new: Workload) -> None:
    """A Workload's templates are fixed in number and names; within each (matched by
    name) only a gang's `minCount` may change; `controllerRef` never changes."""
    before = without_disabled_fields(old).spec
    after = without_disabled_fields(new).spec
    if before.controller_ref != after.controller_ref:
        r.invalid(("spec", "controllerRef"), None, FIELD_IMMUTABLE)
    path: Path = ("spec", "podGroupTemplates")
    old_by_name = {t.name: t for t in before.pod_group_templates}
    new_names = {t.name for t in after.pod_group_templates}
    added = [i for i, t in enumerate(after.pod_group_templates) if t.name not in old_by_name]
    for i in added:
        r.forbidden((*path, i), "item may not be added")
    if old_by_name.keys() - new_names:
        r.forbidden(path, "item may not be removed")
    if added or old_by_name.keys() - new_names:
        return
    for i, t in enumerate(after.pod_group_templates):
        was = old_by_name[t.name]
        if was == t:
            continue
        tp = (*path, i)
        _policy_update(r, (*tp, "schedulingPolicy"), was.scheduling_policy, t.scheduling_policy)
        _fixed_group_fields(r, tp, was, t)


def _policy_update(
    r: Report, path: Path, old: PodGroupSchedulingPolicy, new: PodGroupSchedulingPolicy
) -> None:
    if (old.basic is None) != (new.basic is None):
        r.invalid((*path, "basic"), None, FIELD_IMMUTABLE)
    if old.gang is None and new.gang is not None:
        r.invalid((*path, "gang"), None, "field cannot be set once created")
    elif old.gang is not None and new.gang is None:
        r.invalid((*path, "gang"), None, "field cannot be cleared once set")


def _fixed_group_fields(
    r: Report,
    path: Path,
    old: PodGroupTemplate | PodGroupSpec,
    new: PodGroupTemplate | PodGroupSpec,
) -> None:
    """The fields a template and a group share that never change after creation."""
    for field, attribute in (
        ("schedulingConstraints", "scheduling_constraints"),
        ("resourceClaims", "resource_claims"),
        ("disruptionMode", "disruption_mode"),
        ("priorityClassName", "priority_class_name"),
        ("priority", "priority"),
    ):
        if getattr(old, attribute) != getattr(new, attribute):
            r.invalid((*path, field), None, FIELD_IMMUTABLE)
