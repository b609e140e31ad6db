"""Static analysis helpers used by the linter."""

from __future__ import annotations

import pytest

from kubedra.cel import (
    BareLookup,
    CelCompileError,
    CelEvalError,
    bare_lookups,
    compile_selector,
    constrained_drivers,
    portable_rewrite,
)
from tests.cel.devices import DEVICES

SEED = 'device.capacity["memory"].isGreaterThan(quantity("40Gi"))'


def test_bare_lookups_reports_position() -> None:
    assert bare_lookups(SEED) == [BareLookup("capacity", "memory", 1, 16, 15, 25)]


def test_bare_lookups_ignores_domains_and_dynamic_keys() -> None:
    expr = 'device.attributes["gpu.nvidia.com"].x == 1 && device.attributes[device.driver].y'
    assert bare_lookups(expr) == []


def test_bare_lookups_multiline() -> None:
    hits = bare_lookups('true &&\n  device.attributes["arch"] == "x"')
    assert [(h.map, h.key, h.line, h.column) for h in hits] == [("attributes", "arch", 2, 20)]


def test_portable_rewrite_seed() -> None:
    rewritten = portable_rewrite(SEED, "gpu.nvidia.com")
    assert rewritten == (
        'device.driver == "gpu.nvidia.com" && '
        'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))'
    )
    strict = compile_selector(rewritten, strict=True)
    assert strict.evaluate(DEVICES["gpu"]) is compile_selector(SEED).evaluate(DEVICES["gpu"])


def test_portable_rewrite_is_false_not_an_error_on_other_drivers_devices() -> None:
    """A real cluster's NICs lack `memory`: the rewrite must not fail there (upstream turns a
    run-time error in a class selector into a scheduling failure of the whole node)."""
    unguarded = compile_selector(
        'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))', strict=True
    )
    with pytest.raises(CelEvalError, match="no such key"):
        unguarded.evaluate(DEVICES["empty"])
    guarded = compile_selector(portable_rewrite(SEED, "gpu.nvidia.com"), strict=True)
    assert guarded.evaluate(DEVICES["empty"]) is False


def test_portable_rewrite_non_identifier_key() -> None:
    expr = 'device.attributes["in"] == 1 || device.attributes["a-b"] == 2'
    assert portable_rewrite(expr, "d.io") == (
        'device.driver == "d.io" && '
        '(device.attributes["d.io"]["in"] == 1 || device.attributes["d.io"]["a-b"] == 2)'
    )


def test_portable_rewrite_keeps_a_driver_the_expression_already_pins() -> None:
    expr = 'device.driver == "d.io" && device.attributes["x"] == 1'
    assert portable_rewrite(expr, "d.io") == (
        'device.driver == "d.io" && device.attributes["d.io"].x == 1'
    )


@pytest.mark.parametrize(
    ("expression", "drivers"),
    [
        ('device.driver == "a.io"', frozenset({"a.io"})),
        ('"a.io" == device.driver && device.attributes["a.io"].x', frozenset({"a.io"})),
        ('device.driver in ["a.io", "b.io"]', frozenset({"a.io", "b.io"})),
        ('device.driver in ["a.io", "b.io"] && device.driver == "b.io"', frozenset({"b.io"})),
        ('device.driver == "a.io" || device.driver == "b.io"', None),
        ("true", None),
        ('device.driver.startsWith("a")', None),
    ],
)
def test_constrained_drivers(expression: str, drivers: frozenset[str] | None) -> None:
    assert constrained_drivers(expression) == drivers


def test_lint_reports_syntax_errors() -> None:
    with pytest.raises(CelCompileError, match="Syntax error"):
        bare_lookups("device.attributes[")
