"""ObjectMeta as the API server checks it when an object is created (apimachinery's
ValidateObjectMeta), and the metadata of a claim template (ValidateTemplateObjectMeta).

Labels, annotations and finalizers are reported at their map or list (`metadata.labels`),
the key or value named in the message, as upstream reports them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from kubedra.api.core import Namespace
from kubedra.api.meta import KubeObject, ObjectMeta, OwnerReference
from kubedra.api.resource import Condition, DeviceClass
from kubedra.api.validation import names
from kubedra.api.validation.report import Path, Report

ANNOTATIONS_MAX_BYTES = 256 * 1024
# The API server makes a name from generateName with 5 random characters, cutting the
# prefix to keep the name within 63 characters.
_GENERATED_SUFFIX = "bbbbb"
_GENERATED_PREFIX_MAX = 63 - len(_GENERATED_SUFFIX)
_ORPHAN, _FOREGROUND = "orphan", "foregroundDeletion"
_STANDARD_FINALIZERS = ("kubernetes", _ORPHAN, _FOREGROUND)


def object_metadata(r: Report, obj: KubeObject) -> None:
    meta = obj.metadata
    check = names.dns_label if isinstance(obj, Namespace) else names.dns_subdomain
    # DeviceClass's metadata rule checks the (generated) name only, not generateName.
    _names(r, meta, check, generate_name=not isinstance(obj, DeviceClass))
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


def _names(
    r: Report, meta: ObjectMeta, check: Callable[[str], str | None], generate_name: bool
) -> None:
    """name, or generateName and the name the server would make of it."""
    if meta.generate_name and generate_name:
        r.valid(("metadata", "generateName"), _masked(meta.generate_name), check)
    name = meta.name
    if not name and meta.generate_name:
        name = meta.generate_name[:_GENERATED_PREFIX_MAX] + _GENERATED_SUFFIX
    if not name:
        r.required(("metadata", "name"), "name or generateName is required")
    else:
        r.valid(("metadata", "name"), name, check)


def path_segments(r: Report, meta: ObjectMeta) -> None:
    """The API server's last check of a new object's name, made only when everything else
    passed: name and generateName must be usable in a URL path."""
    for field, value, whole in (
        ("name", meta.name, True),
        ("generateName", meta.generate_name, False),
    ):
        for bad in ("/", "%"):
            if value and bad in value:
                r.invalid(("metadata", field), value, f"may not contain '{bad}'")
        if whole and value in (".", ".."):
            r.invalid(("metadata", field), value, f"may not be '{value}'")


def _masked(prefix: str) -> str:
    """A generateName as upstream checks it: a trailing '-' (and, as upstream's helper
    does, the character before it) replaced by 'a', since a suffix will follow."""
    if len(prefix) > 1 and prefix.endswith("-"):
        return prefix[:-2] + "a"
    return prefix


def _owner_references(r: Report, meta: ObjectMeta) -> None:
    """As checked after the API server drops repeated identical references (with a
    warning), so the indexes are those of the list without repeats."""
    path: Path = ("metadata", "ownerReferences")
    refs = unique_owner_references(meta.owner_references)
    if len(refs) < len(meta.owner_references):
        r.warn(path, "duplicate ownerReferences are dropped")
    controllers = 0
    for i, ref in enumerate(refs):
        group, _, version = ref.api_version.rpartition("/")
        if not ref.api_version:
            r.required((*path, i, "apiVersion"), "must not be empty")
        elif "/" in group or not version:
            r.invalid(
                (*path, i, "apiVersion"), ref.api_version, "must be <group>/<version> or <version>"
            )
        for field, value in (("kind", ref.kind), ("name", ref.name), ("uid", ref.uid)):
            if not value:
                r.required((*path, i, field), "must not be empty")
        if (group, version, ref.kind) == ("", "v1", "Event"):
            r.invalid((*path, i), ref.name, "/v1, Kind=Event is disallowed from being an owner")
        controllers += ref.controller is True
        if ref.controller is True and controllers > 1:
            r.invalid(path, "<value omitted>", "Only one reference can have Controller set to true")


def unique_owner_references(refs: Sequence[OwnerReference]) -> tuple[OwnerReference, ...]:
    """The references without repeats, first ones kept (the API server's create)."""
    return tuple(dict.fromkeys(refs))


def _finalizers(r: Report, finalizers: tuple[str, ...]) -> None:
    path: Path = ("metadata", "finalizers")
    for i, finalizer in enumerate(finalizers):
        r.valid(path, finalizer, names.label_key)
        if "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
            r.invalid(
                (*path, i),
                finalizer,
                "name is neither a standard finalizer name nor is it fully qualified",
            )
    if _ORPHAN in finalizers and _FOREGROUND in finalizers:
        r.invalid(
            path, list(finalizers), f"finalizer {_ORPHAN} and {_FOREGROUND} cannot be both set"
        )


CONDITION_STATUSES = ("False", "True", "Unknown")
_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_REASON_MAX, _MESSAGE_MAX = 1024, 32 * 1024


def conditions(r: Report, path: Path, items: Sequence[Condition]) -> None:
    """metav1 Conditions (apimachinery's ValidateConditions): one per type, each complete."""
    for i, c in enumerate(items):
        cp = (*path, i)
        r.name((*cp, "type"), c.type, names.label_key)
        if not c.status:
            r.required((*cp, "status"))
        elif c.status not in CONDITION_STATUSES:
            r.unsupported((*cp, "status"), c.status, CONDITION_STATUSES)
        if c.observed_generation is not None and c.observed_generation < 0:
            r.invalid(
                (*cp, "observedGeneration"),
                c.observed_generation,
                "must be greater than or equal to zero",
            )
        if not c.last_transition_time:
            r.required((*cp, "lastTransitionTime"))
        if not c.reason:
            r.required((*cp, "reason"))
        else:
            if not _REASON.fullmatch(c.reason):
                r.invalid(
                    (*cp, "reason"),
                    c.reason,
                    "a condition reason must start with alphabetic character, optionally "
                    "followed by a string of alphanumeric characters or '_,:', and must "
                    "end with an alphanumeric character or '_'",
                )
            if len(c.reason.encode()) > _REASON_MAX:
                r.too_long((*cp, "reason"), _REASON_MAX)
        if c.message and len(c.message.encode()) > _MESSAGE_MAX:
            r.too_long((*cp, "message"), _MESSAGE_MAX)
    r.unique(path, (c.type for c in items))
