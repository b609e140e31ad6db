"""Runtime value model: how CEL values are represented as Python objects.

int -> int, uint -> UInt, double -> float, string -> str, bytes -> bytes, bool -> bool,
null -> None, list -> list/tuple, map -> dict, type -> CelType, optional -> Optional.
Quantity and Semver come from `kubedra.api`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kubedra.cel.errors import CelEvalError

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT64_MAX: Final = (1 << 64) - 1


class UInt(int):
    """A CEL `uint`: distinct from int by type, equal to it by value (heterogeneous ==)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelType:
    """A runtime type value such as `int` or `list`, the result of `type(x)`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("type", self.name))

    def __repr__(self) -> str:
        return self.name


class Optional:
    """A CEL optional value; `Optional.NONE` is the empty one."""

    __slots__ = ("present", "value")
    NONE: Optional

    def __init__(self, value: object, present: bool = True) -> None:
        self.value = value
        self.present = present

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Optional) or other.present != self.present:
            return False
        return not self.present or cel_equal(self.value, other.value)

    def __hash__(self) -> int:
        return hash(("optional", self.present))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


Optional.NONE = Optional(None, present=False)

_NUMERIC: Final = (int, UInt, float)


def type_name(value: object) -> str:
    """The CEL type name of a runtime value (used in messages and by `type()`)."""
    kind = type(value)
    if kind is bool:
        return "bool"
    if kind is int:
        return "int"
    if kind is UInt:
        return "uint"
    if kind is float:
        return "double"
    if kind is str:
        return "string"
    if kind is bytes:
        return "bytes"
    if value is None:
        return "null_type"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    if kind is CelType:
        return "type"
    if kind is Optional:
        return "optional_type"
    return _opaque_name(value)


def _opaque_name(value: object) -> str:
    name = type(value).__name__
    opaque = {
        "Quantity": "kubernetes.Quantity",
        "Semver": "kubernetes.Semver",
        "IPAddress": "net.IP",
        "CIDRPrefix": "net.CIDR",
        "URLValue": "kubernetes.URL",
        "NamedFormat": "kubernetes.NamedFormat",
    }
    return opaque.get(name, name)


_TWO_63: Final = 9223372036854775808.0  # float64(math.MaxInt64) in Go
_TWO_64: Final = 18446744073709551616.0  # float64(math.MaxUint64)


def numeric_compare(a: float, b: float) -> int:
    """cel-go's ordering across int, uint and double: -1, 0 or 1.

    int and uint compare exactly; against a double, an integer in range is converted to a
    double first (so `9223372036854775807 == 9223372036854775808.0`, as in cel-go), and a
    NaN cannot be ordered.
    """
    fa, fb = type(a) is float, type(b) is float
    if fa or fb:
        if a != a or b != b:  # NaN test
            raise CelEvalError("NaN values cannot be ordered")
        if fa and not fb:
            return _double_vs_integer(a, b)
        if fb and not fa:
            return -_double_vs_integer(b, a)
    return (a > b) - (a < b)


def _double_vs_integer(d: float, i: float) -> int:
    low, high = (0.0, _TWO_64) if type(i) is UInt else (-_TWO_63, _TWO_63)
    if d < low:
        return -1
    if d > high:
        return 1
    x = float(i)
    return (d > x) - (d < x)


def cel_equal(a: object, b: object) -> bool:
    """CEL heterogeneous equality: numbers compare by value, other kinds must match."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta in _NUMERIC and tb in _NUMERIC:
        if ta is tb or float not in (ta, tb):
            return a == b  # same kind, or int against uint: exact; NaN != NaN
        if a != a or b != b:  # NaN test
            return False
        return numeric_compare(a, b) == 0  # type: ignore[arg-type]
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and _map_equal(a, b)
    if ta is not tb:
        return False
    return a == b


def _map_equal(a: Mapping[object, object], b: Mapping[object, object]) -> bool:
    if len(a) != len(b):
        return False
    return all(key in b and cel_equal(value, b[key]) for key, value in a.items())


def no_such_overload(function: str, *args: object) -> CelEvalError:
    """The error cel-go reports when no overload fits the runtime argument types (its
    words: neither the function nor the types are named)."""
    return CelEvalError("no such overload")


def no_such_key(key: object) -> CelEvalError:
    return CelEvalError(f"no such key: {key}")


def check_int(value: int) -> int:
    """Enforce int64 range on an arithmetic result."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise CelEvalError("integer overflow")


def check_uint(value: int) -> UInt:
    """Enforce uint64 range on an arithmetic result."""
    if 0 <= value <= UINT64_MAX:
        return UInt(value)
    raise CelEvalError("unsigned integer overflow")
