"""The hand-written CEL tables (tests/cel/test_language_cases.py, test_upstream_gaps.py)
against upstream's DRA CEL environment: every expected value must be upstream's value,
every expected error one upstream also reports (compile time or run time alike), with the
table's fragment in upstream's message.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import pytest

from kubedra.cel import CelCompileError, CelError, evaluate_expression
from kubedra.cel.values import CelType, Optional, UInt, type_name
from tests.cel import test_language_cases as language
from tests.cel import test_upstream_gaps as gaps
from tests.conformance.oracle import Oracle

VALUES = [*language.VALUES, *gaps.VALUES]
MAP_ORDER = {"{'a': 1, 'b': 2}.map(k, k)"}
ERRORS = [*language.ERRORS, *gaps.ERRORS]


def tagged(value: object) -> Any:
    """A kubedra CEL value in the oracle's tagged JSON form."""
    kind = type(value)
    if kind is bool:
        return {"bool": value}
    if kind is UInt:
        return {"uint": str(int(value))}  # type: ignore[call-overload]
    if kind is int:
        return {"int": str(value)}
    if kind is float:
        return {"double": value}
    if kind is str:
        return {"string": value}
    if kind is bytes:
        return {"bytes": base64.b64encode(value).decode()}  # type: ignore[arg-type]
    if value is None:
        return {"null": True}
    if isinstance(value, CelType):
        return {"type": value.name}
    if isinstance(value, Optional):
        return {"optional": tagged(value.value) if value.present else None}
    if isinstance(value, list | tuple):
        return {"list": [tagged(v) for v in value]}
    if isinstance(value, Mapping):
        return {"map": sorted(([tagged(k), tagged(v)] for k, v in value.items()), key=str)}
    return {"object": type_name(value), "text": str(value)}


def _same(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, dict) and "double" in ours and "double" in (theirs or {}):
        a, b = ours["double"], float(theirs["double"].replace("Inf", "inf"))
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return ours.keys() == theirs.keys() and all(_same(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(map(_same, ours, theirs))
    return bool(ours == theirs)


def _map_key(entry: Any) -> str:
    return str(entry[0])


@pytest.mark.parametrize(("expression", "expected"), VALUES, ids=[v[0] for v in VALUES])
def test_value_is_upstreams(expression: str, expected: object, oracle: Oracle) -> None:
    answer = oracle.ask("value", {"expression": expression})
    assert "value" in answer, answer
    theirs = answer["value"]
    if "map" in theirs:
        theirs = {"map": sorted(theirs["map"], key=_map_key)}
    ours = tagged(evaluate_expression(expression, {}))
    if "map" in ours:
        ours = {"map": sorted(ours["map"], key=_map_key)}
    if expression in MAP_ORDER:  # ranging over a map: Go's map order is random
        ours, theirs = ({"list": sorted(v["list"], key=str)} for v in (ours, theirs))
    assert _same(ours, theirs), f"kubedra {ours} != upstream {theirs}"


@pytest.mark.parametrize(("expression", "kind", "fragment"), ERRORS, ids=[e[0] for e in ERRORS])
def test_error_is_upstreams(
    expression: str, kind: type[CelError], fragment: str, oracle: Oracle
) -> None:
    answer = oracle.ask("value", {"expression": expression})
    message = answer.get("compileError") if kind is CelCompileError else answer.get("error")
    assert message is not None, f"upstream: {answer}"
    assert fragment in message, f"{fragment!r} not in upstream's {message!r}"
