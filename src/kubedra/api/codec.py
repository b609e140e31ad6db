"""Plain data (parsed YAML/JSON) <-> typed objects, losing nothing on the way.

Decoding has a fast path (msgspec converts the whole document in C, every model forbids
unknown fields) and a slow path taken only when the document has fields kubedra does not
model: those are moved aside with their paths, kept on the object for the round trip, and
reported by validation. Encoding is kubectl's shape: camelCase, empty fields omitted, keys
sorted, quantities in canonical form, so that dump(load(dump(x))) == dump(x) byte for byte.
"""

from __future__ import annotations

import copy
import json
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import msgspec

from kubedra.api.bounds import InputError, check_depth, too_deep
from kubedra.api.core import Container, Namespace, NodeSpec, NodeStatus, PodSpec, PodStatus
from kubedra.api.kinds import BY_KIND, OLDER_RESOURCE_VERSIONS, TAINT_RULE_VERSIONS, api_version_of
from kubedra.api.meta import UNKNOWN_FIELDS_KEY, KubeObject, Model, UnknownField
from kubedra.api.quantity import Quantity, QuantityError
from kubedra.api.resource import GROUP, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from kubedra.errors import ObjectRef, Problem, Severity, ValidationError

# Structs of the core/v1 subset whose unmodelled fields are ordinary Kubernetes (container
# commands, volumes, probes...): kept for the round trip, never reported as unknown.
OPEN_STRUCTS: frozenset[type[Model]] = frozenset(
    {PodSpec, PodStatus, Container, NodeSpec, NodeStatus, Namespace}
)

