"""Case table for the plain CEL language and libraries (no `device` variable)."""

from __future__ import annotations

import math

import pytest

from kubedra.cel import CelCompileError, CelError, CelEvalError, evaluate_expression
from kubedra.cel.values import CelType, UInt
from tests.cel.strict import same_value

C, E = CelCompileError, CelEvalError

# (expression, expected value) - each must evaluate exactly to the value (type included).
VALUES: list[tuple[str, object]] = [
    ("1 + 2 * 3", 7),
    ("-9223372036854775808", -9223372036854775808),
    ("0x1F", 31),
    ("7 / 2", 3),
    ("-7 / 2", -3),
    ("-7 % 3", -1),
    ("7 % -3", 1),
    ("1u + 2u", UInt(3)),
    ("10u / 3u", UInt(3)),
    ("1.5 + 1.0", 2.5),
    ("1.0 / 0.0", math.inf),
    ("-1.0 / 0.0", -math.inf),
    ("1e3", 1000.0),
    (".5", 0.5),
    ("--5", 5),
    ("!true", False),
    ("!!true", True),
    ("'a' + 'b'", "ab"),
    ('"\\n\\t\\"\\x41\\u00e9\\101"', '\n\t"A\u00e9A'),
    ("r'\\n'", "\\n"),
    ("'''multi\nline'''", "multi\nline"),
    ('"""tri"ple"""', 'tri"ple'),
    ("b'abc'", b"abc"),
    ("b'\\xff'", b"\xff"),
    ("null", None),
    ("[1, 2] + [3]", [1, 2, 3]),
    ("{'a': 1}['a']", 1),
    ("{'a': {'b': 2}}.a.b", 2),
    ("{1: 'x'}[1]", "x"),
    ("[1, 2, 3][1]", 2),
    ("size('héllo')", 5),
    ("'héllo'.size()", 5),
    ("size([1, 2])", 2),
    ("size({'a': 1})", 1),
    ("size(b'ab')", 2),
    ("2 in [1, 2]", True),
    ("'a' in {'a': 1}", True),
    ("'b' in {'a': 1}", False),
    ("1 < 1.5", True),
    ("1u < 2", True),
    ("2.0 >= 2", True),
    ("'a' < 'b'", True),
    ("false < true", True),
    ("b'a' < b'b'", True),
    ("dyn(1) == 1.0", True),
    ("dyn(1) == 1u", True),
    ("dyn(true) == 1", False),
    ("[1, 2] == [1, 2]", True),
    ("{'a': 1} == {'a': 1}", True),
    ("dyn([1]) == dyn(['1'])", False),
    ("true ? 1 : 2", 1),
    ("false ? 1 : 2", 2),
    ("int('42')", 42),
    ("int(3.9)", 3),
    ("int(-3.9)", -3),
    ("int(5u)", 5),
    ("uint(5)", UInt(5)),
    ("uint('7')", UInt(7)),
    ("double(3)", 3.0),
    ("double('1.5')", 1.5),
    ("string(1.5)", "1.5"),
    ("string(100.0)", "100"),
    ("string(1e21)", "1e+21"),
    ("string(5u)", "5"),
    ("string(true)", "true"),
    ("string(b'hi')", "hi"),
    ("bytes('hi')", b"hi"),
    ("bool('true')", True),
    ("bool('f')", False),
    ("type(1) == int", True),
    ("type('a') == string", True),
    ("type(1u)", CelType("uint")),
    ("type([]) == list && type({}) == map", True),
    ("type(type(1)) == type", True),
    ("dyn(1) + 1", 2),
    ("'abc'.startsWith('ab') && 'abc'.endsWith('bc') && 'abc'.contains('b')", True),
    ("'abc'.matches('^a.c$')", True),
    ("matches('abc', 'z')", False),
    ("'hello'.charAt(1)", "e"),
    ("'hello'.charAt(5)", ""),
    ("'hello mellow'.indexOf('ello')", 1),
    ("'hello mellow'.indexOf('ello', 2)", 7),
    ("'hello mellow'.lastIndexOf('ello')", 7),
    ("'hello mellow'.lastIndexOf('ello', 6)", 1),
    ("'TacoCat'.lowerAscii()", "tacocat"),
    ("'TacoCat'.upperAscii()", "TACOCAT"),
    ("'aaa'.replace('a', 'b')", "bbb"),
    ("'aaa'.replace('a', 'b', 2)", "bba"),
    ("'a,b,c'.split(',')", ["a", "b", "c"]),
    ("'a,b,c'.split(',', 2)", ["a", "b,c"]),
    ("'a,b,c'.split(',', 0)", []),
    ("'tacocat'.substring(4)", "cat"),
    ("'tacocat'.substring(0, 4)", "taco"),
    ("'  \\ttrim\\n '.trim()", "trim"),
    ("['a', 'b'].join()", "ab"),
    ("['a', 'b'].join('-')", "a-b"),
    ("'%s is %d'.format([dyn('x'), 3])", "x is 3"),
    ("'%s'.format([[1, 2]])", "[1, 2]"),
    ("'%.2f'.format([1.5])", "1.50"),
    ("'%x %b %o'.format([255, 5, 8])", "ff 101 10"),
    ("'100%%'.format([])", "100%"),
    ("strings.quote('a\"b\\n')", '"a\\"b\\n"'),
    ("[1, 2, 3].all(x, x > 0)", True),
    ("[1, 2, 3].exists(x, x > 2)", True),
    ("[1, 2, 3].exists_one(x, x > 1)", False),
    ("[1, 2, 3].map(x, x * 2)", [2, 4, 6]),
    ("[1, 2, 3].map(x, x > 1, x * 10)", [20, 30]),
    ("[1, 2, 3].filter(x, x != 2)", [1, 3]),
    ("{'a': 1, 'b': 2}.map(k, k)", ["a", "b"]),
    ("[10, 20].all(i, v, v == (i + 1) * 10)", True),
    ("{'a': 1}.exists(k, v, k == 'a' && v == 1)", True),
    ("[1, 2].transformList(i, v, v * i)", [0, 2]),
    ("{'a': 1}.transformMap(k, v, v + 1)", {"a": 2}),
    ("cel.bind(x, 2, x * x)", 4),
    ("[1, 2, 3].isSorted() && ![3, 1].isSorted()", True),
    ("[1, 2, 3].sum()", 6),
    ("[1.5, 2.5].sum()", 4.0),
    ("[3, 1, 2].min()", 1),
    ("[3, 1, 2].max()", 3),
    ("[1, 2, 1].indexOf(1)", 0),
    ("[1, 2, 1].lastIndexOf(1)", 2),
    ("[1, 2].indexOf(5)", -1),
    ("'abc123'.find('[0-9]+')", "123"),
    ("'a1b2'.findAll('[0-9]')", ["1", "2"]),
    ("[1, 2, 3, 4].slice(1, 3)", [2, 3]),
    ("[[[1]], [[2], [3]]].flatten()", [[1], [2], [3]]),
    ("[[[1]], [[2], [3]]].flatten(2)", [1, 2, 3]),
    ("[1, 1, 2].distinct()", [1, 2]),
    ("[1, 2].reverse()", [2, 1]),
    ("[3, 1, 2].sort()", [1, 2, 3]),
    ("['bb', 'a'].sortBy(s, s.size())", ["a", "bb"]),
    ("lists.range(3)", [0, 1, 2]),
    ("sets.contains([1, 2, 3], [2])", True),
    ("sets.equivalent([1, 2], [2, 1, 1])", True),
    ("sets.intersects([1], [2])", False),
    ("{'a': 1}.?a.orValue(0)", 1),
    ("{'a': 1}.?b.orValue(0)", 0),
    ("{'a': 1}[?'b'].hasValue()", False),
    ("optional.of(1).value()", 1),
    ("optional.none().orValue(5)", 5),
    ("{'a': {'b': 1}}.?a.b.orValue(0)", 1),
    ("{'a': {'b': 1}}.?x.b.orValue(7)", 7),
    ("[1, ?optional.none(), ?optional.of(2)]", [1, 2]),
    ("quantity('1Gi').isGreaterThan(quantity('1G'))", True),
    ("semver('1.2.3').isLessThan(semver('1.10.0'))", True),
]

