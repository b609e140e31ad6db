"""Comparing CEL values in tests without Python's equality.

Python says `True == 1 == 1.0 == UInt(1)` and `[1] == [True]`: a test asserting
`result == expected` would pass where CEL's answer is of the wrong kind, at any depth. Tests
compare `canonical` forms instead, which tag every value with its CEL kind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kubedra.cel.values import CelType, Optional, UInt, type_name

Canonical = tuple[object, ...]


def canonical(value: object) -> Canonical:
    """`value` as nested tuples of (CEL kind, content); maps as sorted entries."""
    kind = type(value)
    if kind is float:
        return ("double", "nan" if math.isnan(value) else value)  # type: ignore[arg-type]
    if kind is UInt:
        return ("uint", int(value))  # type: ignore[call-overload]
    if kind in (bool, int, str, bytes) or value is None:
        return (type_name(value), value)
    if isinstance(value, list | tuple):
        return ("list", tuple(canonical(v) for v in value))
    if isinstance(value, Mapping):
        entries = sorted(((canonical(k), canonical(v)) for k, v in value.items()), key=repr)
        return ("map", tuple(entries))
    if isinstance(value, Optional):
        return ("optional", canonical(value.value) if value.present else None)
    if isinstance(value, CelType):
        return ("type", value.name)
    return (type_name(value), value)  # library objects: their own equality


def same_value(result: object, expected: object) -> bool:
    """Equal CEL values of the same kinds at every depth (NaN equal to NaN)."""
    return canonical(result) == canonical(expected)