# The request fields of v1beta1 that v1 moved under `requests[].exactly`.
FLAT_REQUEST_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A typed object and the warnings its decoding produced (conversions, upgrades)."""

    obj: KubeObject
    warnings: tuple[Problem, ...]


def object_ref(raw: Any) -> ObjectRef:
    """Kind and namespace/name of a raw document, as far as it has them."""
    if not isinstance(raw, dict):
        return ObjectRef()
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, dict) else {}

    def text(value: Any) -> str:  # only strings name an object (anything else is an error)
        return value if isinstance(value, str) else ""

    name = text(meta.get("name")) or text(meta.get("generateName"))
    return ObjectRef(text(raw.get("kind")), text(meta.get("namespace")), name)


def decode_object(raw: Any) -> Decoded:
    """Turn one parsed document into its typed object; raises ValidationError.

    Problems carry object and field path; the loader adds file and line.
    """
    ref = object_ref(raw)
    fail = _failure(ref)
    if not isinstance(raw, dict):
        raise fail("", f"expected an object (mapping), got {json_type(raw)}")
    cls, notes = _model_for(raw, fail)
    _bound_free_form(raw, _free_form(cls), fail)
    if notes or _needs_rewrite(cls, raw):
        raw = copy.deepcopy(_walkable(raw, fail))
    warnings = [Problem(msg, path, ref, severity=Severity.WARNING) for path, msg in notes]
    if notes:
        raw["apiVersion"] = api_version_of(cls)
    warnings += [
        Problem(msg, path, ref, severity=Severity.WARNING)
        for path, msg in _upgrade_shapes(cls, raw, bool(notes))
    ]
    obj = _convert(cls, raw, fail)
    return Decoded(obj, tuple(warnings))


# Where a type holds free-form data (`Any`: opaque parameters, device status data,
# managedFields): _ANY, an _Each (every item of a list or map), or the (field, plan) pairs
# of a model; None where nothing inside is free-form.
_ANY = "any"


@dataclass(frozen=True, slots=True)
class _Each:
    inner: Any


@cache
def _free_form(tp: Any) -> Any:
    """The plan of where free-form values sit inside a type (types nest a few levels):
    for a model, (attribute, wire name, plan) of each field that holds some."""
    return _plan(tp, frozenset())


def _plan(tp: Any, outer: frozenset[type]) -> Any:
    """`_free_form` of a type met inside the models `outer` (a model that contains
    itself, as a composite pod group template does, is walked once)."""
    tp = _unwrap_optional(tp)
    if tp is Any:
        return _ANY
    origin = typing.get_origin(tp)
    if origin in (tuple, dict):
        inner = _plan(typing.get_args(tp)[-1 if origin is dict else 0], outer)
        return _Each(inner) if inner is not None else None
    if isinstance(tp, type) and issubclass(tp, Model) and tp not in outer:
        fields = tuple(
            (f.name, f.encode_name, plan)
            for f in msgspec.structs.fields(tp)
            if f.encode_name != UNKNOWN_FIELDS_KEY
            and (plan := _plan(f.type, outer | {tp})) is not None
        )
        return fields or None
    return None


def _bound_free_form(value: Any, plan: Any, fail: Any) -> None:
    """Free-form values are the only part of a typed document that can nest without bound:
    each is checked before anything walks it (the typed parts follow their models). The
    value is plain data, or (after a typed decode) the model itself."""
    if plan == _ANY:
        try:
            check_depth(value)
        except InputError as err:
            raise fail("", err.message) from None
    elif isinstance(plan, _Each):
        items = value.values() if isinstance(value, dict) else value
        for item in items if isinstance(value, dict | list | tuple) else ():
            _bound_free_form(item, plan.inner, fail)
    elif isinstance(value, Model):
        for attribute, _, inner in plan:
            _bound_free_form(getattr(value, attribute), inner, fail)
    elif isinstance(value, dict):
        for _, name, inner in plan:
            if name in value:
                _bound_free_form(value[name], inner, fail)


def _walkable(raw: dict[str, Any], fail: Any) -> dict[str, Any]:
    """The document, once its nesting is known to be within the bound that the recursive
    walks here (copying, stripping unknown fields) need."""
    try:
        check_depth(raw)
    except InputError as err:
        raise fail("", err.message) from None
    return raw


def _failure(ref: ObjectRef) -> Callable[[str, str], ValidationError]:
    """How decoding fails for one object: a problem at a field path of it."""

    def fail(path: str, message: str) -> ValidationError:
        return ValidationError([Problem(message, path, ref)])

    return fail


def json_type(value: Any) -> str:
    """The JSON name of a plain value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "list", dict: "object"}
    return names.get(type(value), type(value).__name__)


def _model_for(raw: dict[str, Any], fail: Any) -> tuple[type[KubeObject], list[tuple[str, str]]]:
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(kind, str) or not kind:
        raise fail("kind", "Required value: every object needs a kind")
    if not isinstance(api_version, str) or not api_version:
        raise fail("apiVersion", "Required value: every object needs an apiVersion")
    cls = BY_KIND.get(kind)
    if cls is None:
        raise fail("kind", f'Unsupported value: "{kind}": kubedra serves {", ".join(BY_KIND)}')
    wanted = api_version_of(cls)
    if api_version == wanted or (
        cls.KIND == "DeviceTaintRule" and api_version in TAINT_RULE_VERSIONS
    ):
        return cls, []
    if cls.API_GROUP == GROUP and api_version in OLDER_RESOURCE_VERSIONS:
        return cls, [("apiVersion", f"converted {api_version} to {wanted}")]
    raise fail("apiVersion", f'Unsupported value: "{api_version}": {kind} is served as {wanted}')


def _needs_rewrite(cls: type[KubeObject], raw: dict[str, Any]) -> bool:
    """Whether the document uses an older shape that decoding rewrites (then it is copied)."""
    return any(True for _ in _flat_requests(cls, raw))


