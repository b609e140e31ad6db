"""JSON manifests, checked as strictly as the API server decodes them, then decoded.

msgspec splits the text (a kubectl List into its items) and checks the syntax in C (NaN
and Infinity included); each object then gets one pass of the standard library's C
scanner with two hooks, for the checks of Kubernetes' strict JSON decoding
(sigs.k8s.io/json) that a plain decode skips: a key twice in one object, and numbers too
long to convert safely. The pass builds nothing (the hooks return None), and the object is
then decoded by msgspec straight into its model (`kubedra.api.codec.decode_json`), which
bounds the nesting of free-form values before anything walks them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import msgspec

from kubedra.api.bounds import (
    MAX_NUMBER_CHARS,
    MAX_OBJECT_BYTES,
    InputError,
    number_too_long,
    too_deep,
    too_large,
)
from kubedra.api.codec import format_path, json_head
from kubedra.errors import ObjectRef

# (List item index or None, the object's JSON, the problems that keep it from being decoded)
JsonObject = tuple[int | None, bytes, tuple[InputError, ...]]

_items_decoder = msgspec.json.Decoder(list[msgspec.Raw])


class _Metadata(msgspec.Struct):
    name: str = ""
    generateName: str = ""
    namespace: str = ""


class _Named(msgspec.Struct):
    kind: str = ""
    metadata: _Metadata = msgspec.field(default_factory=_Metadata)


_named = msgspec.json.Decoder(_Named).decode


def json_ref(raw: bytes) -> ObjectRef:
    """Kind and name of a JSON object that cannot be decoded, for its message (msgspec
    skips everything else in C, however large the object; skipping a value nested past
    Python's stack limit raises RecursionError, and the object then goes unnamed)."""
    try:
        named = _named(raw)
    except (msgspec.DecodeError, RecursionError):
        return ObjectRef()
    meta = named.metadata
    return ObjectRef(named.kind, meta.namespace, meta.name or meta.generateName)


def json_objects(data: bytes) -> Iterator[JsonObject]:
    """The objects of a JSON text: a kubectl List's items (with index) or the one object.
    Raises InputError when the text as a whole is not JSON."""
    for item, raw in _split(data):
        problems: tuple[InputError, ...] = ()
        if len(raw) > MAX_OBJECT_BYTES:
            problems = (too_large(len(raw)),)
        else:
            try:
                check_strict(bytes(raw))
            except InputError as err:
                problems = (err,)
        yield item, bytes(raw), problems


def _split(data: bytes) -> list[tuple[int | None, msgspec.Raw]]:
    try:
        head = json_head(data)
        if head.kind.endswith("List") and head.items:
            return list(enumerate(_items_decoder.decode(head.items)))
        return [(None, msgspec.Raw(data))]
    except msgspec.ValidationError:  # valid JSON, but no kubectl List: one object
        return [(None, msgspec.Raw(data))]
    except RecursionError:
        raise too_deep() from None
    except msgspec.DecodeError as err:
        raise InputError(f"cannot parse: {err}", _error_line(data, str(err))) from None


def check_strict(raw: bytes) -> None:
    """InputError when one JSON value has a key twice in an object, a number too long to
    convert, or nesting deeper than the C scanner's stack allows."""
    try:
        json.loads(raw, object_pairs_hook=_unique_keys, parse_int=_short_int)
    except _DuplicateKey:
        path, key = _first_duplicate(raw)
        raise InputError(f'duplicate field "{key}"', path=path) from None
    except RecursionError:
        raise too_deep() from None
    except ValueError as err:  # JSONDecodeError: what msgspec accepts and json does not
        raise InputError(f"cannot parse: {err}", getattr(err, "lineno", 0)) from None


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]], len: Any = len, dict: Any = dict) -> None:
    """Runs once per JSON object (builtins bound as defaults; one-key objects, the most
    common, are skipped)."""
    if len(pairs) > 1 and len(dict(pairs)) != len(pairs):
        raise _DuplicateKey


def _short_int(text: str) -> None:
    if len(text) > MAX_NUMBER_CHARS:
        raise number_too_long(text)


class _Pairs(list[tuple[str, Any]]):
    """An object's pairs as written (duplicates kept), to find where a key repeats."""


def _first_duplicate(raw: bytes) -> tuple[str, str]:
    """(path of the object, key) of the first key written twice in one object."""
    decoded = json.loads(raw, object_pairs_hook=_Pairs, parse_int=_short_int)
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(decoded, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, item in value:
                if key in seen:
                    return format_path((*path, key)), key
                seen.add(key)
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, i)) for i, item in enumerate(value))
    return "", ""


_BYTE_OFFSET = re.compile(r"\(byte (\d+)\)")


def _error_line(data: bytes, message: str) -> int:
    """The line of msgspec's `(byte N)` position, 0 when it gives none."""
    found = _BYTE_OFFSET.search(message)
    return data.count(b"\n", 0, int(found.group(1))) + 1 if found else 0
