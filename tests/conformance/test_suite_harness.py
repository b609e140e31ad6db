"""The suite harness's own parts, without the oracle: reading Go literals, the scope rules
of the cel-spec run, its judgement, and the compile table's parsing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.cel_spec import Outcome, SpecCase, called_names, meets_spec, scope
from tests.conformance.dra_compile_table import _features, _go_int
from tests.conformance.go_literals import field_literals, literal_at

NAMES = {"size", "exists", "_==_", "timestamp"}


@pytest.mark.parametrize(("source", "value"), [
    ("`a\\nb`,", "a\\nb"),  # raw: no escapes
    ('"a\\"b\\n\\x41\\101\\u00e9",', 'a"b\nAAé'),
    ('"a" +\n\t\t"b"}', "ab"),
    ("fmt.Sprintf(`x%d`, 1),", None),
    ('"a" + name,', None),
])  # fmt: skip
def test_go_literal(source: str, value: str | None) -> None:
    assert literal_at(source, 0) == value


def test_field_literals_skip_other_fields() -> None:
    source = 'x := T{expr: "1 + 1", other: "no", expr: fmt.Sprintf("%d", 2)}'
    assert [v for _, v in field_literals(source, "expr")] == ["1 + 1", None]


def test_called_names_ignore_string_contents() -> None:
    assert called_names("'f(x)'.size() + math.greatest(1)") == [
        ("size", "size"), ("math.greatest", "greatest")]  # fmt: skip


def _case(raw: dict[str, Any], upstream: dict[str, Any] | None = None, file: str = "basic",
          expected: Any = None) -> SpecCase:
    return SpecCase(file, "s", {"name": "t", "expr": "1 == 1", **raw}, expected,
                    upstream=upstream or {"value": {"bool": True}})  # fmt: skip


@pytest.mark.parametrize(("case", "reason"), [
    (_case({}), None),
    (_case({"container": "cel.expr"}), "containers"),
    (_case({}, file="proto3"), "protobuf messages"),
    (_case({"expr": "TestAllTypes{}.single_int64 == 0"}), "protobuf messages"),
    (_case({"expr": "timestamp('2000-01-01T00:00:00Z') == timestamp(0)"}), "timestamps and durations"),
    (_case({"disable_check": True}), "unchecked evaluation"),
    (_case({"expr": "math.least(1) == 1"}), "not in the DRA environment"),
    (_case({"expr": "x.sign()"}, {"compileError": "undeclared reference to 'x'"}),
     "not in the DRA environment"),
    (_case({}, {"value": {"bool": False}}), "upstream deviates"),
])  # fmt: skip
def test_scope_rules(case: SpecCase, reason: str | None) -> None:
    assert scope(case, NAMES) == reason


def test_judgement() -> None:
    value = _case({}, expected={"int": "2"})
    assert meets_spec(Outcome("value", {"int": "2"}), value)
    assert not meets_spec(Outcome("value", {"uint": "2"}), value)
    assert meets_spec(Outcome("value", {"bool": True}), _case({}))  # no matcher: true
    assert not meets_spec(Outcome("value", {"bool": False}), _case({}))
    error = _case({"eval_error": {}})
    assert meets_spec(Outcome("error", text="division by zero"), error)
    assert meets_spec(Outcome("compile", text="program instantiation failed: x"), error)
    assert not meets_spec(Outcome("compile", text="compilation failed: x"), error)
    typed = SpecCase("f", "s", {"name": "t", "expr": "[]", "check_only": True,
                                "typed_result": {}}, expected_type="list(dyn)")  # fmt: skip
    assert meets_spec(Outcome("checked", type="list(dyn)"), typed)
    assert not meets_spec(Outcome("checked", type="list(int)"), typed)


def test_compile_table_fields() -> None:
    constants = {"maxElementsListTypeEnabled": 64}
    assert _go_int('4 + 64, /* cost of "includes" on dynamic type */', constants) == 68
    assert _go_int("5 + ((3 + 3) * maxElementsListTypeEnabled /* x */),", constants) == 389
    assert _go_int("someFunction(3)", constants) is None
    assert _features("EnableListTypeAttributes: true") == (False, True)
    assert _features("EnableConsumableCapacity: true") == (True, False)
