"""What `apply` writes, computed without a store: kubectl's client-side apply.

kubectl records each applied manifest in the `kubectl.kubernetes.io/last-applied-configuration`
annotation and, on the next apply, three-way merges the manifest into the live object
(`kubedra.api.merge`). kubedra writes that annotation byte for byte as kubectl does (compact
JSON, keys sorted, Go's escaping, a trailing newline; the manifest without the annotation,
its namespace filled in, `metadata.annotations` present), so `kubectl apply` and
`kubedra apply` can take turns on one object. The store side (read, write, retry on
conflict) is `kubedra.cluster.apply`.
"""

from __future__ import annotations

import json
from typing import TypeVar

import msgspec

from kubedra.api.bounds import InputError
from kubedra.api.codec import decode_object, format_path, to_dict
from kubedra.api.json_reader import check_strict
from kubedra.api.merge import JsonMap, three_way_merge
from kubedra.api.merge_keys import merge_lists
from kubedra.api.meta import KubeObject
from kubedra.errors import ObjectRef, Problem, ValidationError

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
LAST_APPLIED_PATH = format_path(("metadata", "annotations", LAST_APPLIED))

T = TypeVar("T", bound=KubeObject)

# Go's encoding/json escapes these inside strings (HTML safety); kubectl's annotation has them.
_GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def applied_configuration(manifest: KubeObject) -> JsonMap:
    """What kubectl records of a manifest: the object as given, without the annotation
    itself, with `metadata.annotations` present even when empty (kubectl's shape)."""
    data = to_dict(manifest)
    meta = data.setdefault("metadata", {})
    annotations = meta.get("annotations", {})
    annotations.pop(LAST_APPLIED, None)
    meta["annotations"] = annotations
    return data


def encode_last_applied(config: JsonMap) -> str:
    """The annotation's text, as Go's json.Encoder writes it (what kubectl stores)."""
    text = json.dumps(config, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.translate(_GO_ESCAPES) + "\n"


def with_last_applied(manifest: T) -> T:
    """The manifest as apply creates it: carrying its own last-applied annotation."""
    text = encode_last_applied(applied_configuration(manifest))
    annotations = {**manifest.metadata.annotations, LAST_APPLIED: text}
    meta = msgspec.structs.replace(manifest.metadata, annotations=annotations)
    return msgspec.structs.replace(manifest, metadata=meta)


def last_applied(current: KubeObject) -> JsonMap | None:
    """What was applied last (None for an object not created by apply), in kubedra's
    shape: a kubectl-written annotation goes through the same decoding as a manifest."""
    text = current.metadata.annotations.get(LAST_APPLIED)
    if text is None:
        return None
    try:
        check_strict(text.encode())  # the bounds every JSON input gets (depth, duplicates)
        raw = json.loads(text)
    except (ValueError, InputError):
        raw = None
    if not isinstance(raw, dict):
        ref = ObjectRef(current.KIND, current.namespace, current.name)
        detail = "Invalid value: not a JSON object: fix the annotation or remove it"
        raise ValidationError([Problem(detail, LAST_APPLIED_PATH, ref)])
    try:
        return to_dict(decode_object(raw).obj)
    except ValidationError:
        return raw  # not decodable as a kubedra object: its keys still say what to remove


def merge_applied(manifest: T, current: T) -> T | None:
    """The object apply writes over `current`, or None when applying changes nothing.
    Status is never applied (it is the `/status` subresource's): it stays as it is."""
    config = applied_configuration(manifest)
    text = encode_last_applied(config)
    meta = config["metadata"]
    annotations = {**meta["annotations"], LAST_APPLIED: text}  # the live object carries it
    modified = {**config, "metadata": {**meta, "annotations": annotations}}
    # The same manifest as last time: its configuration is the original (no need to parse).
    same = current.metadata.annotations.get(LAST_APPLIED) == text
    original = config if same else last_applied(current)
    live = to_dict(current)
    merged = three_way_merge(
        None if original is None else _without_status(original),
        _without_status(modified),
        _without_status(live),
        merge_lists(current.KIND),
    )
    if "status" in live:
        merged["status"] = live["status"]
    if merged == live:
        return None
    result = decode_object(merged).obj
    assert isinstance(result, type(current))
    return None if to_dict(result) == live else result  # equal once normalised


def _without_status(data: JsonMap) -> JsonMap:
    return {k: v for k, v in data.items() if k != "status"}
