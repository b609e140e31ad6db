"""The CEL standard library: operators, conversions, size, string predicates, regex."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import lru_cache

import re2  # type: ignore[import-untyped,unused-ignore]

from kubedra.cel.errors import CelEvalError
from kubedra.cel.registry import Library
from kubedra.cel.runtime import guard_list, guard_string
from kubedra.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    NULL,
    STRING,
    TYPE,
    UINT,
    A,
    B,
    Type,
    list_of,
    map_of,
    optional_of,
)  # fmt: skip
from kubedra.cel.types import type_of as type_of_type
from kubedra.cel.values import (
    INT64_MAX,
    INT64_MIN,
    MISSING,
    UINT64_MAX,
    CelType,
    UInt,
    cel_equal,
    check_int,
    check_uint,
    map_find,
    numeric_compare,
    type_name,
)  # fmt: skip

NUMERIC = (INT, UINT, DOUBLE)


# -- arithmetic (int64/uint64 overflow and zero-division are errors, doubles follow IEEE) --
def int_div(a: int, b: int) -> int:
    if b == 0:
        raise CelEvalError("division by zero")
    q = abs(a) // abs(b)
    return check_int(q if (a < 0) == (b < 0) else -q)


def int_mod(a: int, b: int) -> int:
    if b == 0:
        raise CelEvalError("modulus by zero")
    if a == INT64_MIN and b == -1:
        raise CelEvalError("integer overflow")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def uint_div(a: int, b: int) -> UInt:
    if b == 0:
        raise CelEvalError("division by zero")
    return UInt(a // b)


def uint_mod(a: int, b: int) -> UInt:
    if b == 0:
        raise CelEvalError("modulus by zero")
    return UInt(a % b)


def double_div(a: float, b: float) -> float:
    if b != 0:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _int_op(op: Callable[[int, int], int]) -> Callable[[int, int], int]:
    return lambda a, b: check_int(op(a, b))


def _uint_op(op: Callable[[int, int], int]) -> Callable[[int, int], UInt]:
    return lambda a, b: check_uint(op(a, b))


def concat(a: str, b: str) -> str:
    guard_string(len(a) + len(b), "_+_")
    return a + b


def concat_lists(a: list[object], b: list[object]) -> list[object]:
    guard_list(len(a) + len(b), "_+_")
    return [*a, *b]


def _add_arithmetic(lib: Library) -> None:
    for name, op in (("_+_", operator.add), ("_-_", operator.sub), ("_*_", operator.mul)):
        lib.add(name, (INT, INT), INT, _int_op(op))
        lib.add(name, (UINT, UINT), UINT, _uint_op(op))
        lib.add(name, (DOUBLE, DOUBLE), DOUBLE, op)
    lib.add("_+_", (STRING, STRING), STRING, concat)
    lib.add("_+_", (BYTES, BYTES), BYTES, concat)
    lib.add("_+_", (list_of(A), list_of(A)), list_of(A), concat_lists)
    lib.add("_/_", (INT, INT), INT, int_div)
    lib.add("_/_", (UINT, UINT), UINT, uint_div)
    lib.add("_/_", (DOUBLE, DOUBLE), DOUBLE, double_div)
    lib.add("_%_", (INT, INT), INT, int_mod)
    lib.add("_%_", (UINT, UINT), UINT, uint_mod)
    lib.add("-_", (INT,), INT, lambda a: check_int(-a))
    lib.add("-_", (DOUBLE,), DOUBLE, operator.neg)
    lib.add("!_", (BOOL,), BOOL, operator.not_)


# -- comparisons ---------------------------------------------------------------------------
def _add_comparisons(lib: Library) -> None:
    lib.add("_==_", (A, A), BOOL, cel_equal)
    lib.add("_!=_", (A, A), BOOL, lambda a, b: not cel_equal(a, b))
    ops = (("_<_", operator.lt), ("_<=_", operator.le), ("_>_", operator.gt),
           ("_>=_", operator.ge))  # fmt: skip
    for name, op in ops:
        # Cross-type numeric comparisons are enabled in the Kubernetes base environment
        # (1.28), with cel-go's rules (see numeric_compare); int and uint pairs are exact.
        for left in NUMERIC:
            for right in NUMERIC:
                exact = left == right and left != DOUBLE
                lib.add(name, (left, right), BOOL, op if exact else _ordered(op))
        for same in (STRING, BYTES, BOOL):
            lib.add(name, (same, same), BOOL, op)


def _ordered(op: Callable[[int, int], bool]) -> Callable[[float, float], bool]:
    return lambda a, b: op(numeric_compare(a, b), 0)


# -- membership and size ---------------------------------------------------------------------
def list_contains(elem: object, items: list[object] | tuple[object, ...]) -> bool:
    return any(cel_equal(elem, item) for item in items)


def map_contains(key: object, mapping: Mapping[object, object]) -> bool:
    """`key in map`: cel-go's map lookup (`map_find`), never Python's (`1 in {True: 0}`)."""
    return map_find(mapping, key) is not MISSING


def _add_membership(lib: Library) -> None:
    lib.add("@in", (A, list_of(A)), BOOL, list_contains)
    lib.add("@in", (A, map_of(A, B)), BOOL, map_contains)
    for member in (False, True):
        lib.add("size", (STRING,), INT, len, member=member)
        lib.add("size", (BYTES,), INT, len, member=member)
        lib.add("size", (list_of(A),), INT, len, member=member)
        lib.add("size", (map_of(A, B),), INT, len, member=member)


# -- strings and regular expressions ---------------------------------------------------------
# RE2's error texts -> those of Go's regexp/syntax (a port of RE2), which cel-go reports.
_GO_REGEX_ERRORS = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "pattern too large - compile failed": "expression too large",
}
_QUIET = re2.Options()
_QUIET.log_errors = False  # RE2 would log every rejected pattern to stderr


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re2._Regexp:
    """Compile with RE2 semantics (what cel-go uses); errors read as Go's regexp errors."""
    try:
        return re2.compile(pattern, _QUIET)
    except re2.error as exc:
        raise CelEvalError(f"error parsing regexp: {_go_regex_error(exc)}") from None


