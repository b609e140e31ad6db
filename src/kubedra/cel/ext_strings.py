"""cel-go `ext.Strings` at version 2, the version the Kubernetes base environment enables
(charAt ... trim at v0, format and strings.quote at v1, join at v2; reverse is v3: absent)."""

from __future__ import annotations

from collections.abc import Mapping

from kubedra.cel.errors import CelEvalError
from kubedra.cel.registry import Impl, Library
from kubedra.cel.stdlib import format_double
from kubedra.cel.types import DYN, INT, STRING, Type, list_of
from kubedra.cel.values import Optional, UInt, type_name

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
    if offset < 0 or offset > len(text):
        raise _out_of_range(offset)
    return text.find(sub, offset)


def last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return text.rfind(sub)
    if offset < 0 or offset >= max(len(text), 1):
        raise _out_of_range(offset)
    return text.rfind(sub, 0, offset + len(sub))


def lower_ascii(text: str) -> str:
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in text)


def upper_ascii(text: str) -> str:
    return "".join(c.upper() if "a" <= c <= "z" else c for c in text)


def replace(text: str, old: str, new: str, count: int = -1) -> str:
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
    if start < 0 or start > len(text):
        raise _out_of_range(start)
    if stop < 0 or stop > len(text):
        raise _out_of_range(stop)
    if start > stop:
        raise CelEvalError(f"invalid substring range. start: {start}, end: {stop}")
    return text[start:stop]


def trim(text: str) -> str:
    return text.strip(_SPACE)


def join(items: list[object], sep: str = "") -> str:
    for item in items:
        if type(item) is not str:
            raise CelEvalError(f"join: list element is {type_name(item)}, not string")
    return sep.join(items)  # type: ignore[arg-type]


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\v": "\\v", "\\": "\\\\", '"': '\\"'}  # fmt: skip


def quote(text: str) -> str:
    """strings.quote: a double-quoted CEL string literal for `text`."""
    return '"' + "".join(_QUOTE_ESCAPES.get(c, c) for c in text) + '"'


def format_value(value: object) -> str:
    """How `%s` renders a value (cel-go's string formatting of each kind)."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is float:
        return format_double(value)  # type: ignore[arg-type]
    if kind is bytes:
        assert isinstance(value, bytes)
        return value.decode("utf-8", "replace")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_format_nested(v) for v in value) + "]"
    if isinstance(value, Mapping):
        entries = sorted((_format_nested(k), _format_nested(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in entries) + "}"
    if isinstance(value, Optional):
        raise CelEvalError("format: optional values are not supported")
    return str(value) if kind is not UInt else str(int(value))  # type: ignore[call-overload]


def _format_nested(value: object) -> str:
    return f'"{value}"' if type(value) is str else format_value(value)


def _number(verb: str, value: object) -> float | int:
    if type(value) in (int, UInt, float):
        return value  # type: ignore[return-value]
    raise CelEvalError(f"format: %{verb} requires a number, got {type_name(value)}")


def _format_one(verb: str, precision: int | None, value: object) -> str:
    if verb == "s":
        return format_value(value)
    if verb == "d":
        if type(value) not in (int, UInt):
            raise CelEvalError(f"format: %d requires an integer, got {type_name(value)}")
        return str(int(value))  # type: ignore[call-overload]
    if verb in "fe":
        number = float(_number(verb, value))
        return f"{number:.{6 if precision is None else precision}{verb}}"
    if verb in "boxX":
        if type(value) is str and verb in "xX":
            hexed = str(value).encode().hex()
            return hexed.upper() if verb == "X" else hexed
        if type(value) not in (int, UInt):
            raise CelEvalError(f"format: %{verb} requires an integer, got {type_name(value)}")
        return format(int(value), verb)  # type: ignore[call-overload]
    raise CelEvalError(f"format: unrecognized formatting clause '%{verb}'")


def format_string(template: str, args: list[object]) -> str:
    """`"...".format([args])` with the %s %d %f %e %b %o %x %X verbs and %% escapes."""
    out: list[str] = []
    i = used = 0
    while i < len(template):
        ch = template[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        i += 1
        if template[i : i + 1] == "%":
            out.append("%")
            i += 1
            continue
        precision = None
        if template[i : i + 1] == ".":
            j = i + 1
            while j < len(template) and template[j].isdigit():
                j += 1
            precision, i = int(template[i + 1 : j] or 0), j
        if i >= len(template):
            raise CelEvalError("format: unterminated formatting clause")
        if used >= len(args):
            raise CelEvalError(f"format: index {used} out of range")
        out.append(_format_one(template[i], precision, args[used]))
        used += 1
        i += 1
    return "".join(out)


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