def _flat_requests(
    cls: type[KubeObject], raw: dict[str, Any]
) -> Iterable[tuple[str, dict[str, Any]]]:
    """(path, request) for each request of a claim or template that has v1beta1 flat fields."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return
    prefix = "spec"
    if cls is ResourceClaimTemplate:
        spec, prefix = spec.get("spec"), "spec.spec"
    elif cls is not ResourceClaim:
        return
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    for i, request in enumerate(requests if isinstance(requests, list) else []):
        if isinstance(request, dict) and any(f in request for f in FLAT_REQUEST_FIELDS):
            yield f"{prefix}.devices.requests[{i}]", request


def _upgrade_shapes(
    cls: type[KubeObject], raw: dict[str, Any], older: bool
) -> list[tuple[str, str]]:
    """Rewrite older request/device shapes in place into v1; returns (path, warning)."""
    notes: list[tuple[str, str]] = []
    for path, request in list(_flat_requests(cls, raw)):
        if "exactly" in request or "firstAvailable" in request:
            continue  # both shapes at once: left for validation to report as unknown fields
        exactly = {f: request.pop(f) for f in FLAT_REQUEST_FIELDS if f in request}
        request["exactly"] = exactly
        for field in exactly:
            notes.append(
                (
                    f"{path}.{field}",
                    f"v1beta1-style request field moved to {path}.exactly.{field} "
                    "(resource.k8s.io/v1 shape)",
                )
            )
    if older and cls is ResourceSlice:
        devices = raw.get("spec", {}).get("devices") if isinstance(raw.get("spec"), dict) else None
        for i, device in enumerate(devices if isinstance(devices, list) else []):
            if isinstance(device, dict) and isinstance(device.get("basic"), dict):
                device.update(device.pop("basic"))
                notes.append((f"spec.devices[{i}].basic", "v1beta1 `basic` wrapper removed"))
    return notes


# --- JSON fast path -----------------------------------------------------------------------


class JsonHead(msgspec.Struct):
    """Just enough of a JSON document to route it: msgspec skips everything else in C."""

    apiVersion: str = ""
    kind: str = ""
    items: msgspec.Raw = msgspec.Raw()  # empty when absent


json_head = msgspec.json.Decoder(JsonHead).decode


@cache
def _typed_decoder(cls: type[KubeObject]) -> msgspec.json.Decoder[KubeObject]:
    return msgspec.json.Decoder(cls, dec_hook=_dec_hook)


def decode_json(raw: msgspec.Raw | bytes, typed: bool = True) -> Decoded:
    """Decode one JSON object straight into its model (no intermediate dicts) when it is
    plain v1; anything that needs the general path (unknown fields, older shapes, errors)
    takes it, so both paths give the same object and the same problems. `typed=False`
    forces the general path (for texts that spell kubedra's own unknown-fields key)."""
    try:
        head = json_head(raw)
    except msgspec.ValidationError:  # a kind or apiVersion that is no string
        head = JsonHead()
    cls = BY_KIND.get(head.kind)
    if typed and cls is not None and head.apiVersion == api_version_of(cls):
        try:
            obj = _typed_decoder(cls).decode(raw)
        except (msgspec.ValidationError, RecursionError):
            pass
        else:
            ref = ObjectRef(cls.KIND, obj.namespace, obj.name)
            _bound_free_form(obj, _free_form(cls), _failure(ref))
            return Decoded(obj, ())
    try:
        data = msgspec.json.decode(raw)
    except RecursionError:
        raise _failure(ObjectRef())("", too_deep().message) from None
    return decode_object(data)


# --- conversion ---------------------------------------------------------------------------


def _dec_hook(tp: type, value: Any) -> Any:
    if tp is Quantity and type(value) is str:  # the common case first: it runs per device
        try:
            return Quantity.parse(value)
        except QuantityError as err:
            raise ValueError(str(err)) from None
    if tp is Quantity:
        if isinstance(value, bool):
            raise ValueError("a quantity must be a string or a number")
        if isinstance(value, int):
            return Quantity.from_int(value)
        if isinstance(value, float):
            return Quantity.parse(repr(value))
        raise ValueError(f"a quantity must be a string or a number, got {type(value).__name__}")
    raise NotImplementedError(tp)


def _enc_hook(value: Any) -> Any:
    if isinstance(value, Quantity):
        return str(value)
    raise NotImplementedError(type(value))


def _convert(cls: type[KubeObject], raw: dict[str, Any], fail: Any) -> KubeObject:
    raw.pop(UNKNOWN_FIELDS_KEY, None)
    try:
        return msgspec.convert(raw, cls, dec_hook=_dec_hook)
    except msgspec.ValidationError as err:
        if not str(err).startswith("Object contains unknown field"):
            raise fail(*_error_location(cls, raw, str(err))) from None
    except RecursionError:
        raise fail("", too_deep().message) from None
    stripped = copy.deepcopy(_walkable(raw, fail))
    # Sorted by path, so that the same document read in any key order gives equal objects.
    unknown = sorted(_strip_unknown(cls, stripped, ()), key=lambda f: _path_key(f.path))
    try:
        obj = msgspec.convert(stripped, cls, dec_hook=_dec_hook)
    except msgspec.ValidationError as err:
        raise fail(*_error_location(cls, stripped, str(err))) from None
    return msgspec.structs.replace(obj, unknown_fields=tuple(unknown))


def _path_key(path: tuple[str | int, ...]) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, s, "") if isinstance(s, int) else (1, 0, str(s)) for s in path)


