"""Runtime helpers used by compiled closures: indexing, field access, iteration, dispatch."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Final

from kubedra.api.quantity import Quantity
from kubedra.api.semver import Semver
from kubedra.cel.errors import CelEvalError, CostLimitExceeded
from kubedra.cel.ip_lib import CIDRPrefix, IPAddress
from kubedra.cel.types import Type
from kubedra.cel.values import (
    MISSING,
    CelMap,
    CelType,
    Optional,
    UInt,
    go_text,
    map_find,
    no_such_key,
    no_such_overload,
    type_name,
)  # fmt: skip

COST_LIMIT: Final = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost (DRA's runtime limit)
# Size guards, checked before a result is built, whether or not cost is tracked: a string
# longer than this costs more than the whole budget to traverse once (0.1 a character), a
# list longer than this more than the budget to allocate (1 an element, cel-go's
# lists.range maximum). Nothing within the limit can need a bigger one.
MAX_STRING_SIZE: Final = 10 * COST_LIMIT
MAX_LIST_SIZE: Final = COST_LIMIT


class DomainMap(dict[str, dict[str, object]]):
    """`device.attributes` / `device.capacity`: an unknown domain reads as an empty map."""

    __slots__ = ()

    def __missing__(self, key: str) -> dict[str, object]:
        return EMPTY


EMPTY: Final[dict[str, object]] = {}
LIST_TYPES: Final = (list, tuple)
MAP_TYPES: Final = (dict, DomainMap, CelMap)

_SCALARS: dict[str, tuple[type, ...]] = {
    "int": (int,), "uint": (UInt,), "double": (float,), "string": (str,), "bytes": (bytes,),
    "bool": (bool,), "null_type": (type(None),), "type": (CelType,), "list": LIST_TYPES,
    "map": MAP_TYPES, "optional_type": (Optional,), "kubernetes.Quantity": (Quantity,),
    "kubernetes.Semver": (Semver,), "net.IP": (IPAddress,), "net.CIDR": (CIDRPrefix,),
}  # fmt: skip


def python_types(t: Type) -> tuple[type, ...] | None:
    """Python classes a value of static type `t` may have; None when anything goes."""
    return _SCALARS.get(t.name)


def index(container: object, key: object) -> object:
    """`container[key]` for lists and maps, with CEL's errors."""
    if isinstance(container, LIST_TYPES):
        return _list_index(container, key)
    if isinstance(container, Mapping):
        return map_get(container, key)
    raise no_such_overload("_[_]", container, key)


# cel-go indexes through qualifiers, which only strings, numbers and bools can be: any other
# key fails ("invalid qualifier type"), at planning when constant, else when evaluated, even
# where the map has such a key (`in` still finds it). The Go types named are cel-go's.
_QUALIFIER_KINDS: Final = (str, int, UInt, bool, float)
_GO_QUALIFIER_TYPES: Final = {
    "null_type": "types.Null", "bytes": "types.Bytes", "list": "*types.baseList",
    "map": "*types.baseMap", "type": "*types.Type", "optional_type": "*types.Optional",
}  # fmt: skip


def check_qualifier(key: object) -> None:
    if type(key) not in _QUALIFIER_KINDS:
        name = type_name(key)
        go = _GO_QUALIFIER_TYPES.get(name, _GO_NAMES.get(name, name))
        raise CelEvalError(f"invalid qualifier type: {go}")


def _list_index(items: list[object] | tuple[object, ...], key: object) -> object:
    kind = type(key)
    if kind is float and _whole(key):  # type: ignore[arg-type]
        key = int(key)  # type: ignore[call-overload]
    elif kind not in (int, UInt):
        raise no_such_overload("_[_]", items, key)
    position: int = key  # type: ignore[assignment]
    if 0 <= position < len(items):
        return items[position]
    raise CelEvalError(f"index out of bounds: {position}")


def map_get(mapping: Mapping[object, object], key: object) -> object:
    """`m[key]` with cel-go's key rules (`map_find`): `{true: 1}[1]` is no such key."""
    check_qualifier(key)
    found = map_find(mapping, key)
    if found is MISSING:
        if type(mapping) is DomainMap and type(key) is str:
            return EMPTY  # an unknown domain reads as an empty map
        raise no_such_key(key)
    return found


