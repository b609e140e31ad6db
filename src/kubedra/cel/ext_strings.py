"""cel-go `ext.Strings` at version 2, the version the Kubernetes base environment enables
(charAt ... trim at v0, format and strings.quote at v1, join at v2; reverse is v3: absent)."""

from __future__ import annotations

from kubedra.cel.errors import CelEvalError
from kubedra.cel.ext_format import format_string
from kubedra.cel.registry import Impl, Library
from kubedra.cel.runtime import guard_string
from kubedra.cel.types import DYN, INT, STRING, Type, list_of
from kubedra.cel.values import type_name

# Go's unicode.IsSpace set, which trim() strips.
_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _out_of_range(index: int) -> CelEvalError:
    return CelEvalError(f"index out of range: {index}")


def char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise _out_of_range(index)
    return text[index : index + 1]


def index_of(text: str, sub: str, offset: int = 0) -> int:
    """cel-go: a negative offset is an error; one past the end finds nothing (-1), except
    the empty string, found at the offset clamped to the end."""
    if offset < 0:
        raise _out_of_range(offset)
    if sub == "":
        return min(offset, len(text))
    if offset >= len(text):
        return -1
    return text.find(sub, offset)


def last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    """As index_of, searching backwards from `offset` (the whole string without one)."""
    if offset is None:
        return text.rfind(sub)
    if offset < 0:
        raise _out_of_range(offset)
    if sub == "":
        return min(offset, len(text))
    if offset >= len(text):
        return -1
    return text.rfind(sub, 0, offset + len(sub))


def lower_ascii(text: str) -> str:
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in text)


def upper_ascii(text: str) -> str:
    return "".join(c.upper() if "a" <= c <= "z" else c for c in text)


def replace(text: str, old: str, new: str, count: int = -1) -> str:
    """Go's strings.Replace (an empty `old` matches around every character); the result's
    size is known before it is built."""
    found = text.count(old) if old else len(text) + 1
    if count >= 0:
        found = min(found, count)
    guard_string(len(text) + found * (len(new) - len(old)), "replace")
    return text.replace(old, new, count if count >= 0 else -1)


def split(text: str, sep: str, limit: int = -1) -> list[str]:
    """Go's strings.SplitN: limit 0 gives no parts, negative means all."""
    if limit == 0:
        return []
    if sep == "":
        chars = list(text)
        if 0 < limit < len(chars):
            return [*chars[: limit - 1], "".join(chars[limit - 1 :])]
        return chars
    return text.split(sep, limit - 1 if limit > 0 else -1)


def substring(text: str, start: int, end: int | None = None) -> str:
    stop = len(text) if end is None else end
    if end is not None and start > end:  # checked first, as cel-go does
        raise CelEvalError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > len(text):
        raise _out_of_range(start)
    if stop < 0 or stop > len(text):
        raise _out_of_range(stop)
    return text[start:stop]


def trim(text: str) -> str:
    return text.strip(_SPACE)


def join(items: list[object], sep: str = "") -> str:
    size = len(sep) * max(len(items) - 1, 0)
    for item in items:
        if type(item) is not str:
            raise CelEvalError(f"join: list element is {type_name(item)}, not string")
        size += len(item)
    guard_string(size, "join")
    return sep.join(items)  # type: ignore[arg-type]


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\v": "\\v", "\\": "\\\\", '"': '\\"'}  # fmt: skip


def quote(text: str) -> str:
    """strings.quote: a double-quoted CEL string literal for `text`."""
    return '"' + "".join(_QUOTE_ESCAPES.get(c, c) for c in text) + '"'


def string_extensions() -> Library:
    lib = Library()
    s = STRING

    def m(name: str, args: tuple[Type, ...], result: Type, impl: Impl) -> None:
        lib.add(name, args, result, impl, member=True)

    m("charAt", (s, INT), s, char_at)
    m("indexOf", (s, s), INT, index_of)
    m("indexOf", (s, s, INT), INT, index_of)
    m("lastIndexOf", (s, s), INT, last_index_of)
    m("lastIndexOf", (s, s, INT), INT, last_index_of)
    m("lowerAscii", (s,), s, lower_ascii)
    m("upperAscii", (s,), s, upper_ascii)
    m("replace", (s, s, s), s, replace)
    m("replace", (s, s, s, INT), s, replace)
    m("split", (s, s), list_of(s), split)
    m("split", (s, s, INT), list_of(s), split)
    m("substring", (s, INT), s, substring)
    m("substring", (s, INT, INT), s, substring)
    m("trim", (s,), s, trim)
    m("join", (list_of(s),), s, join)
    m("join", (list_of(s), s), s, join)
    m("format", (s, list_of(DYN)), s, format_string)
    lib.add("strings.quote", (s,), s, quote)
    return lib