@cache
def _fields(cls: type[Model]) -> dict[str, Any]:
    """Wire name -> resolved type of each field of a model."""
    return {f.encode_name: f.type for f in msgspec.structs.fields(cls)}


def _strip_unknown(tp: Any, value: Any, path: tuple[str | int, ...]) -> Iterable[UnknownField]:
    """Remove (and yield) the fields the models do not know, depth first, in place."""
    tp = _unwrap_optional(tp)
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, Model) and isinstance(value, dict):
        fields = _fields(tp)
        for key in list(value):
            if key in fields and key != UNKNOWN_FIELDS_KEY:
                yield from _strip_unknown(fields[key], value[key], (*path, key))
            else:
                yield UnknownField(
                    path=(*path, key), value=value.pop(key), silent=tp in OPEN_STRUCTS
                )
    elif origin is tuple and isinstance(value, list):
        item_type = typing.get_args(tp)[0]
        for i, item in enumerate(value):
            yield from _strip_unknown(item_type, item, (*path, i))
    elif origin is dict and isinstance(value, dict):
        value_type = typing.get_args(tp)[1]
        for key, item in value.items():
            yield from _strip_unknown(value_type, item, (*path, key))


def _unwrap_optional(tp: Any) -> Any:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


_SEGMENT = re.compile(r"\.([A-Za-z0-9_\-]+)|\[(\d+|\.\.\.)\]")


def _error_location(cls: type[KubeObject], raw: Any, message: str) -> tuple[str, str]:
    """kubectl field path and message of a msgspec error (`... - at `$.spec.x[...]``)."""
    text, _, where = message.partition(" - at `")
    segments: list[str | int] = []
    tp: Any = cls
    value: Any = raw
    for name, index in _SEGMENT.findall(where.rstrip("`")[1:]):
        tp = _unwrap_optional(tp)
        if name:
            segments.append(name)
            tp = (
                _fields(tp).get(name, Any)
                if isinstance(tp, type) and issubclass(tp, Model)
                else Any
            )
            value = value.get(name) if isinstance(value, dict) else None
        elif index == "...":
            key, value, tp = _failing_entry(tp, value)
            segments.append(key)
        else:
            segments.append(int(index))
            tp = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else Any
            value = value[int(index)] if isinstance(value, list) else None
    missing = re.match(r"Object missing required field `(.+)`", text)
    if missing:
        segments.append(missing.group(1))
        text = "Required value"
    return format_path(segments), text


