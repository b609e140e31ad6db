"""Validation as the API server does it: every problem of an object, with its field path.

`validate(obj)` returns problems (errors and warnings) without file positions; the loader
(`kubedra.api.loader.LoadResult.locate`) places them in their source file and line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubedra.api.codec import format_path
from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup, Workload
from kubedra.api.validation import core, resource, scheduling
from kubedra.api.validation.meta import object_metadata, path_segments
from kubedra.api.validation.report import Report
from kubedra.errors import ObjectRef, Problem, ValidationError, errors_only

_RULES: dict[type[KubeObject], Callable[[Report, Any], None]] = {
    DeviceClass: resource.validate_device_class,
    ResourceSlice: resource.validate_resource_slice,
    ResourceClaim: resource.validate_resource_claim,
    ResourceClaimTemplate: resource.validate_resource_claim_template,
    DeviceTaintRule: resource.validate_device_taint_rule,
    Pod: core.validate_pod,
    Node: core.validate_node,
    Namespace: lambda r, ns: None,
    Workload: scheduling.validate_workload,
    PodGroup: scheduling.validate_pod_group,
}


def ref_of(obj: KubeObject) -> ObjectRef:
    return ObjectRef(obj.KIND, obj.namespace, obj.name or obj.metadata.generate_name or "")


def validate(obj: KubeObject) -> list[Problem]:
    """Every problem of one object (errors and warnings), in field order."""
    r = Report(ref_of(obj))
    object_metadata(r, obj)
    for field in obj.unknown_fields:
        if not field.silent:
            r.add(field.path, f'unknown field "{format_path(field.path)}"')
    _RULES[type(obj)](r, obj)
    if not errors_only(r.problems):
        path_segments(r, obj.metadata)
    return r.problems


def check(obj: KubeObject) -> None:
    """Raise ValidationError when the object has errors (warnings are not errors)."""
    errors = errors_only(validate(obj))
    if errors:
        raise ValidationError(errors)
