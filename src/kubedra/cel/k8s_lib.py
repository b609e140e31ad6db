"""Kubernetes CEL libraries: Quantity, Semver (v1), k8s Lists, Regex (find/findAll), and
DRA's `includes()`. Semantics follow k8s.io/apiserver/pkg/cel/library."""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.api.quantity import Quantity, QuantityError
from kubedra.api.semver import Semver, SemverError, is_valid_semver
from kubedra.cel.errors import CelEvalError
from kubedra.cel.registry import Library
from kubedra.cel.stdlib import compile_regex
from kubedra.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    QUANTITY,
    SEMVER,
    STRING,
    UINT,
    A,
    Type,
    list_of,
)  # fmt: skip
from kubedra.cel.values import (
    UInt,
    cel_compare,
    cel_equal,
    check_int,
    check_uint,
    comparable,
)

MAX_INCLUDES_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice


# -- Quantity ------------------------------------------------------------------------------
def parse_quantity(text: str) -> Quantity:
    try:
        return Quantity.parse(text)
    except QuantityError as exc:
        raise CelEvalError(str(exc)) from None


def is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except QuantityError:
        return False
    return True


def _as_quantity(value: Quantity | int) -> Quantity:
    return value if isinstance(value, Quantity) else Quantity.from_int(value)


def quantity_add(q: Quantity, other: Quantity | int) -> Quantity:
    return q.add(_as_quantity(other))


def quantity_sub(q: Quantity, other: Quantity | int) -> Quantity:
    return q.sub(_as_quantity(other))


def quantity_as_integer(q: Quantity) -> int:
    try:
        return q.as_integer()
    except QuantityError as exc:
        raise CelEvalError(str(exc)) from None


def _add_quantity(lib: Library) -> None:
    q = QUANTITY
    lib.add("quantity", (STRING,), q, parse_quantity)
    lib.add("isQuantity", (STRING,), BOOL, is_quantity)
    for name, impl in (("add", quantity_add), ("sub", quantity_sub)):
        lib.add(name, (q, q), q, impl, member=True)
        lib.add(name, (q, INT), q, impl, member=True)
    lib.add("sign", (q,), INT, Quantity.sign)  # a global function upstream: sign(q)
    lib.add("isInteger", (q,), BOOL, Quantity.is_integer, member=True)
    lib.add("asInteger", (q,), INT, quantity_as_integer, member=True)
    lib.add("asApproximateFloat", (q,), DOUBLE, Quantity.as_approximate_float, member=True)
    _add_ordering(lib, q, Quantity.compare)


def _add_ordering(lib: Library, t: Type, compare: object) -> None:
    """isGreaterThan / isLessThan / compareTo for an ordered opaque type."""
    assert callable(compare)
    lib.add("isGreaterThan", (t, t), BOOL, lambda a, b: compare(a, b) > 0, member=True)
    lib.add("isLessThan", (t, t), BOOL, lambda a, b: compare(a, b) < 0, member=True)
    lib.add("compareTo", (t, t), INT, compare, member=True)


# -- Semver --------------------------------------------------------------------------------
def parse_semver(text: str, normalize: bool = False) -> Semver:
    try:
        return Semver.parse(text, normalize=normalize)
    except SemverError as exc:
        raise CelEvalError(str(exc)) from None


def is_semver(text: str, normalize: bool = False) -> bool:
    if not normalize:
        return is_valid_semver(text)
    try:
        Semver.parse(text, normalize=True)
    except SemverError:
        return False
    return True


def _add_semver(lib: Library) -> None:
    v = SEMVER
    lib.add("semver", (STRING,), v, parse_semver)
    lib.add("semver", (STRING, BOOL), v, parse_semver)
    lib.add("isSemver", (STRING,), BOOL, is_semver)
    lib.add("isSemver", (STRING, BOOL), BOOL, is_semver)
    lib.add("major", (v,), INT, lambda s: s.major, member=True)
    lib.add("minor", (v,), INT, lambda s: s.minor, member=True)
    lib.add("patch", (v,), INT, lambda s: s.patch, member=True)
    _add_ordering(lib, v, Semver.compare)


