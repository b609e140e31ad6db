"""`"...".format([args])` of cel-go's ext.Strings (version 2, the one Kubernetes enables).

cel-go formats through golang.org/x/text's en_US printer, and its quirks are the contract:
`%f` groups thousands (`1,234.500000`) and takes its precision modulo 256; `%e` reads the
precision as a width and prints `1.000000×10⁰³`; a precision too large for Go's format
parser prints `%!(NOVERB)`. Nested values print as CEL literals (`[1.500000, "x"]`).
Every result is sized before it is built (a precision or width of ten million would
otherwise allocate before any cost check).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kubedra.cel import ast
from kubedra.cel.errors import CelEvalError
from kubedra.cel.goquote import go_quote
from kubedra.cel.runtime import guard_string
from kubedra.cel.stdlib import format_double
from kubedra.cel.values import CelType, UInt, type_name

DEFAULT_PRECISION = 6
# Go's fmt parses a width/precision digit by digit and gives up once the value so far
# exceeds 1e6 before another digit, so 10,000,009 is the largest it accepts.
_MAX_GO_PRECISION = 10_000_009
_NOVERB = "%!(NOVERB)"
_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_STRING_KINDS = (str, bytes, bool, type(None), CelType)


def format_string(template: str, args: list[object]) -> str:
    """Apply the %s %d %f %e %b %o %x %X clauses (and %%) of `template` to `args`."""
    out: list[str] = []
    size = 0
    i = used = 0
    while i < len(template):
        ch = template[i]
        i += 1
        if ch != "%":
            out.append(ch)
            size += 1
            continue
        if template[i : i + 1] == "%":
            out.append("%")
            size += 1
            i += 1
            continue
        precision, i = _precision(template, i)
        if used >= len(args):
            raise CelEvalError(f"index {used} out of range")
        piece = _clause(template[i], precision, args[used])
        size += len(piece)
        guard_string(size, "format")
        out.append(piece)
        used += 1
        i += 1
    return "".join(out)


def _precision(template: str, i: int) -> tuple[int | None, int]:
    """Parse `.N` at `i`; returns (precision, index of the verb)."""
    if template[i : i + 1] != ".":
        if i >= len(template):
            raise CelEvalError("unexpected end of string")
        return None, i
    j = i + 1
    while j < len(template) and template[j].isascii() and template[j].isdigit():
        j += 1
    if j >= len(template):
        raise _parse_error("error while parsing precision: could not find end of precision "
                           "specifier")  # fmt: skip
    digits = template[i + 1 : j]
    if not digits:
        raise _parse_error("error while parsing precision: error while converting precision "
                           'to integer: strconv.Atoi: parsing "": invalid syntax')  # fmt: skip
    if len(digits) > 12:  # far beyond any precision Go accepts; no need for the value
        return _MAX_GO_PRECISION + 1, j
    return int(digits), j


def _parse_error(detail: str) -> CelEvalError:
    return CelEvalError(f"could not parse formatting clause: {detail}")


def _format_error(detail: str) -> CelEvalError:
    return CelEvalError(f"error during formatting: {detail}")


def _clause(verb: str, precision: int | None, value: object) -> str:
    kind = type(value)
    if verb == "s":
        return _as_string(value)
    if verb == "d":
        if kind not in (int, UInt):
            raise _format_error(f"decimal clause can only be used on integers, was given "
                                f"{type_name(value)}")  # fmt: skip
        return str(int(value))  # type: ignore[call-overload]
    if verb in "fe":
        number = _as_double(verb, value)
        p = DEFAULT_PRECISION if precision is None else precision
        if p > _MAX_GO_PRECISION:
            return _NOVERB
        return _fixed(number, p % 256) if verb == "f" else _scientific(number, p)
    if verb in "boxX":
        return _integral(verb, value)
    raise _parse_error(f'unrecognized formatting clause "{verb}"')


# The strings %f and %e also take (cel-go's exception for values a double cannot be written
# as in CEL), converted as `double("...")` converts them.
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _as_double(verb: str, value: object) -> float:
    if type(value) is float:
        return value
    if type(value) is str and value in _SPECIAL_DOUBLES:
        return _SPECIAL_DOUBLES[value]
    what = "fixed-point clause" if verb == "f" else "scientific clause"
    raise _format_error(f"{what} can only be used on doubles, was given {type_name(value)}")


def _integral(verb: str, value: object) -> str:
    kind = type(value)
    if verb in "xX" and kind in (str, bytes):
        data = value.encode() if isinstance(value, str) else value
        assert isinstance(data, bytes)
        return data.hex().upper() if verb == "X" else data.hex()
    if kind is bool and verb == "b":
        return "1" if value else "0"
    if kind not in (int, UInt):
        detail = {
            "b": "only integers and bools can be formatted as binary",
            "o": "octal clause can only be used on integers",
        }.get(verb, "only integers, byte buffers, and strings can be formatted as hex")
        raise _format_error(f"{detail}, was given {type_name(value)}")
    return format(int(value), verb)  # type: ignore[call-overload]


def _fixed(value: float, digits: int) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    guard_string(digits + 400, "format")  # the widest double is ~309 digits plus commas
    return f"{value + 0.0:,.{digits}f}"  # + 0.0: no "-0.000000"


def _scientific(value: float, width: int) -> str:
    guard_string(width, "format")
    if math.isnan(value):
        body = "NaN"
    elif math.isinf(value):
        body = "∞" if value > 0 else "-∞"
    else:
        mantissa, exponent = f"{value + 0.0:.6e}".split("e")  # + 0.0: no "-0.000000"
        e = int(exponent)
        body = f"{mantissa}×10" + f"{'-' if e < 0 else ''}{abs(e):02d}".translate(_SUPERSCRIPTS)
    return body.rjust(width)


def _as_string(value: object) -> str:
    """`%s` of a top-level value."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is float:
        return format_double(value)  # type: ignore[arg-type]
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        # Sorted by the printed key alone (a stable sort), as cel-go does.
        entries = sorted(((_map_key(k), _literal(v)) for k, v in value.items()), key=_first)
        return "{" + ", ".join(f"{k}:{v}" for k, v in entries) + "}"
    return _scalar(value)


