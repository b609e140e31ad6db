"""Runtime value model: how CEL values are represented as Python objects.

int -> int, uint -> UInt, double -> float, string -> str, bytes -> bytes, bool -> bool,
null -> None, list -> list/tuple, map -> dict, type -> CelType, optional -> Optional.
Quantity and Semver come from `kubedra.api`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
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


_ORDERED: Final = (bool, int, UInt, float, str, bytes)


def comparable(value: object) -> bool:
    """Whether cel-go can order the value at all (its traits.Comparer kinds here)."""
    return type(value) in _ORDERED


def cel_compare(a: object, b: object) -> int | None:
    """cel-go's Compare: -1, 0 or 1; None where it answers an error (kinds that do not
    order against each other, such as a bool and an int, or a NaN). Never Python's
    ordering across kinds, where `True < 2`."""
    ta, tb = type(a), type(b)
    if ta in _NUMERIC and tb in _NUMERIC:
        try:
            return numeric_compare(a, b)  # type: ignore[arg-type]
        except CelEvalError:
            return None
    if ta is tb and ta in (bool, str, bytes):
        return int(a > b) - int(a < b)  # type: ignore[operator]
    return None


def cel_equal(a: object, b: object) -> bool:
    """CEL heterogeneous equality: numbers compare by value, other kinds must match.

    Never Python's `==` across kinds: there `True == 1 == 1.0`, in CEL a bool equals only
    a bool. Lists and maps compare element by element with this same function.
    """
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
    """cel-go's map equality: same size, and every key of `a` found in `b` (by `map_find`,
    so with its numeric conversions, which makes the test one-sided: `{1.0: x} == {1: x}`
    but not `{1: x} == {1.0: x}`) with an equal value."""
    if len(a) != len(b):
        return False
    for key, value in a.items():
        other = map_find(b, key)
        if other is MISSING or not cel_equal(value, other):
            return False
    return True


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def key_identity(key: object) -> object:
    """What identifies a CEL map key: its kind and its value.

    In cel-go a map key is a typed value, so `{1: 'a', true: 'b', 1u: 'c', 1.0: 'd'}` has
    four entries. Python would merge them (`True == 1 == 1.0`, equal hashes): every key but
    a string is therefore stored under (its class, itself). Strings collide with nothing.
    A list or map key is itself only (cel-go hashes its pointer): `{[1]: 0}[[1]]` misses.
    """
    kind = type(key)
    if kind is str:
        return key
    if kind is bytes:  # cel-go cannot hash bytes (its map literal panics)
        raise CelEvalError("unsupported map key type: bytes")
    if isinstance(key, list | tuple | Mapping) or not _hashable(key):
        return (kind, id(key))
    return (kind, key)


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


Entries = dict[object, tuple[object, object]]  # key_identity(key) -> (key, value)


class CelMap(Mapping[object, object]):
    """A CEL map with keys that are not all strings (see `key_identity`).

    Maps whose keys are all strings stay plain dicts (the selector's maps, the common
    case): Python's semantics are CEL's there. `new_map` picks the representation.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Entries) -> None:
        self._entries = entries

    def find(self, key: object) -> object:
        """The value under `key` (cel-go's lookup, see `find_entry`), or MISSING."""
        hit = find_entry(self._entries, key)
        return MISSING if hit is None else hit[1]

    def __getitem__(self, key: object) -> object:
        found = self.find(key)
        if found is MISSING:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return self.find(key) is not MISSING

    def __iter__(self) -> Iterator[object]:
        return (key for key, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and _map_equal(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self._entries.values()) + "}"


def find_entry(entries: Entries, key: object) -> tuple[object, object] | None:
    """cel-go's map lookup: the key as it is first; then a double with an integral value
    as an int, then as a uint; an int as a uint; a uint as an int (each only where the
    conversion loses nothing)."""
    try:
        hit = entries.get(key_identity(key))
    except CelEvalError:  # bytes: in no map
        return None
    if hit is not None:
        return hit
    kind = type(key)
    if kind is float:
        whole = _lossless_integer(key)  # type: ignore[arg-type]
        if whole is None:
            return None
        hit = entries.get((int, whole)) if INT64_MIN < whole <= INT64_MAX else None
        if hit is None and 0 <= whole <= UINT64_MAX:
            hit = entries.get((UInt, whole))
        return hit
    if kind is int and key >= 0:  # type: ignore[operator]
        return entries.get((UInt, key))
    if kind is UInt and key <= INT64_MAX:  # type: ignore[operator]
        return entries.get((int, key))
    return None


def _lossless_integer(value: float) -> int | None:
    """The integer a double equals exactly, within uint64/int64 reach; else None."""
    if value != value or not -_TWO_63 <= value < _TWO_64 or value != int(value):
        return None
    return int(value)


class MapBuilder:
    """Entries in order, a later one replacing an earlier one with the same key (cel-go
    builds map literals so: no repeated-key error), then `build` for the map."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: Entries = {}

    def put(self, key: object, value: object) -> None:
        self._entries[key_identity(key)] = (key, value)

    def insert(self, key: object, value: object) -> None:
        """Add a new key; one already there (by lookup, conversions included) is an error,
        as cel-go's mutable map insert in transformMap."""
        if find_entry(self._entries, key) is not None:
            raise CelEvalError(f"insert failed: key {go_text(key)} already exists")
        self.put(key, value)

    def drop(self, key: object) -> None:
        self._entries.pop(key_identity(key), None)

    def build(self) -> Mapping[object, object]:
        entries = self._entries
        if all(type(k) is str for k in entries):
            return {k: v for k, (_, v) in entries.items()}
        return CelMap(entries)


def new_map(pairs: Iterable[tuple[object, object]]) -> Mapping[object, object]:
    """A CEL map of `pairs` (later keys replace earlier equal ones)."""
    builder = MapBuilder()
    for key, value in pairs:
        builder.put(key, value)
    return builder.build()


def map_find(mapping: Mapping[object, object], key: object) -> object:
    """CEL map lookup: the value, or MISSING. A plain dict holds only string keys (see
    `CelMap`), so only a string can be in it."""
    if type(mapping) is CelMap:
        return mapping.find(key)
    if type(key) is not str:
        return MISSING
    return mapping.get(key, MISSING)


def to_cel(value: object) -> object:
    """A Python value as a CEL value: dicts with keys other than strings become CelMaps
    (at any depth), so that no Python dict merges CEL keys (a caller's activation)."""
    if isinstance(value, list | tuple):
        return [to_cel(v) for v in value]
    if isinstance(value, Mapping) and type(value) is not CelMap:
        return new_map((k, to_cel(v)) for k, v in value.items())
    return value


def no_such_overload(function: str, *args: object) -> CelEvalError:
    """The error cel-go reports when no overload fits the runtime argument types (its
    words: neither the function nor the types are named)."""
    return CelEvalError("no such overload")


def no_such_key(key: object) -> CelEvalError:
    return CelEvalError(f"no such key: {go_text(key)}")


def go_text(value: object) -> str:
    """A scalar as Go's %v prints cel-go's value (`true`, `1` for a uint) in messages."""
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is UInt:
        return str(int(value))  # type: ignore[call-overload]
    if isinstance(value, float):
        return _go_double(value)
    return str(value)


def _go_double(value: float) -> str:
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if _lossless_integer(value) is not None:
        return ("-" if math.copysign(1.0, value) < 0 else "") + str(abs(int(value)))
    return str(value)


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
