"""The hand-written CEL tables (tests/cel/test_language_cases.py, test_upstream_gaps.py)
against upstream's DRA CEL environment: every expected value must be upstream's value,
every expected error one upstream also reports (compile time or run time alike), with the
table's fragment in upstream's message, every expected cost estimate upstream's estimate.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.cel import CelCompileError, CelError, CelEvalError, evaluate_expression
from tests.cel import test_language_cases as language
from tests.cel import test_upstream_gaps as gaps
from tests.conformance.cel_value import same, tagged
from tests.conformance.oracle import Oracle

VALUES = [*language.VALUES, *gaps.VALUES]
MAP_ORDER = {"{'a': 1, 'b': 2}.map(k, k)"}
ERRORS = [*language.ERRORS, *gaps.ERRORS, *gaps.URL_ERRORS,
          *((expression, CelEvalError, message) for expression, message in gaps.IP_ERRORS)]  # fmt: skip


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
    assert same(ours, theirs), f"kubedra {ours} != upstream {theirs}"


@pytest.mark.parametrize(("expression", "kind", "fragment"), ERRORS, ids=[e[0] for e in ERRORS])
def test_error_is_upstreams(
    expression: str, kind: type[CelError], fragment: str, oracle: Oracle
) -> None:
    answer = oracle.ask("value", {"expression": expression})
    message = answer.get("compileError") if kind is CelCompileError else answer.get("error")
    assert message is not None, f"upstream: {answer}"
    assert fragment in message, f"{fragment!r} not in upstream's {message!r}"


@pytest.mark.parametrize(("expression", "expected"), gaps.TYPES, ids=[t[0] for t in gaps.TYPES])
def test_type_is_upstreams(expression: str, expected: str | None, oracle: Oracle) -> None:
    answer = oracle.ask("value", {"expression": expression})
    assert answer.get("type") == expected, answer


@pytest.mark.parametrize(("expression", "cost"), gaps.PLAIN_COSTS,
                         ids=[c[0] for c in gaps.PLAIN_COSTS])  # fmt: skip
def test_plain_cost_is_upstreams(expression: str, cost: int, oracle: Oracle) -> None:
    assert oracle.ask("value", {"expression": expression}).get("cost") == cost


@pytest.mark.parametrize(("expression", "cost"), gaps.LIBRARY_COSTS,
                         ids=[c[0] for c in gaps.LIBRARY_COSTS])  # fmt: skip
def test_cost_is_upstreams(expression: str, cost: int, oracle: Oracle) -> None:
    device = {"driver": "d.example.com", "attributes": {}, "capacity": {}}
    answer = oracle.ask("cel", {"expression": expression, "features": {}, "devices": [device]})
    assert answer.get("cost") == cost, answer