def _first(pair: tuple[str, str]) -> str:
    return pair[0]


def _map_key(key: object) -> str:
    """A map key inside %s: strings quoted, bools and integers bare, nothing else."""
    if type(key) in (str, bool, int, UInt):
        return _literal(key)
    raise CelEvalError(f"no formatting function for map key of type {type_name(key)}")


def _scalar(value: object) -> str:
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is bytes:
        assert isinstance(value, bytes)
        return _utf8(value)
    if kind is CelType:
        return repr(value)
    if kind in (int, UInt):
        return str(int(value))  # type: ignore[call-overload]
    raise _format_error(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, "
        f"lists, types, durations, and timestamps, was given {type_name(value)}"
    )


def _utf8(data: bytes) -> str:
    """bytes as the string they spell; cel-go's conversion refuses invalid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CelEvalError("invalid UTF-8 in bytes, cannot convert to string") from None


def _literal(value: object) -> str:
    """A value inside a list or map, printed as a CEL literal: strings and bytes in Go's
    %q quotes; doubles as Go's %.6f (no grouping), where NaN and the infinities are not
    literals and print quoted ("NaN", "+Inf", "-Inf")."""
    kind = type(value)
    if kind is str:
        return go_quote(value)  # type: ignore[arg-type]
    if kind is bytes:
        return "b" + go_quote(_utf8(value))  # type: ignore[arg-type]
    if kind is float:
        assert isinstance(value, float)
        if math.isnan(value) or math.isinf(value):
            return go_quote("NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf")
        return f"{value:.{DEFAULT_PRECISION}f}"
    return _as_string(value)


# --- compile-time check of a literal template (cel-go's string format validator) -----------

# Kinds of static type each clause accepts (`dyn` is always accepted).
_ACCEPTS = {
    "d": {"int", "uint"},
    "o": {"int", "uint"},
    "f": {"double", "string"},
    "e": {"double", "string"},
    "b": {"int", "uint", "bool"},
    "x": {"int", "uint", "string", "bytes"},
    "X": {"int", "uint", "string", "bytes"},
    "s": {"list", "map", "int", "uint", "double", "bool", "string", "bytes", "type",
          "null_type", "google.protobuf.Timestamp", "google.protobuf.Duration"},
}  # fmt: skip
_WHAT = {
    "d": "decimal clause can only be used on integers",
    "o": "octal clause can only be used on integers",
    "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "b": "only integers and bools can be formatted as binary",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "X": "only integers, byte buffers, and strings can be formatted as hex",
    "s": "string clause can only be used on strings, bools, bytes, ints, doubles, maps, "
    "lists, types, durations, and timestamps",
}


def template_problem(template: str, args: list[ast.Node]) -> tuple[str, ast.Node | None] | None:
    """Why `template.format([args...])` cannot work, from the arguments' static types, and
    the argument to blame (None: the call); None when it can."""
    used = 0
    i = 0
    try:
        while i < len(template):
            if template[i] != "%" or template[i + 1 : i + 2] == "%":
                i += 1 if template[i] != "%" else 2
                continue
            _, i = _precision(template, i + 1)
            verb = template[i]
            if verb not in _ACCEPTS:
                raise _parse_error(f'unrecognized formatting clause "{verb}"')
            if used >= len(args):
                return f"index {used} out of range", None
            bad = _unfit(verb, args[used])
            if bad is not None:
                kind = _type_name(bad.typ)
                return f"error during formatting: {_WHAT[verb]}, was given {kind}", bad
            used += 1
            i += 1
    except CelEvalError as exc:
        return str(exc), None
    if len(args) > used:
        return (
            f"too many arguments supplied to string.format (expected {used}, got {len(args)})",
            None,
        )
    return None


def _unfit(verb: str, node: ast.Node) -> ast.Node | None:
    """The (nested, for %s) argument whose type the clause cannot print, if any."""
    t = node.typ
    if t is None or t.name == "dyn":
        return None
    if t.name not in _ACCEPTS[verb]:
        return node
    if verb == "s" and isinstance(node, ast.ListLit):
        return next((b for e in node.elements if (b := _unfit(verb, e)) is not None), None)
    if verb == "s" and isinstance(node, ast.MapLit):
        parts = [p for k, v, _ in node.entries for p in (k, v)]
        return next((b for e in parts if (b := _unfit(verb, e)) is not None), None)
    return None


def _type_name(t: object) -> str:
    name = getattr(t, "name", "dyn")
    return "google.protobuf.Any" if name == "any" else str(name)