# -- k8s Lists -------------------------------------------------------------------------------
_COMPARABLE = (INT, UINT, DOUBLE, STRING, BYTES, BOOL)


def _nonempty(items: Sequence[object], what: str) -> None:
    if not items:
        raise CelEvalError(f"{what} called on empty list")


# isSorted, min and max walk the list as Kubernetes' library does: each element must be
# orderable at all, and a comparison cel-go answers with an error (a bool against an int,
# in a dyn list) neither breaks the order nor replaces the extreme found so far.


def _orderable(item: object) -> object:
    if not comparable(item):
        raise CelEvalError("no such overload")
    return item


def is_sorted(items: Sequence[object]) -> bool:
    previous: object = _MISSING
    for item in items:
        _orderable(item)
        if previous is not _MISSING and cel_compare(previous, item) == 1:
            return False
        previous = item
    return True


def _extreme(items: Sequence[object], what: str, replace_when: int) -> object:
    _nonempty(items, what)
    result = _orderable(items[0])
    for item in items[1:]:
        if cel_compare(result, _orderable(item)) == replace_when:
            result = item
    return result


def list_min(items: Sequence[object]) -> object:
    return _extreme(items, "min", 1)


def list_max(items: Sequence[object]) -> object:
    return _extreme(items, "max", -1)


_MISSING = object()


def sum_ints(items: Sequence[int]) -> int:
    total = 0
    for item in items:
        total = check_int(total + item)
    return total


def sum_uints(items: Sequence[int]) -> UInt:
    total = 0
    for item in items:
        total = check_uint(total + item)
    return UInt(total)


def sum_doubles(items: Sequence[float]) -> float:
    return float(sum(items))


def list_index_of(items: Sequence[object], value: object) -> int:
    return next((i for i, x in enumerate(items) if cel_equal(x, value)), -1)


def list_last_index_of(items: Sequence[object], value: object) -> int:
    found = [i for i, x in enumerate(items) if cel_equal(x, value)]
    return found[-1] if found else -1


def _add_lists(lib: Library) -> None:
    for t in _COMPARABLE:
        lt = list_of(t)
        lib.add("isSorted", (lt,), BOOL, is_sorted, member=True)
        lib.add("min", (lt,), t, list_min, member=True)
        lib.add("max", (lt,), t, list_max, member=True)
    for t, impl in ((INT, sum_ints), (UINT, sum_uints), (DOUBLE, sum_doubles)):
        lib.add("sum", (list_of(t),), t, impl, member=True)
    lib.add("indexOf", (list_of(A), A), INT, list_index_of, member=True)
    lib.add("lastIndexOf", (list_of(A), A), INT, list_last_index_of, member=True)


# -- Regex ---------------------------------------------------------------------------------
def regex_find(text: str, pattern: str) -> str:
    match = compile_regex(pattern).search(text)
    return "" if match is None else str(match.group(0))


def regex_find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [str(m.group(0)) for m in compile_regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _add_regex(lib: Library) -> None:
    lib.add("find", (STRING, STRING), STRING, regex_find, member=True)
    lib.add("findAll", (STRING, STRING), list_of(STRING), regex_find_all, member=True)
    lib.add("findAll", (STRING, STRING, INT), list_of(STRING), regex_find_all, member=True)


def kubernetes_library() -> Library:
    lib = Library()
    _add_quantity(lib)
    _add_semver(lib)
    _add_lists(lib)
    _add_regex(lib)
    return lib


# -- DRA includes() (DRAListTypeAttributes) --------------------------------------------------
def includes(attribute: object, value: object) -> bool:
    """True if a list attribute contains `value`, or a scalar attribute equals it."""
    if isinstance(attribute, list | tuple):
        if len(attribute) > MAX_INCLUDES_VALUES:
            raise CelEvalError(
                f"'includes' function cannot be applied to lists longer than "
                f"{MAX_INCLUDES_VALUES} values"
            )
        return any(cel_equal(x, value) for x in attribute)
    return cel_equal(attribute, value)


def includes_library() -> Library:
    lib = Library()
    lib.add("includes", (DYN, DYN), BOOL, includes, member=True)
    return lib