ERRORS: list[tuple[str, type[CelError], str]] = [
    ("[[1], [2, dyn([3])]]", C, "<input>:1:7: expected type 'list(int)' but found 'list(dyn)'"),
    ("[1, dyn(2)]", C, "<input>:1:8: expected type 'int' but found 'dyn'"),
    ("9223372036854775807 + 1", E, "overflow"),
    ("-9223372036854775808 - 1", E, "overflow"),
    ("-9223372036854775808 / -1", E, "overflow"),
    ("0u - 1u", E, "overflow"),
    ("1 / 0", E, "division by zero"),
    ("1 % 0", E, "modulus by zero"),
    ("1u / 0u", E, "division by zero"),
    ("[1][5]", E, "index out of bounds: 5"),
    ("[1][-1]", E, "index out of bounds: -1"),
    ("{'a': 1}['b']", E, "no such key: b"),
    ("{'a': 1}.b", E, "no such key: b"),
    ("int('x')", C, "program instantiation failed: type conversion error from 'string' to 'int'"),
    ("int(1e30)", C, "program instantiation failed: integer overflow"),
    ("uint(-1)", C, "program instantiation failed: unsigned integer overflow"),
    ("'hello'.charAt(9)", E, "index out of range"),
    ("'abc'.substring(2, 1)", E, "invalid substring range"),
    ("[].min()", E, "empty list"),
    ("optional.none().value()", E, "optional.none() dereference"),
    ("dyn('a') > 1", E, "no such overload"),
    ("dyn(1) && true", E, "no such overload"),
    ("'a'.matches(dyn('('))", C, "program instantiation failed: error parsing regexp"),
    ("9223372036854775808", C, "invalid int literal"),
    ("1 +", C, "Syntax error"),
    ("'unterminated", C, "Syntax error"),
    ("{'a': 1, 2: 2}", C, "expected type 'string'"),
    ("1 == 1.0", C, "found no matching overload for '_==_'"),
    ("['x', 3]", C, "expected type 'string' but found 'int'"),
    ("1 + 'a'", C, "found no matching overload for '_+_' applied to '(int, string)'"),
    ("1 ? 2 : 3", C, "found no matching overload for '_?_:_'"),
    ("1 && true", C, "<input>:1:1: expected type 'bool' but found 'int'"),
    ("true || 'a'", C, "<input>:1:9: expected type 'bool' but found 'string'"),
    ("[1].all(x, x)", C, "expected type 'bool'"),
    ("1.all(x, true)", C, "cannot be range of a comprehension"),
    ("has(1)", C, "invalid argument to has() macro"),
    ("'a'.frobnicate()", C, "undeclared reference to 'frobnicate'"),
    ("unknown_var", C, "undeclared reference to 'unknown_var'"),
]


