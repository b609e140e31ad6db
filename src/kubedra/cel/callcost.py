"""Per-call costs of size-dependent functions, for the estimate and for run time.

Upstream charges most calls a nominal 1; the calls listed here cost in proportion to the
size of their arguments (cel-go's checker/cost.go and interpreter/runtimecost.go for the
standard functions, `ext/lists.go` and `ext/sets.go` for the list and set extensions,
Kubernetes' `library/cost.go` for strings, regex, lists, quantity, semver, IP and CIDR).

Each function has a static rule (the worst case from size bounds and literal arguments,
with a bound on the result's size) and a run-time rule (from the actual arguments, before
the call, so a call the budget cannot pay for is never started). The estimator uses the
static rules; the compiler charges the run-time rules only where it tracks cost at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kubedra.cel.named_format import MAX_REGEX_SIZE, validate_cost
from kubedra.cel.values import Optional

TRAVERSAL = 0.1  # common.StringTraversalCostFactor
REGEX_LENGTH = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE = 10  # common.ListCreateBaseCost
MAP_CREATE = 30  # common.MapCreateBaseCost
UNBOUNDED = (1 << 64) - 1  # an unknown size, as cel-go's math.MaxUint64


def ceil(x: float) -> int:
    return math.ceil(x)


def scan(size: int) -> int:
    """Cost of traversing a string of `size` characters once (MultiplyByCostFactor)."""
    return ceil(TRAVERSAL * size)


def regex(text: int, pattern: int) -> int:
    """RE2 matching: the text (plus one) times a quarter of the pattern length."""
    return ceil((1 + text) * TRAVERSAL) * ceil(pattern * REGEX_LENGTH)


def allocating_list(factor: float, size: int, *, actual: bool = False) -> int:
    """cel-go ext.Lists: a result list of `size` elements, plus dispatch and allocation
    (the estimate rounds up, the run-time tracker down, as cel-go's do)."""
    scaled = math.floor(size * factor) if actual else ceil(size * factor)
    return scaled + 1 + LIST_CREATE


@dataclass(frozen=True, slots=True)
class Static:
    """Worst case of one call: its own cost and a bound on the size of its result."""

    cost: int
    size: int | None = None  # None: the estimator's default rule for the result's size
    elem: int | None = None  # for lists: a bound on each element's size


Sizes = list[int]
Literals = list[object]
StaticRule = Callable[[Sizes, Literals], Static]
RuntimeRule = Callable[[list[object]], int]


def actual_size(value: object) -> int:
    """cel-go's actualSize: the length of sized values (a present optional's value), else 1."""
    if isinstance(value, str | bytes | list | tuple | Mapping):
        return len(value)
    if type(value) is Optional and value.present:
        return actual_size(value.value)
    return 1


def traversal(value: object) -> int:
    """k8s traversalCost: a walk over a whole value tree (strings count a tenth a char)."""
    if isinstance(value, str | bytes):
        return math.floor(len(value) * TRAVERSAL)
    if isinstance(value, list | tuple):
        return sum(traversal(v) for v in value)
    if isinstance(value, Mapping):
        return sum(traversal(k) + traversal(v) for k, v in value.items())
    return 1


def _literal_int(value: object, default: int) -> int:
    """cel-go's nodeAsUintValue: a non-negative int literal, else the default."""
    if type(value) is int:
        return max(value, 0)
    return default


# -- static rules ----------------------------------------------------------------------
def _replace(s: Sizes, lit: Literals) -> Static:
    """k8s library: the longest result replaces the shortest matches with the longest
    replacement as often as possible (an empty pattern surrounds every character)."""
    text, old, new = s[0], _min_size(lit[1], s[1]), s[2]
    if old == 0:
        size = (text + 1) * new + text
    elif new <= old:
        size = text
    else:
        size = ceil(text / old) * new
    return Static(ceil(text * 2 * TRAVERSAL), size)


def _min_size(literal: object, size: int) -> int:
    """The smallest size an argument can have: exact for a literal, else 0."""
    return len(literal) if isinstance(literal, str) else 0


def _split(s: Sizes, lit: Literals) -> Static:
    parts = _literal_int(lit[2], s[0]) if len(lit) > 2 and lit[2] is not None else s[0]
    return Static(ceil(s[0] * 2 * TRAVERSAL), parts, s[0])


def _join(s: Sizes, lit: Literals, elem: int) -> Static:
    size = min(s[0] * elem, UNBOUNDED) + (s[1] * max(s[0] - 1, 0) if len(s) > 1 else 0)
    return Static(scan(size), size)


def _list_traversal(s: Sizes, elem: int | None) -> Static:
    """isSorted/sum/min/max/indexOf/lastIndexOf/includes over a list: one comparison per
    element, plus a string scan per element of a string list."""
    per_element = 1 + (scan(elem) if elem is not None else 0)
    return Static(s[0] * per_element)


def _slice(s: Sizes, lit: Literals) -> Static:
    start = _literal_int(lit[1], 0)
    end = _literal_int(lit[2], s[0])
    size = max(end - start, 0)
    return Static(allocating_list(1, size), size)


def _flatten(s: Sizes, lit: Literals) -> Static:
    depth = _literal_int(lit[1], UNBOUNDED) if len(lit) > 1 else 1
    return Static(allocating_list(depth, s[0]), s[0])


def _range(s: Sizes, lit: Literals) -> Static:
    size = _literal_int(lit[0], UNBOUNDED)
    return Static(allocating_list(1, size), size)


def _self_compare(factor: float) -> StaticRule:
    return lambda s, lit: Static(allocating_list(factor, s[0] * s[0]), s[0] * s[0])


def _sets(factor: int) -> StaticRule:
    return lambda s, lit: Static(s[0] * s[1] * factor + 1)


def _scan_first(s: Sizes, lit: Literals) -> Static:
    return Static(scan(s[0]))


def _same_size(s: Sizes, lit: Literals) -> Static:
    return Static(scan(s[0]), s[0])


# URL accessors cost 1; upstream gives their results no size (unknown).
_URL_ACCESSORS = ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery")


def _unsized(s: Sizes, lit: Literals) -> Static:
    return Static(1, UNBOUNDED)


def _regex_rule(s: Sizes, lit: Literals) -> Static:
    return Static(regex(s[0], s[1]), s[0])


STATIC: dict[str, StaticRule] = {
    "startsWith": lambda s, lit: Static(scan(s[1])),
    "endsWith": lambda s, lit: Static(scan(s[1])),
    "contains": lambda s, lit: Static(scan(s[0]) * scan(s[1])),
    "matches": lambda s, lit: Static(regex(s[0], s[1])),
    "find": _regex_rule,
    "findAll": _regex_rule,
    "@in": lambda s, lit: Static(s[1]),
    "strings.quote": lambda s, lit: Static(scan(s[0]), s[0] * 2 + 2),
    "format": lambda s, lit: Static(scan(s[0]), UNBOUNDED),
    "lowerAscii": _same_size,
    "upperAscii": _same_size,
    "substring": _same_size,
    "trim": _same_size,
    "indexOf": _scan_first,
    "lastIndexOf": _scan_first,
    "replace": _replace,
    "split": _split,
    "quantity": _scan_first,
    "isQuantity": _scan_first,
    "semver": _scan_first,
    "isSemver": _scan_first,
    "ip": _scan_first,
    "isIP": _scan_first,
    "cidr": _scan_first,
    "isCIDR": _scan_first,
    "ip.isCanonical": lambda s, lit: Static(ceil(s[0] * 2 * TRAVERSAL)),
    "url": _same_size,
    # A format's validate: the string scanned against the largest format pattern.
    "validate": lambda s, lit: Static(scan(s[1]) * ceil(MAX_REGEX_SIZE * REGEX_LENGTH)),
    "format.named": lambda s, lit: Static(1),
    **dict.fromkeys(_URL_ACCESSORS, _unsized),
    "slice": _slice,
    "flatten": _flatten,
    "lists.range": _range,
    "reverse": lambda s, lit: Static(allocating_list(1, s[0]), s[0]),
    "distinct": _self_compare(2),
    "sets.contains": _sets(1),
    "sets.intersects": _sets(1),
    "sets.equivalent": _sets(2),
}
# Over lists, these depend on the element type (see `list_call`).
LIST_TRAVERSALS = frozenset(
    {"isSorted", "sum", "min", "max", "indexOf", "lastIndexOf", "includes", "join", "sort"}
)


def list_call(function: str, s: Sizes, lit: Literals, elem: int | None) -> Static:
    """Rules for calls on a list target whose cost depends on its elements' type/size;
    `elem` is the element size for string and bytes lists, None for other elements."""
    if function == "join":
        return _join(s, lit, UNBOUNDED if elem is None else elem)
    if function == "sort":
        factor = 2 + (TRAVERSAL if elem is not None else 0)
        return Static(allocating_list(factor, s[0] * s[0]), s[0] * s[0])
    return _list_traversal(s, elem)


def containment(function: str, text: int | None) -> int:
    """k8s library: comparing two 4- or 16-byte addresses (containsCIDR also masks), plus
    parsing the argument when it is a string of `text` characters."""
    cost = scan(16 + 16)
    if function == "containsCIDR":
        cost += scan(16) + 1
    return cost + (scan(text) if text is not None else 0)


# -- run-time rules (charged before the call, from the actual arguments) ------------------
def _rt_join(v: list[object]) -> int:
    items = v[0]
    assert isinstance(items, list | tuple)
    sep = len(v[1]) if len(v) > 1 and isinstance(v[1], str) else 0
    size = sum(actual_size(x) for x in items) + sep * max(len(items) - 1, 0)
    return ceil(size * 2 * TRAVERSAL)


def _rt_scan(index: int) -> Callable[[list[object]], int]:
    return lambda v: scan(actual_size(v[index]))


def _rt_concat(v: list[object]) -> int:
    if isinstance(v[0], str | bytes):
        return scan(actual_size(v[0]) + actual_size(v[1]))
    return 1  # list concatenation: O(1) in cel-go


def _rt_self_compare(v: list[object]) -> int:
    items = v[0]
    assert isinstance(items, list | tuple)
    factor = 2 + (TRAVERSAL if items and isinstance(items[0], str | bytes) else 0)
    return allocating_list(factor, len(items) * len(items), actual=True)


def _rt_slice(v: list[object]) -> int:
    start, end = v[1], v[2]
    assert isinstance(start, int) and isinstance(end, int)
    return allocating_list(1, max(end - start, 0), actual=True)


def _rt_flatten(v: list[object]) -> int:
    depth = v[1] if len(v) > 1 else 1
    assert isinstance(depth, int)
    return allocating_list(max(depth, 1), actual_size(v[0]), actual=True)


def _rt_range(v: list[object]) -> int:
    n = v[0]
    assert isinstance(n, int)
    return allocating_list(1, max(n, 0), actual=True)


def _rt_list_traversal(v: list[object]) -> int:
    return (
        traversal(v[0])
        if isinstance(v[0], list | tuple)
        else math.floor(actual_size(v[0]) * TRAVERSAL)
    )


def _rt_sort(v: list[object]) -> int:
    return _rt_self_compare(v)


RUNTIME: dict[str, RuntimeRule] = {
    "startsWith": _rt_scan(1),
    "endsWith": _rt_scan(1),
    "contains": lambda v: scan(actual_size(v[0])) * scan(actual_size(v[1])),
    "matches": lambda v: regex(actual_size(v[0]), actual_size(v[1])),
    "find": lambda v: regex(actual_size(v[0]), actual_size(v[1])),
    "findAll": lambda v: regex(actual_size(v[0]), actual_size(v[1])),
    "@in": lambda v: actual_size(v[1]) if isinstance(v[1], list | tuple) else 1,
    "_+_": _rt_concat,
    "bytes": lambda v: scan(actual_size(v[0])) if isinstance(v[0], str) else 1,
    "string": lambda v: scan(actual_size(v[0])) if isinstance(v[0], bytes) else 1,
    "strings.quote": _rt_scan(0),
    "format": _rt_scan(0),
    "lowerAscii": _rt_scan(0),
    "upperAscii": _rt_scan(0),
    "substring": _rt_scan(0),
    "trim": _rt_scan(0),
    "replace": lambda v: ceil(actual_size(v[0]) * 2 * TRAVERSAL),
    "split": lambda v: ceil(actual_size(v[0]) * 2 * TRAVERSAL),
    "join": _rt_join,
    "isSorted": _rt_list_traversal,
    "sum": _rt_list_traversal,
    "min": _rt_list_traversal,
    "max": _rt_list_traversal,
    "indexOf": _rt_list_traversal,
    "lastIndexOf": _rt_list_traversal,
    "includes": _rt_list_traversal,
    "quantity": _rt_scan(0),
    "isQuantity": _rt_scan(0),
    "semver": _rt_scan(0),
    "isSemver": _rt_scan(0),
    "ip": lambda v: scan(actual_size(v[0])) if isinstance(v[0], str) else 1,
    "isIP": _rt_scan(0),
    "cidr": _rt_scan(0),
    "isCIDR": _rt_scan(0),
    "ip.isCanonical": lambda v: ceil(actual_size(v[0]) * 2 * TRAVERSAL),
    "containsIP": lambda v: scan(2) + (scan(len(v[1])) if isinstance(v[1], str) else 0),
    "containsCIDR": lambda v: (
        scan(2) + scan(1) + 1 + (scan(len(v[1])) if isinstance(v[1], str) else 0)
    ),
    "url": _rt_scan(0),
    "validate": lambda v: validate_cost(v[0], v[1]),
    "format.named": lambda v: 1,
    "slice": _rt_slice,
    "flatten": _rt_flatten,
    "lists.range": _rt_range,
    "reverse": lambda v: allocating_list(1, actual_size(v[0]), actual=True),
    "distinct": _rt_self_compare,
    "sort": _rt_sort,
    "sets.contains": lambda v: 1 + actual_size(v[0]) * actual_size(v[1]),
    "sets.intersects": lambda v: 1 + actual_size(v[0]) * actual_size(v[1]),
    "sets.equivalent": lambda v: 1 + 2 * actual_size(v[0]) * actual_size(v[1]),
}
