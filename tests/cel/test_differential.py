"""Differential test: kubedra.cel vs cel-python on generated, well-typed plain CEL.

Expressions come from typed generators (int, bool, string, list of int; arithmetic incl.
overflow and division by zero, comparisons, &&/||/!, ternary, `in`, size), so both engines
must agree: the same value (and type), or both an error. In this space no divergence was
found (3,000 examples checked while writing the test). Excluded by construction, because
the engines legitimately differ there: ill-typed expressions (our checker rejects them at
compile time, e.g. `1 == 1.0` or `[1, "a"]`, while cel-python has no type checker and may
evaluate them); doubles, uints and bytes are not generated; the Kubernetes extensions are
absent from cel-python.
"""

from __future__ import annotations

from typing import Any

import celpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubedra.cel import CelError, evaluate_expression

_ENV = celpy.Environment()

small_ints = st.integers(min_value=-50, max_value=50).map(str)
edge_ints = st.sampled_from(["9223372036854775807", "4611686018427387904", "3037000500"])
words = st.sampled_from(["''", "'a'", "'ab'", "'abc'", "'b'", '"x y"'])


def _ints(safe: bool) -> st.SearchStrategy[str]:
    """int expressions; `safe` ones cannot fail (so they may sit under && / ||)."""
    leaves = small_ints if safe else st.one_of(small_ints, edge_ints)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        ops = ["+", "-"] if safe else ["+", "-", "*", "/", "%"]
        return st.one_of(
            st.tuples(inner, st.sampled_from(ops), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(_bools_leaf(), inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
            strings.map(lambda s: f"size({s})"),
            int_lists.map(lambda s: f"size({s})"),
        )

    return st.recursive(leaves, extend, max_leaves=6)


def _bools_leaf() -> st.SearchStrategy[str]:
    return st.sampled_from(["true", "false"])


strings = st.recursive(
    words,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"({t[0]} + {t[1]})"),
        st.tuples(_bools_leaf(), inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    ),
    max_leaves=4,
)
int_lists = st.lists(small_ints, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
safe_ints = _ints(safe=True)
any_ints = _ints(safe=False)
comparisons = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])


def _comparison(operands: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(operands, comparisons, operands).map(lambda t: f"({t[0]} {t[1]} {t[2]})")


safe_bools = st.recursive(
    st.one_of(
        _bools_leaf(),
        _comparison(any_ints),
        _comparison(strings),
        st.tuples(safe_ints, int_lists).map(lambda t: f"({t[0]} in {t[1]})"),
    ),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda s: f"!{s}"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    ),
    max_leaves=6,
)
expressions = st.one_of(
    safe_bools, any_ints, strings, _comparison(any_ints),
    st.tuples(int_lists, int_lists).map(lambda t: f"{t[0]} + {t[1]}"),
)  # fmt: skip


def _plain(value: Any) -> object:
    """cel-python values -> plain Python values comparable with ours."""
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    if isinstance(value, celpy.celtypes.IntType):
        return int(value)
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _reference(expression: str) -> tuple[bool, object]:
    try:
        program = _ENV.program(_ENV.compile(expression))
        return True, _plain(program.evaluate({}))
    except Exception:  # any cel-python failure counts as "an error"
        return False, None


def _ours(expression: str) -> tuple[bool, object]:
    try:
        return True, evaluate_expression(expression, {})
    except CelError:
        return False, None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_matches_cel_python(expression: str) -> None:
    ok, value = _ours(expression)
    ref_ok, ref_value = _reference(expression)
    assert ok == ref_ok, expression
    if ok:
        assert value == ref_value and type(value) is type(ref_value), expression