def select(operand: object, name: str) -> object:
    """Field selection on a dynamically typed value (maps only in a DRA selector)."""
    if isinstance(operand, Mapping):
        try:
            return operand[name]
        except KeyError:
            raise no_such_key(name) from None
    if type(operand) is Optional:
        return select_optional(operand, name)
    raise CelEvalError(f"type '{type_name(operand)}' does not support field selection")


# Qualifying under a presence test (optional chaining `x.?f`, `x[?k]`, and has()) follows
# cel-go's attribute qualification: a map answers whether it has the key, a list whether
# the index is in range (an index of the wrong kind is still an error), and any other
# value (a number, a string, null) has nothing: absent, where plain selection would fail.


def select_optional(operand: object, name: str) -> Optional:
    """`x.?name`: an optional that is empty when `x` or its field is absent."""
    if type(operand) is Optional:
        if not operand.present:
            return Optional.NONE
        operand = operand.value
    if isinstance(operand, Mapping):
        return Optional(operand[name]) if name in operand else Optional.NONE
    if isinstance(operand, LIST_TYPES):
        raise _list_index_error(name)
    return Optional.NONE


def index_optional(container: object, key: object) -> Optional:
    """`x[?key]`: an optional that is empty when the key/index is absent."""
    if type(container) is Optional:
        if not container.present:
            return Optional.NONE
        container = container.value
    if isinstance(container, Mapping):
        check_qualifier(key)
        try:
            return Optional(index(container, key))
        except CelEvalError:
            return Optional.NONE
    if isinstance(container, LIST_TYPES):
        position = _list_position(key)
        in_range = 0 <= position < len(container)
        return Optional(container[position]) if in_range else Optional.NONE
    return Optional.NONE


def has_field(operand: object, name: str) -> bool:
    if type(operand) is Optional:  # has(a.?b.c): false when the chain is already empty
        return operand.present and has_field(operand.value, name)
    if isinstance(operand, Mapping):
        return name in operand
    if isinstance(operand, LIST_TYPES):
        raise _list_index_error(name)
    return False


def _list_position(key: object) -> int:
    """A list index under a presence test: an int, a uint, or a whole double."""
    if isinstance(key, float) and _whole(key):
        return int(key)
    if isinstance(key, int) and type(key) is not bool:
        return int(key)
    raise _list_index_error(key)


def _whole(value: float) -> bool:
    return math.isfinite(value) and value == int(value)


def _list_index_error(key: object) -> CelEvalError:
    if type(key) is float:
        return CelEvalError(f"unsupported index value {go_text(key)} in list")
    return CelEvalError(f"unsupported index type '{type_name(key)}' in list")


_GO_NAMES = {"int": "types.Int", "uint": "types.Uint", "double": "types.Double",
             "bool": "types.Bool", "string": "types.String", "bytes": "types.Bytes",
             "null_type": "types.Null", "kubernetes.Semver": "cel.Semver",
             "kubernetes.Quantity": "cel.Quantity", "net.IP": "cel.IP", "net.CIDR": "cel.CIDR",
             "kubernetes.URL": "cel.URL"}  # fmt: skip


def iterate(value: object) -> Iterable[object]:
    """Comprehension range: list elements or map keys."""
    if isinstance(value, list | tuple | Mapping):
        return value
    name = type_name(value)
    raise CelEvalError(f"got '{_GO_NAMES.get(name, name)}', expected iterable type")


def as_bool_error(value: object) -> CelEvalError:
    """A macro predicate produced a non-bool value."""
    return no_such_overload("_&&_", value)


def cost_limit_exceeded(detail: str) -> CostLimitExceeded:
    return CostLimitExceeded(f"operation cancelled: actual cost limit exceeded: {detail}")


def guard_string(size: int, function: str) -> None:
    """Refuse to build a string the cost budget could never pay for."""
    if size > MAX_STRING_SIZE:
        raise cost_limit_exceeded(f"{function} would build a string of {size:,} characters")


def guard_list(size: int, function: str) -> None:
    """Refuse to build a list the cost budget could never pay for."""
    if size > MAX_LIST_SIZE:
        raise cost_limit_exceeded(f"{function} would build a list of {size:,} elements")


def charge(frame: list[object], amount: int) -> None:
    """Add to the evaluation's actual cost; stop the evaluation past the limit."""
    spent = frame[1] + amount  # type: ignore[operator]
    frame[1] = spent
    if spent > COST_LIMIT:
        raise CostLimitExceeded("operation cancelled: actual cost limit exceeded")
