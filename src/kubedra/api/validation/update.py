"""The API server's update rules: what an update may not change once an object exists.

The one place these rules live; the embedded store applies them on every `update` (the API
server applies its own). Field paths and wording follow upstream's ValidatePodUpdate,
ValidateResourceClaimUpdate, ValidateResourceClaimTemplateUpdate and
ValidateResourceSliceUpdate, and the update rules scheduling.k8s.io/v1beta1 declares on
Workload and PodGroup (`kubedra.api.validation.scheduling`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kubedra.api.codec import format_path, to_dict
from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate, ResourceSlice
from kubedra.api.scheduling import PodGroup, Workload
from kubedra.api.validation import ref_of
from kubedra.api.validation.report import Path, Report, show
from kubedra.api.validation.scheduling import pod_group_update, workload_update
from kubedra.errors import Problem, ValidationError, errors_only

FIELD_IMMUTABLE = "field is immutable"
MAX_INT32 = 2**31 - 1

# Upstream's list of the pod spec fields an update may change (its message names them).
UPDATABLE_POD_SPEC_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)


def validate_update(old: KubeObject, new: KubeObject) -> list[Problem]:
    """Every rule `new` breaks by replacing `old` (the same object, as stored)."""
    r = Report(ref_of(new))
    rule = _RULES.get(type(new))
    if rule is not None and type(old) is type(new):
        rule(r, old, new)
    return r.problems


def check_update(old: KubeObject, new: KubeObject) -> None:
    """Raise ValidationError when the update breaks a rule."""
    errors = errors_only(validate_update(old, new))
    if errors:
        raise ValidationError(errors)


# --- Pod ------------------------------------------------------------------------------------


def _pod(r: Report, old: Pod, new: Pod) -> None:
    """A pod's spec is fixed at creation but for the fields upstream lets an update touch;
    `spec.nodeName` is not one of them: only the binding subresource (`Store.bind`) sets it."""
    if new.spec == old.spec and _spec_extras(old) == _spec_extras(new):
        return  # unchanged: the common case (status and metadata writes), checked cheaply
    before, after = to_dict(old).get("spec", {}), to_dict(new).get("spec", {})
    for group in ("containers", "initContainers"):
        if len(before.get(group, [])) != len(after.get(group, [])):
            r.forbidden(("spec", group), "pod updates may not add or remove containers")
            return
    _active_deadline(r, before.get("activeDeadlineSeconds"), after.get("activeDeadlineSeconds"))
    _only_added_tolerations(r, before.get("tolerations", []), after.get("tolerations", []))
    _only_deleted_gates(r, before.get("schedulingGates", []), after.get("schedulingGates", []))
    changes = _differences(before, _without_updatable(before, after), ("spec",))
    if changes:
        allowed = ",".join(UPDATABLE_POD_SPEC_FIELDS)
        r.forbidden(
            ("spec",),
            f"pod updates may not change fields other than {allowed}\n" + "\n".join(changes),
        )


def _without_updatable(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """`after` with the fields an update may change put back as they were (upstream's
    "munged" spec): what remains different is forbidden."""
    munged = copy.deepcopy(after)
    for group in ("containers", "initContainers"):
        for container, was in zip(munged.get(group, []), before.get(group, []), strict=True):
            _put(container, "image", was.get("image"))
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        _put(munged, field, before.get(field))
    grace = before.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = grace
    return munged


def _active_deadline(r: Report, old: Any, new: Any) -> None:
    """Upstream allows setting activeDeadlineSeconds, or lowering it; never raising or
    removing it."""
    path = ("spec", "activeDeadlineSeconds")
    if new is None:
        if old is not None:
            r.invalid(path, None, "must not update from a positive integer to nil value")
    elif not 0 <= new <= MAX_INT32:
        r.invalid(path, new, f"must be between 0 and {MAX_INT32}, inclusive")
    elif old is not None and old < new:
        r.invalid(path, new, "must be less than or equal to previous value")


def _only_added_tolerations(r: Report, old: list[Any], new: list[Any]) -> None:
    """Every toleration the pod had must still be there (its tolerationSeconds may change)."""
    kept = [{**t, "tolerationSeconds": None} for t in new]
    if any({**t, "tolerationSeconds": None} not in kept for t in old):
        r.forbidden(
            ("spec", "tolerations"),
            "existing toleration can not be modified except its tolerationSeconds",
        )


def _only_deleted_gates(r: Report, old: list[Any], new: list[Any]) -> None:
    """Scheduling gates can only be removed (the pod then becomes schedulable)."""
    had = {gate.get("name") for gate in old}
    for i, gate in enumerate(new):
        if gate.get("name") not in had:
            r.forbidden(
                ("spec", "schedulingGates", i, "name"),
                f"only deletion is allowed, but found new scheduling gate '{gate.get('name')}'",
            )


def _spec_extras(obj: KubeObject) -> tuple[Any, ...]:
    """The kept fields under `spec` that the model does not know (part of the spec too)."""
    return tuple(f for f in obj.unknown_fields if f.path[:1] == ("spec",))


def _differences(before: Any, after: Any, path: Path) -> list[str]:
    """`  path: old -> new` for each leaf that differs (upstream prints a struct diff)."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted(before.keys() | after.keys())
        return [d for k in keys for d in _differences(before.get(k), after.get(k), (*path, k))]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        pairs = enumerate(zip(before, after, strict=True))
        return [d for i, (b, a) in pairs for d in _differences(b, a, (*path, i))]
    if before == after:
        return []
    return [f"  {format_path(path)}: {_shown(before)} -> {_shown(after)}"]


def _shown(value: Any) -> str:
    return "(unset)" if value is None else show(value)


def _put(data: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        data.pop(key, None)
    else:
        data[key] = value


# --- resource.k8s.io ------------------------------------------------------------------------


def _immutable_spec(
    r: Report,
    old: ResourceClaim | ResourceClaimTemplate,
    new: ResourceClaim | ResourceClaimTemplate,
) -> None:
    """A claim's (or template's) spec is immutable: what it asks for never changes while
    allocations and pods depend on it; a new request needs a new claim."""
    if old.spec != new.spec or _spec_extras(old) != _spec_extras(new):
        r.invalid(("spec",), to_dict(new).get("spec", {}), FIELD_IMMUTABLE)


def _slice(r: Report, old: ResourceSlice, new: ResourceSlice) -> None:
    """A slice stays in its driver's pool on its node: the scheduler's pool bookkeeping
    relies on driver, pool name and node never moving."""
    for path, was, now in (
        (("spec", "pool", "name"), old.spec.pool.name, new.spec.pool.name),
        (("spec", "driver"), old.spec.driver, new.spec.driver),
        (("spec", "nodeName"), old.spec.node_name, new.spec.node_name),
    ):
        if was != now:
            r.invalid(path, now, FIELD_IMMUTABLE)


_RULES: dict[type[KubeObject], Callable[[Report, Any, Any], None]] = {
    Pod: _pod,
    ResourceClaim: _immutable_spec,
    ResourceClaimTemplate: _immutable_spec,
    ResourceSlice: _slice,
    Workload: workload_update,
    PodGroup: pod_group_update,
}
