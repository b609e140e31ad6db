"""`DeviceView.of` (lazy, from a published Device) and the compiler's shortcuts (one entry
looked up on the view, constants folded, constant regexes, `domain in device.attributes`)
against the plain path: a view built whole from converted values and a program compiled
without any shortcut. Every outcome must be the same: the value, or the error and its text.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubedra.api.quantity import Quantity
from kubedra.api.resource import Device, DeviceAttribute, DeviceCapacity
from kubedra.api.semver import Semver, SemverError
from kubedra.cel import CelError, CelEvalError, DeviceView, compile_selector
from kubedra.cel.compiler import Compiler
from kubedra.cel.runtime import COST_LIMIT
from tests.cel import test_selector_cases
from tests.cel.devices import DEVICES
from tests.conformance.cel_case import _decode_device
from tests.conformance.cel_grammar import cases

Outcome = tuple[str, object]


# -- the plain path ----------------------------------------------------------------------
def whole_view(driver: str, device: Device) -> DeviceView | str:
    """The device converted up front, as the allocator did before views were lazy: the
    view, or why every selector fails on the device."""
    values: dict[str, Any] = {}
    for name, attr in device.attributes.items():
        scalars = (attr.int_, attr.bool_, attr.string)
        lists = (attr.ints, attr.bools, attr.strings)
        try:
            if any(v is not None for v in scalars):
                values[name] = next(v for v in scalars if v is not None)
            elif attr.version is not None:
                values[name] = Semver.parse(attr.version)
            elif any(lists):
                values[name] = tuple(next(v for v in lists if v))
            elif attr.versions:
                values[name] = tuple(Semver.parse(v) for v in attr.versions)
            else:
                return f"attribute {name}: unsupported attribute value"
        except SemverError as exc:
            return f"parse semantic version: {exc}"
    capacity = {name: cap.value for name, cap in device.capacity.items()}
    return DeviceView(driver, values, capacity, bool(device.allow_multiple_allocations))


@contextmanager
def no_shortcuts() -> Iterator[None]:
    with (
        mock.patch.object(Compiler, "_specialised", lambda *a: None),
        mock.patch.object(Compiler, "_device_entry", lambda *a: None),
    ):
        yield


@functools.cache
def compile_both(expression: str, strict: bool, lists: bool = True) -> tuple[Any, Any]:
    """(with shortcuts, without); a compile error is the outcome of both."""
    options = {"strict": strict, "list_attributes": lists, "enforce_cost_limit": False}
    fast = _compiled(expression, options)
    with no_shortcuts():
        plain = _compiled(expression, options)
    return fast, plain


def _compiled(expression: str, options: Mapping[str, Any]) -> Any:
    try:
        return compile_selector.__wrapped__(expression, **options)  # type: ignore[attr-defined]
    except CelError as exc:
        return ("compile", type(exc).__name__, str(exc))


def outcome(compiled: Any, view: DeviceView | str) -> Outcome:
    if isinstance(compiled, tuple):
        return compiled
    if isinstance(view, str):
        return ("error", view)  # the allocator's answer for every selector
    try:
        return ("value", compiled.evaluate(view))
    except CelError as exc:
        return ("error", f"{type(exc).__name__}: {exc}")


def _lazy_outcome(compiled: Any, view: DeviceView) -> Outcome:
    if isinstance(compiled, tuple):
        return compiled
    try:
        return ("value", compiled.evaluate(view))
    except CelEvalError as exc:
        if view.problem is not None:
            return ("error", str(exc))
        return ("error", f"{type(exc).__name__}: {exc}")
    except CelError as exc:
        return ("error", f"{type(exc).__name__}: {exc}")


def assert_same(expressions: list[str], driver: str, device: Device, strict: bool) -> None:
    reference = whole_view(driver, device)
    compiled = [compile_both(e, strict) for e in expressions]
    expected = [outcome(plain, reference) for _, plain in compiled]
    fresh = [_lazy_outcome(fast, DeviceView.of(driver, device)) for fast, _ in compiled]
    assert fresh == expected, expressions
    shared = DeviceView.of(driver, device)  # one view for all, in reverse order
    again = [_lazy_outcome(fast, shared) for fast, _ in reversed(compiled)]
    assert again[::-1] == expected
    if not isinstance(reference, str):  # the shortcuts on a whole view, too
        assert [outcome(fast, reference) for fast, _ in compiled] == expected


# -- published devices -------------------------------------------------------------------
def published(view: DeviceView, bare_own: bool = True) -> Device:
    """A Device that publishes what `view` holds (own-domain keys bare or qualified)."""
    attributes: dict[str, DeviceAttribute] = {}
    for domain, values in view.attributes.items():
        for name, value in values.items():
            key = name if bare_own and domain == view.driver else f"{domain}/{name}"
            attributes[key] = _attribute(value)
    capacity = {
        (name if bare_own and domain == view.driver else f"{domain}/{name}"): DeviceCapacity(q)
        for domain, values in view.capacity.items()
        for name, q in values.items()
        if isinstance(q, Quantity)
    }
    multi = view.allow_multiple_allocations or None
    return Device(
        name="d", attributes=attributes, capacity=capacity, allow_multiple_allocations=multi
    )


def _attribute(value: object) -> DeviceAttribute:
    if isinstance(value, tuple):
        first = value[0]
        if isinstance(first, Semver):
            return DeviceAttribute(versions=tuple(str(v) for v in value))
        if isinstance(first, bool):
            return DeviceAttribute(bools=value)  # type: ignore[arg-type]
        if isinstance(first, int):
            return DeviceAttribute(ints=value)  # type: ignore[arg-type]
        return DeviceAttribute(strings=value)  # type: ignore[arg-type]
    if isinstance(value, Semver):
        return DeviceAttribute(version=str(value))
    if isinstance(value, bool):
        return DeviceAttribute(bool_=value)
    if isinstance(value, int):
        return DeviceAttribute(int_=value)
    return DeviceAttribute(string=str(value))


def _cheap(expression: str) -> bool:
    """Not one of the table's cost-limit cases (seconds each; the shortcuts stay out of
    programs that count cost anyway)."""
    try:
        cost = compile_selector(expression, list_attributes=True, enforce_cost_limit=False)
    except CelError:
        return True
    return cost.estimated_cost <= COST_LIMIT


TABLE = sorted(
    e
    for e in {row[1] for row in test_selector_cases.CASES + test_selector_cases.LIST_CASES}
    if _cheap(e)
)


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
@pytest.mark.parametrize("bare_own", [True, False], ids=["bare", "qualified"])
@pytest.mark.parametrize("name", sorted(DEVICES))
def test_case_table_on_published_devices(name: str, bare_own: bool, strict: bool) -> None:
    view = DEVICES[name]
    assert_same(TABLE, view.driver, published(view, bare_own), strict)


# Devices no API server admits but a store may still hold, and keys that test the rules.
def _a(**kw: Any) -> DeviceAttribute:
    return DeviceAttribute(**kw)


D = "dra.example.com"
ODD_DEVICES = {
    "bare-and-qualified": Device(
        attributes={
            "n": _a(int_=1),
            f"{D}/n": _a(int_=2),
            f"{D}/m": _a(string="x"),
            "m": _a(string="y"),
        },
        capacity={
            "memory": DeviceCapacity(Quantity.parse("1Gi")),
            f"{D}/memory": DeviceCapacity(Quantity.parse("2Gi")),
        },
    ),
    "slashes": Device(
        attributes={"a/b/c": _a(int_=1), "/x": _a(string="empty domain"), "a/": _a(bool_=True)},
        capacity={"a/b/c": DeviceCapacity(Quantity.parse("3"))},
    ),
    "nul-keys": Device(attributes={"x\0y/n": _a(int_=1), "z/n": _a(int_=2)}),
    "nul-keys-2": Device(attributes={"x\0y/n": _a(int_=1), "y/n": _a(int_=2)}),
    "bad-version": Device(attributes={"n": _a(int_=1), "v": _a(version="1.0")}),
    "bad-version-list": Device(attributes={"v": _a(versions=("1.0.0", "01.0.0"))}),
    "unsupported": Device(attributes={"n": _a(int_=1), "empty": _a(), "v": _a(version="x")}),
    "lists": Device(
        attributes={
            "ports": _a(ints=(1, 2)),
            "zones": _a(strings=("z1",)),
            "n": _a(int_=3),
            "vs": _a(versions=("1.2.3", "2.0.0-rc.1")),
        },
    ),
    "two-values": Device(
        attributes={"n": _a(int_=1, string="s"), "v": _a(string="1", version="x")}
    ),
    "versions": Device(attributes={"v": _a(version="1.2.3+b"), f"{D}/w": _a(version="2.0.0-rc.1")}),
    "empty": Device(),
}
ODD_EXPRESSIONS = [
    f'device.attributes["{D}"].n == 1',
    f'device.attributes["{D}"].n == 2',
    f'device.attributes["{D}"].m',
    f'has(device.attributes["{D}"].n)',
    f'has(device.attributes["{D}"].nope)',
    f'device.attributes["{D}"].size()',
    f'device.capacity["{D}"].memory.compareTo(quantity("1Gi"))',
    f'has(device.capacity["{D}"].memory)',
    f'"{D}" in device.attributes',
    f'"{D}" in device.capacity',
    '"a" in device.attributes',
    '"a/b" in device.attributes',
    '"" in device.attributes',
    '"x" in device.attributes',
    '"y" in device.attributes',
    '"x\\u0000y" in device.attributes',
    'device.attributes["a"]["b/c"] == 1',
    'device.attributes["a/b"].c == 1',
    'has(device.attributes["a/b"].c)',
    'device.attributes[""].x',
    'device.attributes["a"][""]',
    'device.capacity["a"]["b/c"].isGreaterThan(quantity("2"))',
    'device.capacity["a/b"].c',
    'device.attributes["x\\u0000y"].n',
    'device.attributes["y"].n',
    f'device.attributes["{D}"].v.isGreaterThan(semver("1.0.0"))',
    f'device.attributes["{D}"].w.compareTo(semver("2.0.0"))',
    f'device.attributes["{D}"].v == semver("1.2.3")',
    f'device.attributes["{D}"].ports.includes(2)',
    f'device.attributes["{D}"].vs[1].isLessThan(semver("2.0.0"))',
    f'device.attributes["{D}"].zones.exists(z, z.matches("^z[0-9]$"))',
    f'device.attributes["{D}"].n.matches("^3$")',
    f'device.attributes["{D}"].m.matches("^[xy]$")',
    f'matches(device.attributes["{D}"].m, "y")',
    'device.attributes.exists(d, d == "a")',
    "device.attributes.size() + device.capacity.size()",
    "device.attributes == {}",
    f'device.attributes["{D}"] == {{"n": 2, "m": "y"}}',
    "memory in device.capacity",
    "device.attributes.n == 1",
    'device.attributes["n"] == 1',
    'device.capacity["memory"].isGreaterThan(quantity("1Gi"))',
    "true || semver('bad') == semver('1.0.0')",
    "false || semver('bad') == semver('1.0.0')",
    "semver('1.2.3', true) == semver('1.2.3')",
    "semver('v1.2', true).isGreaterThan(semver('1.1.0'))",
    "quantity('1Gi') == quantity('1024Mi')",
    "quantity('bad').isInteger()",
    "true || quantity('bad').isInteger()",
    "'abc'.matches('b') && matches('abc', '^a') && !'x'.matches('y')",
    "'ünï'.matches('^.n.$') && 'ünï'.matches('\\\\pL+')",
    "dyn(1).matches('1')",
    "dyn('1').matches('1')",
    "'a' in dyn(device.attributes)",
    f'[device.attributes].exists(device, "{D}" in device)',
    f'[{{"attributes": {{}}}}].exists(device, "{D}" in device.attributes)',
    f'[{{"attributes": {{"{D}": {{"n": 7}}}}}}].all(device, device.attributes["{D}"].n == 7)',
    'cel.bind(device, {"capacity": {}}, has(device.capacity.x))',
]


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
@pytest.mark.parametrize("name", sorted(ODD_DEVICES))
def test_odd_devices(name: str, strict: bool) -> None:
    assert_same(ODD_EXPRESSIONS, D, ODD_DEVICES[name], strict)


def test_the_device_problem_comes_first_in_attribute_order() -> None:
    view = DeviceView.of(D, ODD_DEVICES["unsupported"])
    assert view.problem == "attribute empty: unsupported attribute value"
    selector = compile_selector("true", strict=True)
    with pytest.raises(CelEvalError, match="attribute empty: unsupported"):
        selector.evaluate(view)
    lists = DeviceView.of(D, ODD_DEVICES["lists"])
    assert lists.problem is None and lists.list_attribute == "ports"
    with pytest.raises(CelEvalError, match="attribute ports: unsupported attribute value"):
        selector.evaluate(lists)
    assert compile_selector("true", strict=True, list_attributes=True).evaluate(lists) is True


def test_one_entry_converts_that_entry_only() -> None:
    device = ODD_DEVICES["bad-version"]
    view = DeviceView.of(D, device)
    assert view.attribute(D, "n", f"{D}/n") == 1
    assert view._attributes is None  # no whole map was built
    assert view.has_domain("attributes", D) and not view.has_domain("attributes", "x")
    assert view._attributes is None


# -- generated selectors and devices -------------------------------------------------------
@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(case=cases(), strict=st.booleans())
def test_generated_selectors_on_generated_devices(case: Any, strict: bool) -> None:
    for wire in case.devices:
        assert_same([case.expression], wire["driver"], _decode_device(wire), strict)


def test_shortcuts_compile_where_expected() -> None:
    """The shortcuts are taken (else this file would test nothing)."""
    taken: list[str] = []
    original = Compiler._specialised

    def spy(self: Compiler, node: Any, *rest: Any) -> Any:
        found = original(self, node, *rest)
        if found is not None:
            taken.append(node.function)
        return found

    with mock.patch.object(Compiler, "_specialised", spy):
        for expression in ODD_EXPRESSIONS:
            compile_both.__wrapped__(expression, True)
    assert {"semver", "quantity", "matches", "@in"} <= set(taken)


PATTERNS = ["", "b", "^a", "a$", "^$", "^NVIDIA H(100|200)", "(?i)nvidia", "\\pL+", "^.n.$",
            "[[:digit:]]{3}", "x*", "\\bH100\\b", "(?m)^b$", "a.c", "(?s)a.c", "é", "\\x{1F600}",
            "^\\d+$", "\\w+\\s\\w+"]  # fmt: skip
TEXTS = ["", "a", "abc", "ünï", "NVIDIA H100 80GB HBM3", "nvidia h200", "a\nb\nc", "a\nc",
         "123", "١٢٣", "é", "x😀y", "H100-SXM", "a b", "NVIDIA H1000"]  # fmt: skip


def test_regex_search_answers_as_re2_search() -> None:
    import re2  # type: ignore[import-untyped,unused-ignore]

    from kubedra.cel.stdlib import compile_regex, searcher

    for pattern in PATTERNS:
        regexp, search = compile_regex(pattern), searcher(pattern)
        for text in TEXTS:
            assert search(text) is (regexp.search(text) is not None), (pattern, text)
            assert search(text) is (re2.search(pattern, text) is not None), (pattern, text)
