"""cel-go `ext.Lists` (v3: slice, flatten, distinct, range, reverse, sort; sortBy is a
macro), `ext.Sets`, and the optional-type functions (cel.OptionalTypes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubedra.cel.errors import CelEvalError
from kubedra.cel.registry import Library
from kubedra.cel.runtime import guard_list
from kubedra.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    STRING,
    UINT,
    A,
    list_of,
    optional_of,
)  # fmt: skip
from kubedra.cel.values import Optional, cel_equal, comparable, type_name


def list_slice(items: Sequence[object], start: int, end: int) -> list[object]:
    if start < 0 or end < 0:
        raise CelEvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise CelEvalError(f"cannot slice({start}, {end}), start index must be less than or "
                           "equal to end index")  # fmt: skip
    if end > len(items):
        raise CelEvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return list(items[start:end])


def flatten(items: Sequence[object], depth: int = 1) -> list[object]:
    if depth < 0:
        raise CelEvalError("level must be non-negative")
    out: list[object] = []
    _flatten_into(out, items, depth)
    return out


def _flatten_into(out: list[object], items: Sequence[object], depth: int) -> None:
    """Values are at most MAX_TREE_HEIGHT deep, so the recursion is bounded; a list that
    repeats one list many times could still multiply its size, hence the guard."""
    for item in items:
        if isinstance(item, list | tuple) and depth > 0:
            _flatten_into(out, item, depth - 1)
        else:
            out.append(item)
        guard_list(len(out), "flatten")


def distinct(items: Sequence[object]) -> list[object]:
    out: list[object] = []
    for item in items:
        if not any(cel_equal(item, seen) for seen in out):
            out.append(item)
    return out


def reverse(items: Sequence[object]) -> list[object]:
    return list(reversed(items))


def sort_list(items: Sequence[object]) -> list[object]:
    return sort_by_keys(items, items)


def sort_by_keys(items: Sequence[object], keys: Sequence[object]) -> list[object]:
    """cel-go's sort of `items` by `keys` (sort() and sortBy()): the keys must be orderable
    and all of the first one's type (an int and a uint do not mix here, as they do in
    comparisons)."""
    if not keys:
        return list(items)
    if not comparable(keys[0]):
        raise CelEvalError("list elements must be comparable")
    kind = type(keys[0])
    if any(type(k) is not kind for k in keys):
        raise CelEvalError("list elements must have the same type")
    order = sorted(range(len(keys)), key=keys.__getitem__)  # type: ignore[arg-type]
    return [items[i] for i in order]


MAX_RANGE_SIZE = 1_000_000  # cel-go ext.Lists defaultMaxRangeSize


def list_range(n: int) -> list[int]:
    if n < 0:
        raise CelEvalError(f"lists.range: size must be non-negative, got {n}")
    if n > MAX_RANGE_SIZE:
        raise CelEvalError(f"lists.range: size {n} exceeds maximum allowed ({MAX_RANGE_SIZE})")
    return list(range(n))


def sets_contains(items: Sequence[object], sub: Sequence[object]) -> bool:
    return all(any(cel_equal(x, y) for y in items) for x in sub)


def sets_equivalent(a: Sequence[object], b: Sequence[object]) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: Sequence[object], b: Sequence[object]) -> bool:
    return any(any(cel_equal(x, y) for y in b) for x in a)


def list_extensions() -> Library:
    lib = Library()
    la = list_of(A)
    lib.add("slice", (la, INT, INT), la, list_slice, member=True)
    lib.add("flatten", (list_of(la),), la, flatten, member=True)
    lib.add("flatten", (list_of(DYN), INT), list_of(DYN), flatten, member=True)
    lib.add("distinct", (la,), la, distinct, member=True)
    lib.add("reverse", (la,), la, reverse, member=True)
    for t in (INT, UINT, DOUBLE, STRING, BYTES, BOOL):
        lib.add("sort", (list_of(t),), list_of(t), sort_list, member=True)
    lib.add("lists.range", (INT,), list_of(INT), list_range)
    for name, impl in (("sets.contains", sets_contains), ("sets.equivalent", sets_equivalent),
                       ("sets.intersects", sets_intersects)):  # fmt: skip
        lib.add(name, (la, la), BOOL, impl)
    return lib


# -- optional types ---------------------------------------------------------------------------
def optional_value(opt: Optional) -> object:
    if not opt.present:
        raise CelEvalError("optional.none() dereference")
    return opt.value


_ZEROABLE = (bool, int, float, str, bytes, list, tuple, Mapping)


def _is_zero(value: object) -> bool:
    """The zero value of its type (null, false, 0, "", empty aggregate)."""
    if value is None or isinstance(value, _ZEROABLE):
        return not value
    return False


def optional_library() -> Library:
    lib = Library()
    oa = optional_of(A)
    lib.add("optional.of", (A,), oa, Optional)
    lib.add("optional.ofNonZeroValue", (A,), oa,
            lambda v: Optional.NONE if _is_zero(v) else Optional(v))  # fmt: skip
    lib.add("optional.none", (), oa, lambda: Optional.NONE)
    lib.add("hasValue", (oa,), BOOL, lambda o: o.present, member=True)
    lib.add("value", (oa,), A, optional_value, member=True)
    lib.add("orValue", (oa, A), A, lambda o, v: o.value if o.present else v, member=True)
    lib.add("or", (oa, oa), oa, lambda o, p: o if o.present else p, member=True)
    lib.add("optional.unwrap", (list_of(oa),), list_of(A), unwrap)
    lib.add("unwrapOpt", (list_of(oa),), list_of(A), unwrap, member=True)
    lib.add("first", (list_of(A),), oa, lambda xs: Optional(xs[0]) if xs else Optional.NONE,
            member=True)  # fmt: skip
    lib.add("last", (list_of(A),), oa, lambda xs: Optional(xs[-1]) if xs else Optional.NONE,
            member=True)  # fmt: skip
    return lib


def unwrap(items: Sequence[object]) -> list[object]:
    """The values of the present optionals of a list, in order."""
    out: list[object] = []
    for item in items:
        if type(item) is not Optional:
            raise CelEvalError(f"value of type {type_name(item)} is not an optional")
        if item.present:
            out.append(item.value)
    return out