def _go_regex_error(exc: Exception) -> str:
    """`code: `arg`` as Go formats a syntax.Error, from RE2's `code: arg` bytes."""
    raw = exc.args[0] if exc.args else b""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if text == "trailing \\":
        return "trailing backslash at end of expression: ``"
    code, sep, arg = text.partition(": ")
    return f"{_GO_REGEX_ERRORS.get(code, code)}: `{arg}`" if sep else text


def matches(text: str, pattern: str) -> bool:
    return searcher(pattern)(text)


@lru_cache(maxsize=256)
def searcher(pattern: str) -> Callable[[str], bool]:
    """Whether a pattern occurs in a text (`matches`), for one compiled pattern: RE2's
    unanchored match called directly, without building the Match object (spans converted
    back to str offsets) that `re2.search` builds and `matches` never reads."""
    regexp = compile_regex(pattern)
    low = getattr(regexp, "_regexp", None)
    match = getattr(low, "Match", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if match is None or anchor is None:  # another google-re2 layout: the public API
        return lambda text: regexp.search(text) is not None

    def search(text: str) -> bool:
        data = text.encode("utf-8")
        return bool(match(anchor, data, 0, len(data))[0] != _NO_MATCH)

    return search


_NO_MATCH = (-1, -1)


def _add_strings(lib: Library) -> None:
    lib.add("contains", (STRING, STRING), BOOL, lambda s, t: t in s, member=True)
    lib.add("startsWith", (STRING, STRING), BOOL, str.startswith, member=True)
    lib.add("endsWith", (STRING, STRING), BOOL, str.endswith, member=True)
    lib.add("matches", (STRING, STRING), BOOL, matches, member=True)
    lib.add("matches", (STRING, STRING), BOOL, matches)


# -- conversions -----------------------------------------------------------------------------
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_UINT_TEXT = re.compile(r"\+?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)", re.IGNORECASE
)
_BOOL_TEXT = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
              "0": False, "f": False, "F": False, "FALSE": False, "false": False,
              "False": False}  # fmt: skip


def _conversion_error(target: str) -> CelEvalError:
    """cel-go's message for a string that does not parse as `target` (strconv failed)."""
    return CelEvalError(f"type conversion error from 'string' to '{target}'")


INT_OVERFLOW = "integer overflow"
UINT_OVERFLOW = "unsigned integer overflow"


def string_to_int(text: str) -> int:
    # The length check first: Python's int() refuses more than 4,300 digits.
    if len(text) > 40 or not _INT_TEXT.fullmatch(text):
        raise _conversion_error("int")
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise _conversion_error("int")  # strconv.ParseInt: ErrRange
    return value


def string_to_uint(text: str) -> UInt:
    if len(text) > 40 or not _UINT_TEXT.fullmatch(text):
        raise _conversion_error("uint")
    value = int(text)
    if value > UINT64_MAX:
        raise _conversion_error("uint")
    return UInt(value)


