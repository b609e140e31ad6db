"""Guard: the strings extension's legacy `format` against upstream, clause by clause.

Every clause (%s %d %f %e %x %X %o %b, with and without a precision) is applied to special
doubles (NaN, ±Inf, -0.0), the strings `%f`/`%e` take in their place ("NaN", "Infinity",
"-Infinity") and near misses, and to the same values inside lists and maps (values and keys),
as literals and behind `dyn` (so both the compile-time validator and the run-time path are
exercised). kubedra's value or error must be upstream's for each.
"""

from __future__ import annotations

import itertools

from tests.conformance.cel_value import ValueCase, judge_value
from tests.conformance.oracle import Oracle

VERBS = ("%s", "%d", "%f", "%.2f", "%.0f", "%e", "%.3e", "%x", "%X", "%o", "%b")
SCALARS = ("double('NaN')", "double('Inf')", "double('-Inf')", "-0.0", "1234.5", "1e21",
           "'NaN'", "'Infinity'", "'-Infinity'", "'nan'", "'inf'", "'+Inf'", "'1.5'", "42",
           "42u", "true", "null", "b'a\"b'", "'q\"\\\\u00e9\\n'", "type(1)")  # fmt: skip


def _wrapped(value: str) -> list[str]:
    """The value as an argument: alone, in a list, as a map value, behind dyn."""
    return [value, f"dyn({value})", f"[{value}]", f"[{value}, {value}]", f"{{'k': {value}}}",
            f"dyn([{value}])", f"[[{value}]]"]  # fmt: skip


def cases() -> list[ValueCase]:
    out = [ValueCase(f'"{verb}".format([{arg}])')
           for verb, value in itertools.product(VERBS, SCALARS) for arg in _wrapped(value)]  # fmt: skip
    keys = ("1", "10", "2u", "true", "false", "'a'", "'a:'", "'b'", "1.5", "null")
    for a, b in itertools.product(keys, repeat=2):
        if a != b:  # map keys: which print, and in which order (by the printed key)
            out.append(ValueCase(f'"%s".format([{{dyn({a}): 1, dyn({b}): double("NaN")}}])'))
    return out


def test_format_is_upstreams(oracle: Oracle) -> None:
    batch = cases()
    answers = oracle.ask_many([("value", {"expression": c.expression}) for c in batch])
    failures = [f"{case.expression}\n{verdict.why}" for case, answer in zip(batch, answers, strict=True)
                if (verdict := judge_value(case, answer)).status != "match"]  # fmt: skip
    assert len(batch) > 1500
    assert not failures, f"{len(failures)} of {len(batch)} differ:\n" + "\n".join(failures[:20])