def _failing_entry(tp: Any, value: Any) -> tuple[str, Any, Any]:
    """The map entry that does not convert (msgspec names map keys only as `[...]`)."""
    value_type = typing.get_args(tp)[1] if typing.get_origin(tp) is dict else Any
    for key, item in value.items() if isinstance(value, dict) else []:
        try:
            msgspec.convert(item, value_type, dec_hook=_dec_hook)
        except (msgspec.ValidationError, TypeError):
            return str(key), item, value_type
    return "...", None, value_type


class Key(str):
    """A map key in a field path. Upstream's field paths write map entries as `[key]`
    (field.Path.Key), whatever the key looks like: `attributes[model]`."""

    __slots__ = ()


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_path(segments: Iterable[str | int]) -> str:
    """`("spec", "devices", 0, "attributes", Key("model"))` -> `spec.devices[0].attributes[model]`.

    A plain string that is no identifier (a key whose kind the caller does not know) is
    bracketed too, so every path stays readable back by `field_lines.parse_path`."""
    out = ""
    for seg in segments:
        if isinstance(seg, int | Key) or (out and not _IDENTIFIER.fullmatch(seg)):
            out += f"[{seg}]"
        else:
            out += f".{seg}" if out else seg
    return out


# --- encoding -----------------------------------------------------------------------------


def to_dict(obj: KubeObject) -> dict[str, Any]:
    """The object as plain data in kubectl's shape, with kept unknown fields put back."""
    # Through JSON (both steps in C): tuples become lists, quantities strings.
    data: dict[str, Any] = _json_decoder.decode(_json_encoder.encode(obj))
    data.pop(UNKNOWN_FIELDS_KEY, None)
    for field in obj.unknown_fields:
        _put(data, field.path, copy.deepcopy(field.value))
    return data


_json_encoder = msgspec.json.Encoder(enc_hook=lambda v: _enc_hook(v))


def to_json(obj: KubeObject) -> bytes:
    """`to_dict(obj)` as compact JSON. Without kept unknown fields that is the model's own
    encoding: the same bytes without the detour through dicts (the store writes every
    object this way, and the detour cost more than the rest of a write's Python)."""
    if obj.unknown_fields:
        return msgspec.json.encode(to_dict(obj))
    return _json_encoder.encode(obj)


def plain(value: Model) -> Any:
    """Any model part (an AllocationResult, a Device...) as plain JSON-shaped data."""
    return _json_decoder.decode(_json_encoder.encode(value))


_json_decoder = msgspec.json.Decoder()


def _put(data: Any, path: tuple[str | int, ...], value: Any) -> None:
    for seg in path[:-1]:
        data = data[seg] if isinstance(seg, int) else data.setdefault(seg, {})
    data[path[-1]] = value


def dump_yaml(objects: Iterable[KubeObject]) -> str:
    """Multi-document YAML, `---` between documents."""
    return "---\n".join(yaml_text(to_dict(o)) for o in objects)


def dump_json(objects: Iterable[KubeObject]) -> str:
    """One object as JSON, several as a kubectl `List` (4-space indent, sorted keys)."""
    items = [to_dict(o) for o in objects]
    data = items[0] if len(items) == 1 else {"apiVersion": "v1", "items": items, "kind": "List"}
    return json_text(data)


def kube_list(objects: Iterable[KubeObject]) -> dict[str, Any]:
    """A kubectl `List` of the objects, as `kubectl get TYPE -o yaml|json` prints any number
    of them (none and one included)."""
    items = [to_dict(o) for o in objects]
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def yaml_text(data: Any) -> str:
    """Plain data as block YAML, keys sorted, as kubectl prints it (PyYAML imported here:
    every command decodes objects, few print YAML)."""
    import yaml

    return yaml.dump(
        data,
        Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 16,
    )


def json_text(data: Any) -> str:
    """Plain data as kubectl's JSON: 4-space indent, keys sorted, a final newline."""
    return json.dumps(data, indent=4, sort_keys=True, ensure_ascii=False) + "\n"

