"""Guard: the checker's type inference for aggregate literals and conditionals, against
cel-go's checker (the oracle reports the checked type of each expression).

The shapes where inference is subtle are combined pairwise and in threes: empty and nested
empty lists and maps (free type parameters), `optional.none()`, null (which only opaque
types such as optionals take), dyn, type values (`int`, `type(x)`, `net.IP`: any type value
goes with any other, but literals must agree on the exact one), and concrete types. kubedra must accept exactly what
upstream accepts, with the same type, and refuse the rest at compile time.
"""

from __future__ import annotations

import itertools

from kubedra.cel import CelCompileError, compile_expression
from tests.conformance.oracle import Oracle, chunks

SHAPES = ("[]", "[[]]", "[[[]]]", "[1]", "['a']", "[[1]]", "{}", "{1: 'a'}", "{'k': []}",
          "optional.none()", "optional.of(1)", "optional.of(dyn(1))", "optional.of([])",
          "null", "dyn(1)", "1", "[optional.none()]", "quantity('1')", "int", "string",
          "type(dyn(1))", "type([])", "net.IP", "list", "[int]")  # fmt: skip
FORMS = ("[{a}, {b}]", "true ? {a} : {b}", "{{'x': {a}, 'y': {b}}}", "[{a}, {b}][0]")


def cases() -> list[str]:
    pairs = [form.format(a=a, b=b)
             for form in FORMS for a, b in itertools.product(SHAPES, repeat=2)]  # fmt: skip
    threes = [f"[{a}, {b}, {c}]" for a, b, c in itertools.product(SHAPES[:9], repeat=3)]
    return pairs + threes


def kubedra_type(expression: str) -> str | None:
    try:
        return str(compile_expression(expression).result_type)
    except CelCompileError:
        return None


def test_literal_types_are_upstreams(oracle: Oracle) -> None:
    expressions = cases()
    differ = []
    for part in chunks(expressions, 500):
        answers = oracle.ask_many([("value", {"expression": e}) for e in part])
        for expression, answer in zip(part, answers, strict=True):
            theirs = None if "compileError" in answer else answer["type"]
            ours = kubedra_type(expression)
            if ours != theirs:
                differ.append(f"{expression}: kubedra {ours}, upstream {theirs}")
    assert len(expressions) > 2000
    assert not differ, f"{len(differ)} of {len(expressions)} differ:\n" + "\n".join(differ[:30])