def double_to_int(value: float) -> int:
    # cel-go's doubleToInt64Checked: NaN, infinities and anything at or beyond the int64
    # bounds (as doubles) overflow, so int(-9223372036854775808.0) is an error too.
    if math.isnan(value) or not -9.223372036854775808e18 < value < 9.223372036854775807e18:
        raise CelEvalError(INT_OVERFLOW)
    return int(value)


def double_to_uint(value: float) -> UInt:
    if math.isnan(value) or not 0 <= value < 1.8446744073709552e19:
        raise CelEvalError(UINT_OVERFLOW)
    return UInt(int(value))


def int_to_uint(value: int) -> UInt:
    if value < 0:
        raise CelEvalError(UINT_OVERFLOW)
    return UInt(value)


def uint_to_int(value: int) -> int:
    if value > INT64_MAX:
        raise CelEvalError(INT_OVERFLOW)
    return int(value)


def string_to_double(text: str) -> float:
    if not _FLOAT_TEXT.fullmatch(text):
        raise _conversion_error("double")
    return float(text)


def string_to_bool(text: str) -> bool:
    try:
        return _BOOL_TEXT[text]
    except KeyError:
        raise _conversion_error("bool") from None


def bytes_to_string(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CelEvalError("invalid UTF-8 in bytes, cannot convert to string") from None


def format_double(value: float) -> str:
    """Go's `%g` (strconv 'g', shortest digits): exponent form when the decimal exponent is
    below -4 or at least 6, cel-go's double-to-string conversion."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exp = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits))
    point = len(text) + exp  # position of the decimal point in `text`
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        e = point - 1
        out = f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    elif point <= 0:
        out = "0." + "0" * -point + text
    elif point >= len(text):
        out = text + "0" * (point - len(text))
    else:
        out = text[:point] + "." + text[point:]
    return ("-" if sign else "") + out


def to_string(value: object) -> str:
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is bool:
        return "true" if value else "false"
    if kind is float:
        return format_double(value)  # type: ignore[arg-type]
    if kind is bytes:
        return bytes_to_string(value)  # type: ignore[arg-type]
    return str(int(value))  # type: ignore[call-overload]


def type_of(value: object) -> CelType:
    return CelType(type_name(value))


TYPE_NAMES = ("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type",
              "type", "optional_type")  # fmt: skip


def _add_conversions(lib: Library) -> None:
    lib.add("int", (INT,), INT, lambda v: v)
    lib.add("int", (UINT,), INT, uint_to_int)
    lib.add("int", (DOUBLE,), INT, double_to_int)
    lib.add("int", (STRING,), INT, string_to_int)
    lib.add("uint", (UINT,), UINT, lambda v: v)
    lib.add("uint", (INT,), UINT, int_to_uint)
    lib.add("uint", (DOUBLE,), UINT, double_to_uint)
    lib.add("uint", (STRING,), UINT, string_to_uint)
    lib.add("double", (DOUBLE,), DOUBLE, lambda v: v)
    lib.add("double", (INT,), DOUBLE, float)
    lib.add("double", (UINT,), DOUBLE, float)
    lib.add("double", (STRING,), DOUBLE, string_to_double)
    for source in (STRING, BOOL, INT, UINT, DOUBLE, BYTES):
        lib.add("string", (source,), STRING, to_string)
    lib.add("bytes", (BYTES,), BYTES, lambda v: v)
    lib.add("bytes", (STRING,), BYTES, lambda v: v.encode("utf-8"))
    lib.add("bool", (BOOL,), BOOL, lambda v: v)
    lib.add("bool", (STRING,), BOOL, string_to_bool)
    lib.add("type", (A,), type_of_type(A), type_of)
    lib.add("dyn", (A,), DYN, lambda v: v)
    lib.add("null_type", (NULL,), NULL, lambda v: v)


def standard_library() -> Library:
    """Everything cel-go's standard declarations offer that a DRA selector can use."""
    lib = Library()
    _add_arithmetic(lib)
    _add_comparisons(lib)
    _add_membership(lib)
    _add_strings(lib)
    _add_conversions(lib)
    return lib


_NAMED_TYPES: dict[str, Type] = {
    "int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING, "bytes": BYTES,
    "list": list_of(DYN), "map": map_of(DYN, DYN), "null_type": NULL, "type": TYPE,
    "optional_type": optional_of(DYN),
}  # fmt: skip


def static_type_of_name(name: str) -> Type | None:
    """Type identifiers (`int`, `string`, ...) are values of type `type`."""
    named = _NAMED_TYPES.get(name)
    return None if named is None else type_of_type(named)
