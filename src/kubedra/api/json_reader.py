"""JSON manifests as plain data, decoded as strictly as the API server decodes them.

msgspec splits the text (a kubectl List into its items) and checks the syntax in C; each
object is then decoded by the standard library's C scanner with three hooks, the checks
of Kubernetes' strict JSON decoding (sigs.k8s.io/json) that a plain decode skips: a key
twice in one object, and numbers too long to convert safely (msgspec has already refused
what is not JSON, NaN and Infinity included). Object sizes are bounded before decoding;
nesting is bounded by the codec before anything walks the data.
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

# (List item index or None, data, problems): data is None when a problem kept it from
# being decoded.
JsonObject = tuple[int | None, Any, tuple[InputError, ...]]


_items_decoder = msgspec.json.Decoder(list[msgspec.Raw])


def json_objects(data: bytes) -> Iterator[JsonObject]:
    """The objects of a JSON text: a kubectl List's items (with index) or the one object.
    Raises InputError when the text as a whole is not JSON."""
    for item, raw in _split(data):
        if len(raw) > MAX_OBJECT_BYTES:
            yield item, None, (too_large(len(raw)),)
            continue
        try:
            yield item, strict_decode(bytes(raw)), ()
        except InputError as err:
            yield item, _lenient(bytes(raw)), (err,)


def _split(data: bytes) -> list[tuple[int | None, msgspec.Raw]]:
    try:
        head = json_head(data)
        if isinstance(head.kind, str) and head.kind.endswith("List") and head.items:
            try:
                return list(enumerate(_items_decoder.decode(head.items)))
            except msgspec.ValidationError:
                pass  # `items` is not a list: not a kubectl List, decoded as one object
        return [(None, msgspec.Raw(data))]
    except RecursionError:
        raise too_deep() from None
    except msgspec.DecodeError as err:
        raise InputError(f"cannot parse: {err}", _error_line(data, str(err))) from None


def strict_decode(raw: bytes) -> Any:
    """One JSON value as plain data; InputError on duplicate keys, long numbers, NaN or
    Infinity, or nesting beyond the bound."""
    try:
        value = json.loads(raw, object_pairs_hook=_unique, parse_int=_int)
    except _DuplicateKey:
        path, key = _first_duplicate(raw)
        raise InputError(f'duplicate field "{key}"', path=path) from None
    except RecursionError:
        raise too_deep() from None
    except ValueError as err:  # JSONDecodeError: what msgspec accepts and json does not
        raise InputError(f"cannot parse: {err}", getattr(err, "lineno", 0)) from None
    return value


def _lenient(raw: bytes) -> Any:
    """The object as a plain decode reads it (last key wins), to name it in a message."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


class _DuplicateKey(Exception):
    pass


def _unique(pairs: list[tuple[str, Any]], dict: type[dict[str, Any]] = dict) -> dict[str, Any]:
    value = dict(pairs)  # (`dict` bound as a default: this runs once per JSON object)
    if len(value) != len(pairs):
        raise _DuplicateKey
    return value


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise number_too_long(text)
    return int(text)


class _Pairs(list[tuple[str, Any]]):
    """An object's pairs as written (duplicates kept), to find where a key repeats."""


def _first_duplicate(raw: bytes) -> tuple[str, str]:
    """(path of the object, key) of the first key written twice in one object."""
    decoded = json.loads(raw, object_pairs_hook=_Pairs, parse_int=_int)
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
