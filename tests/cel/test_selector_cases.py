"""Case table for DRA selectors: expression x device -> value or error (class + fragment)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kubedra.cel import CelCompileError, CelError, CelEvalError, compile_selector
from tests.cel.devices import DEVICES


@dataclass(frozen=True)
class Err:
    kind: type[CelError]
    fragment: str


C = CelCompileError
E = CelEvalError
GPU = 'device.attributes["gpu.nvidia.com"]'
CAP = 'device.capacity["gpu.nvidia.com"]'
DRA = 'device.attributes["dra.example.com"]'

# (id, expression, device, expected)
CASES: list[tuple[str, str, str, bool | Err]] = [
    # device fields and lookup semantics
    ("driver-eq", 'device.driver == "gpu.nvidia.com"', "gpu", True),
    ("driver-ne", 'device.driver != "gpu.nvidia.com"', "gpu", False),
    ("driver-in-list", 'device.driver in ["a", "gpu.nvidia.com"]', "gpu", True),
    ("driver-startswith", 'device.driver.startsWith("gpu.")', "gpu", True),
    ("attr-string", f'{GPU}.architecture == "Hopper"', "gpu", True),
    ("attr-int", f"{GPU}.count > 4", "gpu", True),
    ("attr-int-eq-double", f"{GPU}.count == 8.0", "gpu", True),
    ("attr-bool", f"{GPU}.mig", "gpu", True),
    ("attr-index-form", f'{GPU}["architecture"] == "Hopper"', "gpu", True),
    ("attr-qualified-other-domain", 'device.attributes["example.com"].zone == "a"', "gpu", True),
    (
        "attr-qualified-same-domain",
        f'{DRA}.name && device.attributes["other.example.com"].name',
        "dra",
        True,
    ),
    ("domain-in", '"gpu.nvidia.com" in device.attributes', "gpu", True),
    ("domain-not-in", '"nope.example.com" in device.attributes', "gpu", False),
    ("name-in-domain", f'"count" in {GPU}', "gpu", True),
    ("name-not-in-domain", f'"nope" in {GPU}', "gpu", False),
    ("unknown-domain-empty", 'device.attributes["no.such"].size() == 0', "gpu", True),
    (
        "unknown-domain-missing-key",
        'device.attributes["no.such"].x == 1',
        "gpu",
        Err(E, "no such key: x"),
    ),
    ("missing-key-select", f"{GPU}.nope == 1", "gpu", Err(E, "no such key: nope")),
    ("missing-key-index", f'{GPU}["nope"] == 1', "gpu", Err(E, "no such key: nope")),
    ("has-present", f"has({GPU}.count)", "gpu", True),
    ("has-absent", f"has({GPU}.nope)", "gpu", False),
    ("has-guard", f"has({GPU}.nope) && {GPU}.nope > 1", "gpu", False),
    ("capacity-compare", f'{CAP}.memory.compareTo(quantity("40Gi")) >= 0', "gpu", True),
    (
        "capacity-other-domain",
        'device.capacity["example.com"].power.isLessThan(quantity("1k"))',
        "gpu",
        True,
    ),
    ("allow-multiple", "device.allowMultipleAllocations", "gpu", True),
    ("allow-multiple-default", "device.allowMultipleAllocations == false", "small", True),
    (
        "attributes-exists-one",
        'device.attributes.exists_one(x, x == "gpu.nvidia.com")',
        "gpu",
        True,
    ),
    ("attributes-all-keys", "device.attributes.all(d, d.contains('.'))", "gpu", True),
    ("attribute-names-exists", f'{GPU}.exists(n, n == "mig")', "gpu", True),
    ("capacity-map-filter", f"{CAP}.filter(n, n.startsWith('m')).size() == 1", "gpu", True),
    (
        "macro-on-scalar",  # attributes are `any` typed until list attributes come in
        f"{GPU}.count.exists(x, x > 0)",
        "gpu",
        Err(C, "expression of type 'any' cannot be range of a comprehension"),
    ),
    (
        "macro-on-semver",
        f"{GPU}.driverVersion.exists(x, true)",
        "gpu",
        Err(C, "expression of type 'any' cannot be range of a comprehension"),
    ),
    ("bind", f"cel.bind(g, {GPU}, g.count == 8 && g.mig)", "gpu", True),
    ("bind-nested", "cel.bind(a, 1, cel.bind(b, a + 1, b == 2))", "gpu", True),
    (
        "dyn-result-non-bool",
        f"{GPU}.count",
        "gpu",
        Err(E, "CEL result of type int could not be converted to bool"),
    ),
    # seed compatibility: lenient vs strict
    ("seed-lenient", 'device.capacity["memory"].isGreaterThan(quantity("40Gi"))', "gpu", True),
    (
        "seed-lenient-small",
        'device.capacity["memory"].isGreaterThan(quantity("40Gi"))',
        "small",
        False,
    ),
    ("seed-lenient-attr", 'device.attributes["architecture"] == "Hopper"', "gpu", True),
    # Lenient mode: a bare name the device lacks makes the selector false for that device
    # (not a fatal error), and `||` still absorbs it as CEL absorbs errors.
    ("seed-lenient-missing", 'device.capacity["nope"].isGreaterThan(quantity("1"))', "gpu", False),
    ("seed-lenient-size-missing", 'device.attributes["nope"].size() == 0', "gpu", False),
    (
        "seed-lenient-missing-or",
        'device.capacity["nope"].isGreaterThan(quantity("1")) || device.driver == "gpu.nvidia.com"',
        "gpu",
        True,
    ),
    # quantity library
    ("quantity-gt", 'quantity("1Gi").isGreaterThan(quantity("1G"))', "gpu", True),
    ("quantity-lt", 'quantity("1G").isLessThan(quantity("1Gi"))', "gpu", True),
    ("quantity-compare-eq", 'quantity("1000m").compareTo(quantity("1")) == 0', "gpu", True),
    ("quantity-eq", 'quantity("1000m") == quantity("1")', "gpu", True),
    ("quantity-add", 'quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")', "gpu", True),
    ("quantity-add-int", 'quantity("1").add(2) == quantity("3")', "gpu", True),
    ("quantity-sub", 'quantity("2Gi").sub(quantity("1Gi")) == quantity("1Gi")', "gpu", True),
    ("quantity-sub-int", 'quantity("5").sub(2).asInteger() == 3', "gpu", True),
    ("quantity-sign", 'sign(quantity("-1")) == -1 && sign(quantity("0")) == 0', "gpu", True),
    ("quantity-sign-is-global", 'quantity("1").sign() == 1', "gpu",
     Err(C, "found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'")),
    (
        "quantity-is-integer",
        'quantity("1.5").isInteger() == false && quantity("2").isInteger()',
        "gpu",
        True,
    ),
    ("quantity-as-integer", 'quantity("1k").asInteger() == 1000', "gpu", True),
    ("quantity-as-integer-err", 'quantity("1.5").asInteger() == 1', "gpu", Err(E, "")),
    ("quantity-float", 'quantity("1.5").asApproximateFloat() == 1.5', "gpu", True),
    ("quantity-is-quantity", 'isQuantity("1Gi") && !isQuantity("1 Gi")', "gpu", True),
    ("quantity-parse-error", 'sign(quantity("abc")) == 0', "gpu", Err(E, "")),
    (
        "quantity-wrong-arg",
        "quantity(1).sign() == 0",
        "gpu",
        Err(C, "found no matching overload for 'quantity'"),
    ),
    # semver library
    ("semver-gt", f'{GPU}.driverVersion.isGreaterThan(semver("550.0.0"))', "gpu", True),
    ("semver-lt", f'{GPU}.driverVersion.isLessThan(semver("550.0.0"))', "small", True),
    ("semver-compare", 'semver("1.2.3").compareTo(semver("1.2.3")) == 0', "gpu", True),
    (
        "semver-parts",
        'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && '
        'semver("1.2.3").patch() == 3',
        "gpu",
        True,
    ),
    ("semver-prerelease", 'semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', "gpu", True),
    ("semver-normalize", 'semver("v1.2", true) == semver("1.2.0")', "gpu", True),
    ("semver-strict-v", 'semver("v1.2.3").major() == 1', "gpu", Err(E, "")),
    ("is-semver", 'isSemver("1.2.3") && !isSemver("1.2") && isSemver("v1.2", true)', "gpu", True),
    ("semver-eq-attr", f'{GPU}.driverVersion == semver("550.54.15")', "gpu", True),
    # compile errors
    ("syntax-error", "?!", "gpu", Err(C, "Syntax error")),
    ("syntax-error-position", "device.driver ==", "gpu", Err(C, "<input>:1:17")),
    ("undeclared", "x == 1", "gpu", Err(C, "ERROR: <input>:1:1: undeclared reference to 'x'")),
    ("undeclared-column", "true && nope", "gpu", Err(C, "<input>:1:9: undeclared reference")),
    ("undeclared-line", "true &&\n  nope", "gpu", Err(C, "<input>:2:3: undeclared reference")),
    ("undeclared-function", "frob(1) == 1", "gpu", Err(C, "undeclared reference to 'frob'")),
    ("undefined-field", "device.nope == 1", "gpu", Err(C, "undefined field 'nope'")),
    ("result-int", "1", "gpu", Err(C, "must evaluate to bool or the unknown type, not int")),
    (
        "result-string",
        "device.driver",
        "gpu",
        Err(C, "must evaluate to bool or the unknown type, not string"),
    ),
    (
        "wrong-arg-type",
        "device.driver.startsWith(1)",
        "gpu",
        Err(C, "found no matching overload for 'startsWith' applied to 'string.(int)'"),
    ),
    (
        "quantity-method-on-string",
        'device.driver.isGreaterThan(quantity("1"))',
        "gpu",
        Err(C, "found no matching overload"),
    ),
    (
        "capacity-static-type",
        f'{CAP}.memory.startsWith("x")',
        "gpu",
        Err(C, "found no matching overload for 'startsWith'"),
    ),
    ("int-uint-eq", "1 == 1u", "gpu", Err(C, "found no matching overload for '_==_'")),
    ("heterogeneous-list", '[1, "a"].size() == 2', "gpu", Err(C, "expected type 'int'")),
    (
        "bad-regex-literal",
        'device.driver.matches("[")',
        "gpu",
        Err(C, "<input>:1:23: invalid matches argument"),
    ),
    ("reserved-word", "if == 1", "gpu", Err(C, "Syntax error")),
    ("reverse-not-in-v2", '"abc".reverse() == "cba"', "gpu", Err(C, "found no matching")),
    ("too-long", "true && " * 1300 + "true", "gpu", Err(C, "expression too long")),
    (
        "cost-limit",
        "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10]"
        ".all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, "
        "[1,2,3,4,5,6,7,8,9,10].all(f, [1,2,3,4,5,6,7,8,9,10].all(g, int('1'.find('[0-9]*'))"
        " < 100)))))))",
        "gpu",
        Err(C, "too complex, exceeds cost limit"),
    ),
    # error semantics of && and ||
    ("or-error-true", f"{GPU}.nope == 1 || true", "gpu", True),
    ("or-true-error", f"true || {GPU}.nope == 1", "gpu", True),
    ("or-error-false", f"{GPU}.nope == 1 || false", "gpu", Err(E, "no such key: nope")),
    ("or-false-error", f"false || {GPU}.nope == 1", "gpu", Err(E, "no such key: nope")),
    ("and-error-false", f"{GPU}.nope == 1 && false", "gpu", False),
    ("and-false-error", f"false && {GPU}.nope == 1", "gpu", False),
    ("and-error-true", f"{GPU}.nope == 1 && true", "gpu", Err(E, "no such key")),
    ("and-true-error", f"true && {GPU}.nope == 1", "gpu", Err(E, "no such key")),
    ("or-non-bool", f"{GPU}.count || false", "gpu", Err(E, "no such overload")),
    ("or-non-bool-true", f"{GPU}.count || true", "gpu", True),
    ("ternary-error-cond", f"({GPU}.nope == 1) ? true : false", "gpu", Err(E, "no such key")),
    ("ternary-skips-branch", f"true ? true : {GPU}.nope == 1", "gpu", True),
    ("all-absorbs-error", f"[0, 1].all(i, i == 0 ? {GPU}.nope == 1 : false)", "gpu", False),
    ("exists-absorbs-error", f"[0, 1].exists(i, i == 0 ? {GPU}.nope == 1 : true)", "gpu", True),
    ("exists-error", f"[0].exists(i, {GPU}.nope == 1)", "gpu", Err(E, "no such key")),
    ("overflow-add", "9223372036854775807 + 1 > 0", "gpu", Err(E, "overflow")),
    ("overflow-mul", f"{GPU}.count * 9223372036854775807 > 0", "gpu", Err(E, "overflow")),
    ("div-zero", f"{GPU}.count / 0 == 1", "gpu", Err(E, "division by zero")),
    ("mod-zero", f"{GPU}.count % 0 == 1", "gpu", Err(E, "modulus by zero")),
    ("runtime-type-mismatch", f"{GPU}.architecture > 1", "gpu", Err(E, "no such overload")),
    (
        "runtime-bad-regex",
        f'"a".matches({GPU}.architecture + "[")',
        "gpu",
        Err(E, "error parsing regexp"),
    ),
    # list attributes
    (
        "list-attr-unsupported",
        'device.driver != ""',
        "listy",
        Err(E, "attribute names: unsupported attribute value"),
    ),
]

LIST_CASES: list[tuple[str, str, str, bool | Err]] = [
    ("includes-list", f'{DRA}.names.includes("fish")', "listy", True),
    ("includes-list-neg", f'{DRA}.names.includes("cat")', "listy", False),
    ("includes-scalar", f"{DRA}.name.includes(true)", "dra", True),
    ("in-list-attr", f"2 in {DRA}.ints", "listy", True),
    ("list-attr-size", f"{DRA}.names.size() == 2", "listy", True),
    ("list-attr-macro", f'{DRA}.names.all(x, x != "")', "listy", True),
    ("list-attr-sum", f"{DRA}.ints.sum() == 6", "listy", True),
]


def _run(expression: str, device: str, expected: bool | Err, **options: bool) -> None:
    if isinstance(expected, Err):
        with pytest.raises(expected.kind) as info:
            compile_selector(expression, **options).evaluate(DEVICES[device])
        assert expected.fragment in str(info.value)
    else:
        assert compile_selector(expression, **options).evaluate(DEVICES[device]) is expected


@pytest.mark.parametrize(("expression", "device", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])  # fmt: skip
def test_selector(expression: str, device: str, expected: bool | Err) -> None:
    _run(expression, device, expected)


@pytest.mark.parametrize(("expression", "device", "expected"),
                         [c[1:] for c in LIST_CASES], ids=[c[0] for c in LIST_CASES])  # fmt: skip
def test_list_attributes(expression: str, device: str, expected: bool | Err) -> None:
    _run(expression, device, expected, list_attributes=True)


STRICT: list[tuple[str, str, str, bool | Err]] = [
    (
        "seed-strict",
        'device.capacity["memory"].isGreaterThan(quantity("40Gi"))',
        "gpu",
        Err(C, "found no matching overload for 'isGreaterThan'"),
    ),
    ("seed-strict-attr-empty", 'device.attributes["architecture"].size() == 0', "gpu", True),
    (
        "seed-strict-attr-missing",
        'device.attributes["architecture"].x == 1',
        "gpu",
        Err(E, "no such key: x"),
    ),
    (
        "portable-form",
        'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))',
        "gpu",
        True,
    ),
]


@pytest.mark.parametrize(("expression", "device", "expected"),
                         [c[1:] for c in STRICT], ids=[c[0] for c in STRICT])  # fmt: skip
def test_strict(expression: str, device: str, expected: bool | Err) -> None:
    _run(expression, device, expected, strict=True)


def test_allow_multiple_allocations_needs_feature() -> None:
    with pytest.raises(CelCompileError, match="undefined field 'allowMultipleAllocations'"):
        compile_selector("device.allowMultipleAllocations", consumable_capacity=False)


def test_includes_needs_list_feature() -> None:
    with pytest.raises(CelCompileError, match="undeclared reference to 'includes'"):
        compile_selector(f'{DRA}.name.includes("fish")')


def test_runtime_cost_limit() -> None:
    expr = next(c[1] for c in CASES if c[0] == "cost-limit")
    selector = compile_selector(expr, enforce_cost_limit=False)
    with pytest.raises(CelEvalError, match="actual cost limit exceeded"):
        selector.evaluate(DEVICES["gpu"])


def test_compile_is_cached() -> None:
    assert compile_selector("true") is compile_selector("true")
    assert compile_selector("true") is not compile_selector("true", strict=True)


def test_cost_limit_not_absorbed_by_or() -> None:
    expr = next(c[1] for c in CASES if c[0] == "cost-limit")
    selector = compile_selector(f"({expr}) || true", enforce_cost_limit=False)
    with pytest.raises(CelEvalError, match="actual cost limit exceeded"):
        selector.evaluate(DEVICES["gpu"])


# Estimated costs from upstream's compile_test.go (DRA size hints).
COSTS = [
    ('device.driver == "dra.example.com"', 4),
    ('device.driver == ""', 2),
    ('"dra.example.com" in device.attributes', 3),
    (f"{DRA}.name", 4),
    (f'{DRA}["name"]', 4),
    (f"{DRA}.name > 0", 5),
    (f'{DRA}.name == "fish"', 5),
    (f"cel.bind(dra, {DRA}, dra.name)", 15),
    ('device.attributes.exists_one(x, x == "dra.example.com")', 164),
    ('device.capacity.exists_one(x, x == "dra.example.com")', 164),
    (f'{DRA}.exists_one(x, x == "services")', 133),
    (f'{DRA}.services.split("example").size() >= 2', 19),
    (f'{DRA}.services.matches("[^a]?sym")', 18),
    ('device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 6),
    (f'{DRA}.name.isGreaterThan(semver("0.0.1"))', 6),
    (f'{DRA}.name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)', 7),
    (
        '"name" in device.capacity["dra.example.com"] && '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        10,
    ),
    (
        '!("name" in device.capacity["dra.example.com"]) || '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        11,
    ),
    (f"{DRA}.a && {DRA}.b && {DRA}.c", 12),
    ("device.allowMultipleAllocations == true", 3),
    (f"{DRA}.name.exists(x, x > 0)", 5 + 6 * 64),
    (f'{DRA}.names.all(x, x != "")', 5 + 4 * 64),
    # Found by the differential run against upstream (tests/conformance), costs as
    # upstream's estimator gives them: equality traverses the smaller operand (a semver
    # beside a dyn attribute is unbounded, so the attribute's 64), O(1) between two
    # Kubernetes values; a call on dyn costs its dearest overload (string(dyn) may be
    # bytes -> string); Kubernetes' estimator prices indexOf by the node's own type; list
    # elements of an attribute have no size bound.
    (f'{DRA}.v == semver("1.0.0")', 12),
    (f"string({DRA}.index) == '2'", 12),
    (f"{DRA}.model.indexOf('1') == 1", 12),
    ('quantity("1Gi") == quantity("1Gi")', 3),
    ('device.capacity["dra.example.com"].memory == quantity("1Gi")', 6),
    (f"{DRA}.zones.map(z, z + '!')[0] == 'z1!'", 2**64 - 1),
]


@pytest.mark.parametrize(("expression", "cost"), COSTS, ids=[f"cost-{c}" for _, c in COSTS])
def test_estimated_cost(expression: str, cost: int) -> None:
    compiled = compile_selector(expression, list_attributes=True, enforce_cost_limit=False)
    assert compiled.estimated_cost == cost


def test_nested_all_estimate_matches_upstream() -> None:
    expr = next(c[1] for c in CASES if c[0] == "cost-limit")
    assert compile_selector(expr, enforce_cost_limit=False).estimated_cost == 85_555_551


@pytest.mark.parametrize("list_attributes", [False, True])
@pytest.mark.parametrize("expression", [
    f'device.driver == "gpu.nvidia.com" ? true : {GPU}.mig',
    f'device.driver != "gpu.nvidia.com" ? {GPU}.mig : true',
    f'device.driver != "x" ? (device.driver == "y" ? false : {GPU}.mig) : false',
])  # fmt: skip
def test_join_with_an_attribute_is_the_attribute_type(
    expression: str, list_attributes: bool
) -> None:
    """Found by `make conformance`: cel-go's join of bool and an attribute value is the
    attribute's own type (`any` without list attributes, `dyn` with them), which a selector
    may evaluate to; kubedra made it `dyn` and refused the new expression."""
    selector = compile_selector(expression, strict=True, list_attributes=list_attributes)
    assert selector.evaluate(DEVICES["gpu"]) is True


@pytest.mark.parametrize(("list_attributes", "typed"), [(False, "any"), (True, "dyn")])
def test_a_list_literal_of_bool_and_an_attribute_is_refused(
    list_attributes: bool, typed: str
) -> None:
    """Unlike a conditional, a list literal's elements must agree (upstream's words)."""
    with pytest.raises(CelCompileError, match=f"1:43: expected type 'bool' but found '{typed}'"):
        compile_selector(f"[true, {GPU}.mig][1]", strict=True, list_attributes=list_attributes)
