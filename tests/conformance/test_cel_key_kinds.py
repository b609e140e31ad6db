"""Guard: Python's `True == 1 == 1.0` (and their equal hashes) must never show through CEL.

Every pair of bool, int, uint and double values (zeros, ones, a fraction, a negative, NaN)
goes through every place where CEL compares or keys values under `dyn`: `==`/`!=`,
membership in lists and maps, map lookup, map literals with both as keys, list and map
equality (nested too), sets.*, distinct(), indexOf(), exists_one, transformMap, optional
index and optionals, sorting and ordering (sort, sortBy, isSorted, max, min), includes(). kubedra's outcome (value or error, and cost estimate) must be
upstream's for each; a leak anywhere fails one of these expressions.
"""

from __future__ import annotations

import itertools

from kubedra.cel import compile_expression
from tests.conformance.cel_value import ValueCase, judge_value
from tests.conformance.oracle import Oracle, chunks

SCALARS = ("true", "false", "0", "1", "-1", "2", "0u", "1u", "2u", "0.0", "-0.0", "1.0",
           "-1.0", "1.5", "2.0", "double('NaN')")  # fmt: skip
# {a} and {b} are replaced by dyn(<scalar>); the first templates compare, the later build maps.
TEMPLATES = (
    "{a} == {b}",
    "{a} != {b}",
    "{a} in [{b}]",
    "{a} in [1, {b}, 'x']",
    "{a} in {{{b}: 0}}",
    "{{{b}: 'v'}}[{a}]",
    "{{{b}: 'v'}}[?{a}]",
    "[{a}] == [{b}]",
    "[[{a}]] == [[{b}]]",
    "{{'k': {a}}} == {{'k': {b}}}",
    "{{{a}: 1}} == {{{b}: 1}}",
    "[{{{a}: 1}}] == [{{{b}: 1}}]",
    "dyn([{a}]) == dyn([{b}])",
    "optional.of({a}) == optional.of({b})",
    "sets.contains([{a}], [{b}])",
    "sets.intersects([{a}, 'x'], [{b}])",
    "sets.equivalent([{a}], [{b}])",
    "[{a}, {b}].distinct().size()",
    "[{a}, {b}].indexOf({b})",
    "[{a}, {b}].lastIndexOf({a})",
    "[{a}, {b}].exists_one(x, x == {a})",
    "[{a}, {b}].filter(x, x == {b}).size()",
    "{{{a}: 1, {b}: 2}}.size()",
    "{{{a}: 1, {b}: 2}}[{b}]",
    "{{{a}: 1, {b}: 2}}[{a}]",
    "{b} in {{{a}: 1, {b}: 2}}",
    "{{{a}: 1, {b}: 2}}.transformMap(k, v, v).size()",
    "{{{a}: 1, ?{b}: optional.none()}}.size()",
    "[{a}, {b}].sort().size()",
    "[{a}, {b}].isSorted()",
    "[{a}, {b}].max() == {a}",
    "[{a}, {b}].min() == {b}",
    "[{a}].includes({b})",
    "[{a}, {b}].sortBy(x, x)[0] == {a}",
    "[{a}, {b}].exists(x, x == {b})",
    "[{a}, {b}].all(i, v, v == {a})",
    "[{a}, {b}].map(x, x == {a})",
)
def _cost(expression: str) -> int:
    return compile_expression(expression).estimated_cost


NAN_KEYED = "{{{a}: 1, {b}: 2}}"  # a NaN key cannot be looked up (nor printed by the oracle)




def _order_dependent(template: str, a: str, b: str) -> bool:
    """transformMap inserts keys in the map's order, which Go randomises: with a double and
    an integer of one value, only the order integer-then-double finds the first key again
    (a double converts to int or uint on lookup; an integer never converts to double)."""
    doubles = [x for x in (a, b) if "." in x or "NaN" in x]
    integers = [x for x in (a, b) if (x[-1].isdigit() and "." not in x) or x.endswith("u")]
    return "transformMap" in template and len(doubles) == 1 and len(integers) == 1


def cases() -> list[ValueCase]:
    out = []
    for template, (a, b) in itertools.product(TEMPLATES, itertools.product(SCALARS, repeat=2)):
        if "NaN" in a + b and NAN_KEYED in template and "size()" not in template:
            continue
        if _order_dependent(template, a, b):
            continue
        expression = template.format(a=f"dyn({a})", b=f"dyn({b})")
        out.append(ValueCase(expression))
    return out


def test_bool_and_numeric_kinds_stay_apart(oracle: Oracle) -> None:
    failures = []
    batch = cases()
    for part in chunks(batch, 500):
        answers = oracle.ask_many([("value", {"expression": c.expression}) for c in part])
        for case, answer in zip(part, answers, strict=True):
            verdict = judge_value(case, answer)
            if verdict.status != "match":
                failures.append(f"{case.expression}\n{verdict.why}")
    assert len(batch) > 9000
    assert not failures, f"{len(failures)} of {len(batch)} differ:\n" + "\n".join(failures[:20])


def test_costs_agree(oracle: Oracle) -> None:
    """The estimates too (dyn(x) is x's size: equality of two dyn scalars costs 1)."""
    expressions = [c.expression for c in cases()]
    answers = oracle.ask_many([("value", {"expression": e}) for e in expressions])
    differ = [(e, _cost(e), a["cost"]) for e, a in zip(expressions, answers, strict=True)
              if "cost" in a and _cost(e) != a["cost"]]  # fmt: skip
    assert not differ, differ[:20]
