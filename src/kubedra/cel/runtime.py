"""Runtime helpers used by compiled closures: indexing, field access, iteration, dispatch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from kubedra.api.quantity import Quantity
from kubedra.api.semver import Semver
from kubedra.cel.errors import CelEvalError, CostLimitExceeded
from kubedra.cel.ip_lib import CIDRPrefix, IPAddress
from kubedra.cel.types import Type
from kubedra.cel.values import CelType, Optional, UInt, no_such_key, no_such_overload, type_name

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
MAP_TYPES: Final = (dict, DomainMap)

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


def _list_index(items: list[object] | tuple[object, ...], key: object) -> object:
    kind = type(key)
    if kind is float and key == int(key):  # type: ignore[call-overload]
        key = int(key)  # type: ignore[call-overload]
    elif kind not in (int, UInt):
        raise no_such_overload("_[_]", items, key)
    position: int = key  # type: ignore[assignment]
    if 0 <= position < len(items):
        return items[position]
    raise CelEvalError(f"index out of bounds: {position}")


def map_get(mapping: Mapping[object, object], key: object) -> object:
    if isinstance(key, float) and key == int(key):
        key = int(key)
    try:
        return mapping[key]
    except (KeyError, TypeError):
        raise no_such_key(key) from None


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


def select_optional(operand: object, name: str) -> Optional:
    """`x.?name`: an optional that is empty when `x` or its field is absent."""
    if type(operand) is Optional:
        if not operand.present:
            return Optional.NONE
        operand = operand.value
    if isinstance(operand, Mapping):
        return Optional(operand[name]) if name in operand else Optional.NONE
    raise CelEvalError(f"type '{type_name(operand)}' does not support field selection")


def index_optional(container: object, key: object) -> Optional:
    """`x[?key]`: an optional that is empty when the key/index is absent."""
    if type(container) is Optional:
        if not container.present:
            return Optional.NONE
        container = container.value
    try:
        return Optional(index(container, key))
    except CelEvalError:
        if isinstance(container, list | tuple | Mapping):
            return Optional.NONE
        raise


def has_field(operand: object, name: str) -> bool:
    if type(operand) is Optional:  # has(a.?b.c): false when the chain is already empty
        return operand.present and has_field(operand.value, name)
    if isinstance(operand, Mapping):
        return name in operand
    raise CelEvalError(f"invalid type for field selection: {type_name(operand)}")


_GO_NAMES = {"int": "types.Int", "uint": "types.Uint", "double": "types.Double",
             "bool": "types.Bool", "string": "types.String", "bytes": "types.Bytes",
             "null_type": "types.Null", "kubernetes.Semver": "cel.Semver",
             "kubernetes.Quantity": "cel.Quantity"}  # fmt: skip


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
