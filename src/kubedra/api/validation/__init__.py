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
from kubedra.api.validation import core, names, resource
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
}

# Kinds whose names are RFC 1123 labels; every other kind uses a subdomain.
_LABEL_NAMED = (Namespace,)


def ref_of(obj: KubeObject) -> ObjectRef:
    return ObjectRef(obj.KIND, obj.namespace, obj.name or obj.metadata.generate_name or "")


def validate(obj: KubeObject) -> list[Problem]:
    """Every problem of one object (errors and warnings), in field order."""
    r = Report(ref_of(obj))
    _metadata(r, obj)
    for field in obj.unknown_fields:
        if not field.silent:
            r.add(field.path, f'unknown field "{format_path(field.path)}"')
    _RULES[type(obj)](r, obj)
    return r.problems


def check(obj: KubeObject) -> None:
    """Raise ValidationError when the object has errors (warnings are not errors)."""
    errors = errors_only(validate(obj))
    if errors:
        raise ValidationError(errors)


def _metadata(r: Report, obj: KubeObject) -> None:
    meta = obj.metadata
    check_name = names.dns_label if isinstance(obj, _LABEL_NAMED) else names.dns_subdomain
    if not meta.name and not meta.generate_name:
        r.required(("metadata", "name"), "name or generateName is required")
    elif meta.name:
        r.name(("metadata", "name"), meta.name, check_name)
    if obj.NAMESPACED:
        if meta.namespace:
            r.name(("metadata", "namespace"), meta.namespace, names.dns_label)
    elif meta.namespace:
        r.forbidden(
            ("metadata", "namespace"), f"{obj.KIND} is cluster-scoped: namespace must be empty"
        )
    for key, value in meta.labels.items():
        r.name(("metadata", "labels", key), key, names.label_key)
        detail = names.label_value(value)
        if detail:
            r.invalid(("metadata", "labels", key), value, detail)
    for key in meta.annotations:
        r.name(("metadata", "annotations", key), key, names.label_key)