def _ids(rows: list[tuple[str, object]] | list[tuple[str, type[CelError], str]]) -> list[str]:
    return [r[0][:60] for r in rows]


@pytest.mark.parametrize(("expression", "expected"), VALUES, ids=_ids(VALUES))
def test_value(expression: str, expected: object) -> None:
    result = evaluate_expression(expression, {})
    assert same_value(result, expected), f"{result!r} != {expected!r}"


@pytest.mark.parametrize(("expression", "kind", "fragment"), ERRORS, ids=_ids(ERRORS))
def test_error(expression: str, kind: type[CelError], fragment: str) -> None:
    with pytest.raises(kind) as info:
        evaluate_expression(expression, {})
    assert fragment in str(info.value)


def test_variables_are_dynamic() -> None:
    assert evaluate_expression("x + y.size()", {"x": 1, "y": [1, 2]}) == 3
    assert evaluate_expression("m.k.startsWith('v')", {"m": {"k": "val"}}) is True


def test_runtime_cost_limit_plain() -> None:
    expr = "lists.range(200).all(a, lists.range(200).all(b, lists.range(200).all(c, true)))"
    with pytest.raises(CelEvalError, match="actual cost limit exceeded"):
        evaluate_expression(expr, {})


def test_nan_is_not_equal_to_itself() -> None:
    assert evaluate_expression("x != x && [x] != [x]", {"x": math.nan}) is True
