"""ObjectMeta as the API server checks it when an object is created (apimachinery's
ValidateObjectMeta), and the metadata of a claim template (ValidateTemplateObjectMeta).

Labels, annotations and finalizers are reported at their map or list (`metadata.labels`),
the key or value named in the message, as upstream reports them.
"""

from __future__ import annotations

from collections.abc import Callable

from kubedra.api.core import Namespace
from kubedra.api.meta import KubeObject, ObjectMeta
from kubedra.api.validation import names
from kubedra.api.validation.report import Path, Report

ANNOTATIONS_MAX_BYTES = 256 * 1024
# The API server makes a name from generateName with 5 random characters, cutting the
# prefix to keep the name within 63 characters.
_GENERATED_SUFFIX = "bbbbb"
_GENERATED_PREFIX_MAX = 63 - len(_GENERATED_SUFFIX)
_ORPHAN, _FOREGROUND = "orphan", "foregroundDeletion"


def object_metadata(r: Report, obj: KubeObject) -> None:
    meta = obj.metadata
    check = names.dns_label if isinstance(obj, Namespace) else names.dns_subdomain
    _names(r, meta, check)
    if obj.NAMESPACED:
        if meta.namespace:
            r.valid(("metadata", "namespace"), meta.namespace, names.dns_label)
    elif meta.namespace:
        # The API server clears it (rest.BeforeCreate) and stores the object.
        r.warn(("metadata", "namespace"), f"{obj.KIND} is cluster-scoped: the namespace is ignored")
    labels_and_annotations(r, ("metadata",), meta)
    _owner_references(r, meta)
    _finalizers(r, meta.finalizers)


def template_metadata(r: Report, path: Path, meta: ObjectMeta) -> None:
    """Only labels and annotations may be set; every other field is refused by its Go name
    (so `uid` is `uID`, as upstream spells it)."""
    labels_and_annotations(r, path, meta)
    for go_name, value in (
        ("name", meta.name),
        ("generateName", meta.generate_name),
        ("namespace", meta.namespace),
        ("uID", meta.uid),
        ("resourceVersion", meta.resource_version),
        ("generation", meta.generation),
        ("creationTimestamp", meta.creation_timestamp),
        ("deletionTimestamp", meta.deletion_timestamp),
        ("deletionGracePeriodSeconds", meta.deletion_grace_period_seconds),
        ("ownerReferences", meta.owner_references),
        ("finalizers", meta.finalizers),
        ("managedFields", meta.managed_fields),
    ):
        if value:
            r.forbidden((*path, go_name), "cannot be set")


def labels_and_annotations(r: Report, path: Path, meta: ObjectMeta) -> None:
    labels = (*path, "labels")
    for key, value in meta.labels.items():
        r.valid(labels, key, names.label_key)
        r.valid(labels, value, names.label_value)
    annotations = (*path, "annotations")
    for key in meta.annotations:
        # Upstream checks annotation keys lower-cased: `Example.COM/x` is a valid key.
        detail = names.label_key(key.lower())
        if detail:
            r.invalid(annotations, key, detail)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in meta.annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        r.too_long(annotations, ANNOTATIONS_MAX_BYTES)


def _names(r: Report, meta: ObjectMeta, check: Callable[[str], str | None]) -> None:
    """name, or generateName and the name the server would make of it."""
    if meta.generate_name:
        r.valid(("metadata", "generateName"), _masked(meta.generate_name), check)
    name = meta.name
    if not name and meta.generate_name:
        name = meta.generate_name[:_GENERATED_PREFIX_MAX] + _GENERATED_SUFFIX
    if not name:
        r.required(("metadata", "name"), "name or generateName is required")
    else:
        r.valid(("metadata", "name"), name, check)


def _masked(prefix: str) -> str:
    """A generateName as upstream checks it: a trailing '-' (and, as upstream's helper
    does, the character before it) replaced by 'a', since a suffix will follow."""
    if len(prefix) > 1 and prefix.endswith("-"):
        return prefix[:-2] + "a"
    return prefix


def _owner_references(r: Report, meta: ObjectMeta) -> None:
    path: Path = ("metadata", "ownerReferences")
    controllers = 0
    for i, ref in enumerate(meta.owner_references):
        version = ref.api_version.split("/")
        if not ref.api_version:
            r.required((*path, i, "apiVersion"), "must not be empty")
        elif len(version) > 2 or not version[-1]:
            r.invalid(
                (*path, i, "apiVersion"), ref.api_version, "must be <group>/<version> or <version>"
            )
        for field, value in (("kind", ref.kind), ("name", ref.name), ("uid", ref.uid)):
            if not value:
                r.required((*path, i, field), "must not be empty")
        if ref.api_version == "v1" and ref.kind == "Event":
            r.invalid((*path, i), ref.name, "/v1, Kind=Event is disallowed from being an owner")
        controllers += ref.controller is True
        if ref.controller is True and controllers > 1:
            r.invalid(path, "<value omitted>", "Only one reference can have Controller set to true")


def _finalizers(r: Report, finalizers: tuple[str, ...]) -> None:
    path: Path = ("metadata", "finalizers")
    for finalizer in finalizers:
        r.valid(path, finalizer, names.label_key)
    if _ORPHAN in finalizers and _FOREGROUND in finalizers:
        r.invalid(
            path, list(finalizers), f"finalizer {_ORPHAN} and {_FOREGROUND} cannot be both set"
        )
