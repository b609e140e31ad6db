"""A grammar of DRA device selectors as real DeviceClasses and claims write them, and of
the devices they run on.

Atoms test the driver, attributes of every type (string, int, bool, version, lists),
capacities against quantities, presence (`in`, `has`, optional `?.`), semver, string
functions and regexes, cel.bind; they are combined with `&&`, `||`, `!` and `?:`. Some
atoms are wrong on purpose (a missing key, a type that does not fit, a bad quantity
literal, a bad regex), as real selectors sometimes are: upstream's answer to those is an
error, and kubedra's must be the same one.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

DOMAINS = ("gpu.example.com", "nic.example.com", "topo.example.com")
MODELS = ("a100", "h100", "l4", "H100-SXM", "")
VERSIONS = ("1.2.3", "1.10.0", "2.0.0-rc.1", "2.0.0", "0.0.1+build.5")
QUANTITIES = ("1", "2", "500m", "1500m", "4Gi", "16Gi", "40Gi", "40G", "1e3", "0.5Gi")


def _string_atoms(a: str) -> list[str]:
    return [
        f"{a}.model == 'h100'",
        f"{a}.model != 'l4'",
        f"{a}.model in ['a100', 'h100']",
        f"{a}.model.startsWith('h')",
        f"{a}.model.endsWith('00')",
        f"{a}.model.contains('10')",
        f"{a}.model.lowerAscii() == 'h100-sxm'",
        f"{a}.model.upperAscii().startsWith('H1')",
        f"{a}.model.matches('^[ah][0-9]+$')",
        f"{a}.model.find('[0-9]+') == '100'",
        f"{a}.model.findAll('[0-9]').size() >= 2",
        f"size({a}.model) > 3",
        f"{a}.model.split('0').size() > 1",
        f"{a}.model.replace('h', 'a') == 'a100'",
        f"{a}.model.indexOf('1') == 1",
        f"{a}.model.substring(1) == '100'",
        f"{a}.model.trim() == {a}.model",
        f"'%s-x'.format([{a}.model]) == 'h100-x'",
        f"{a}.model > 'b'",
        f"isURL('/' + {a}.model)",
        f"url('https://' + {a}.model + '.example.com:8080/x').getHostname().startsWith('h')",
        f"!format.dns1123Label().validate({a}.model).hasValue()",
        f"{a}.model.matches('(')",  # a bad regex: compile error
        f"{a}.model + 1 == 2",  # ill-typed at run time
    ]


def _int_atoms(a: str) -> list[str]:
    return [
        f"{a}.index >= 1",
        f"{a}.index % 2 == 0",
        f"{a}.index in [0, 2]",
        f"{a}.numa == 0",
        f"{a}.numa == {a}.index",
        f"int({a}.index) * 2 < 5",
        f"{a}.index / ({a}.numa) > 0",  # division by zero when numa is 0
        f"{a}.index == 1.0",
        f"double({a}.index) > 1.5",
        f"string({a}.index) == '2'",
    ]


def _bool_atoms(a: str) -> list[str]:
    return [f"{a}.healthy", f"!{a}.healthy", f"{a}.healthy == true", f"{a}.healthy || {a}.numa == 1"]


def _version_atoms(a: str) -> list[str]:
    v = "{}"
    return [
        f"{a}.driverVersion.isGreaterThan(semver('{v}'))",
        f"{a}.driverVersion.isLessThan(semver('{v}'))",
        f"{a}.driverVersion.compareTo(semver('{v}')) >= 0",
        f"{a}.driverVersion == semver('{v}')",
        f"{a}.driverVersion.major() >= 1",
        f"{a}.driverVersion.minor() == 10",
        f"{a}.driverVersion.patch() < 3",
        f"isSemver('{v}')",
        f"semver('{v}', true).major() == 1",
    ]


def _list_atoms(a: str) -> list[str]:
    return [
        f"{a}.ports.exists(p, p > 1)",
        f"{a}.ports.all(p, p < 2)",
        f"1 in {a}.ports",
        f"{a}.ports.size() == 2",
        f"'z1' in {a}.zones",
        f"{a}.zones.exists_one(z, z == 'z2')",
        f"{a}.ports.includes(1)",
        f"{a}.zones.includes('z3')",
        f"{a}.index.includes(1)",
        f"{a}.ports.filter(p, p > 0).size() > 0",
        f"{a}.zones.map(z, z + '!')[0] == 'z1!'",
    ]


def _capacity_atoms(c: str) -> list[str]:
    q = "{}"
    return [
        f"{c}.memory.compareTo(quantity('{q}')) >= 0",
        f"{c}.memory.isGreaterThan(quantity('{q}'))",
        f"{c}.memory.isLessThan(quantity('{q}'))",
        f"{c}.memory == quantity('{q}')",
        f"{c}.memory.asInteger() > 4",
        f"{c}.memory.asApproximateFloat() > 1e10",
        f"{c}.memory.add(quantity('{q}')).isGreaterThan(quantity('64Gi'))",
        f"{c}.memory.sub(1).sign() > 0",
        f"{c}.cores.isInteger()",
        f"{c}.cores.compareTo(quantity('{q}')) < 0",
        f"isQuantity('{q}') && quantity('{q}').isLessThan({c}.cores)",
        f"{c}.cores.asInteger() == 2",
    ]


def _device_atoms(domain: str) -> list[str]:
    a = f"device.attributes['{domain}']"
    c = f"device.capacity['{domain}']"
    return [
        f"device.driver == '{domain}'",
        "device.driver.endsWith('.example.com')",
        f"'model' in {a}",
        f"has({a}.index)",
        f"{a}.?model.orValue('none') == 'h100'",
        f"{a}.?index.hasValue()",
        f"cel.bind(x, {a}, has(x.healthy) && x.healthy)",
        f"'memory' in {c} && {c}.memory.isGreaterThan(quantity('20Gi'))",
        "device.attributes['topo.example.com'].pcieRoot == 'r0'",
        "'topo.example.com' in device.attributes",
        "device.allowMultipleAllocations",
        f"{a}.size() > 1",
        f"{a}.exists(k, k.startsWith('m'))",
        "device.capacity.all(d, d.endsWith('.com'))",
        *_string_atoms(a),
        *_int_atoms(a),
        *_bool_atoms(a),
        *_version_atoms(a),
        *_list_atoms(a),
        *_capacity_atoms(c),
    ]


def _safe_atoms(domain: str) -> list[str]:
    """Atoms that cannot fail on a device of the grammar: lookups are guarded."""
    a = f"device.attributes['{domain}']"
    c = f"device.capacity['{domain}']"
    return [
        f"device.driver == '{domain}'",
        f"{a}.?model.orValue('') == 'h100'",
        f"{a}.?model.orValue('').startsWith('a')",
        f"'model' in {a} && {a}.model in ['a100', 'l4']",
        f"{a}.?index.orValue(0) >= 1",
        f"has({a}.index) && {a}.index % 2 == 0",
        f"{a}.?healthy.orValue(true)",
        f"has({a}.driverVersion) && {a}.driverVersion.isGreaterThan(semver('{{}}'))",
        f"'memory' in {c} && {c}.memory.compareTo(quantity('{{}}')) >= 0",
        f"!('cores' in {c}) || {c}.cores.isLessThan(quantity('{{}}'))",
        "device.attributes['topo.example.com'].?pcieRoot.orValue('r0') == 'r0'",
        "device.allowMultipleAllocations",
    ]


@st.composite
def atom(draw: st.DrawFn, domain: str, safe: bool = False) -> str:
    # Now and then a risky atom even in "safe" mode: real selectors do fail.
    risky = not safe or draw(st.integers(0, 30)) == 0
    text = draw(st.sampled_from(_device_atoms(domain) if risky else _safe_atoms(domain)))
    if "'{}'" in text:
        literal = draw(st.sampled_from(VERSIONS if "semver" in text.lower() else QUANTITIES))
        text = text.replace("{}", literal)
    return text


@functools.cache
def selectors(domain: str, safe: bool = False) -> st.SearchStrategy[str]:
    """A boolean selector about devices of `domain` (`safe`: rarely one that can fail)."""
    def combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            inner.map(lambda e: f"!({e})"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        )

    return st.recursive(atom(domain, safe), combine, max_leaves=4 if not safe else 2)


@st.composite
def attributes(draw: st.DrawFn, domain: str, lists: bool) -> dict[str, Any]:
    """Wire-form attributes; keys bare (the driver's domain) or qualified."""
    pool: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "model": st.sampled_from(MODELS).map(lambda v: {"string": v}),
        "index": st.integers(0, 3).map(lambda v: {"int": v}),
        "numa": st.one_of(st.integers(0, 1).map(lambda v: {"int": v}),
                          st.just({"string": "0"})),
        "healthy": st.booleans().map(lambda v: {"bool": v}),
        "driverVersion": st.sampled_from(VERSIONS).map(lambda v: {"version": v}),
    }  # fmt: skip
    if lists:
        pool["ports"] = st.lists(st.integers(0, 2), min_size=1, max_size=3).map(
            lambda v: {"ints": v}
        )
        pool["zones"] = st.lists(st.sampled_from(["z1", "z2", "z3"]), min_size=1,
                                 max_size=3).map(lambda v: {"strings": v})  # fmt: skip
    out: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(sorted(pool)), max_size=5, unique=True)):
        key = f"{domain}/{name}" if draw(st.integers(0, 3)) == 0 else name
        out[key] = draw(pool[name])
    if draw(st.booleans()):
        out["topo.example.com/pcieRoot"] = {"string": draw(st.sampled_from(["r0", "r1"]))}
    return out


@st.composite
def cel_device(draw: st.DrawFn, lists: bool) -> dict[str, Any]:
    """A device as the oracle's `cel` mode takes it (upstream's cel.Device)."""
    domain = draw(st.sampled_from(DOMAINS[:2]))
    capacity = {
        name: {"value": draw(st.sampled_from(QUANTITIES))}
        for name in draw(st.lists(st.sampled_from(["memory", "cores"]), unique=True))
    }
    device: dict[str, Any] = {"driver": domain, "attributes": draw(attributes(domain, lists)),
                              "capacity": capacity}  # fmt: skip
    if draw(st.booleans()):
        device["allowMultipleAllocations"] = draw(st.booleans())
    return device


# feature tag -> what marks it in an expression
_TAGS = {
    "driver": "device.driver",
    "string-functions": (".startsWith(", ".endsWith(", ".contains(", "Ascii()", ".split(",
                         ".replace(", ".indexOf(", ".substring(", ".trim(", ".format("),
    "regex": (".matches(", ".find(", ".findAll("),
    "url": ("url(", "isURL("),
    "named-formats": ("format.",),
    "int-attributes": (".index", ".numa"),
    "bool-attributes": (".healthy",),
    "semver": ("semver(", "driverVersion"),
    "quantity": ("quantity(", ".memory", ".cores"),
    "list-attributes": (".ports", ".zones", ".includes("),
    "presence": (" in device", "has(", ".?"),
    "cel.bind": ("cel.bind(",),
    "comprehensions": (".exists(", ".all(", ".exists_one(", ".filter(", ".map("),
    "other-domain": ("topo.example.com",),
    "allowMultipleAllocations": ("allowMultipleAllocations",),
}  # fmt: skip


def tags(expression: str) -> frozenset[str]:
    return frozenset(
        tag
        for tag, marks in _TAGS.items()
        if any(m in expression for m in ((marks,) if isinstance(marks, str) else marks))
    )


@st.composite
def cases(draw: st.DrawFn) -> Any:
    """A selector and the devices it runs on (a tests.conformance.cel_case.CelCase)."""
    from tests.conformance.cel_case import CelCase

    lists = draw(st.booleans())
    devices = tuple(draw(st.lists(cel_device(lists), min_size=1, max_size=4)))
    expression = draw(selectors(draw(st.sampled_from(DOMAINS[:2]))))
    return CelCase(
        expression,
        devices,
        consumable_capacity=draw(st.integers(0, 4)) > 0,
        list_attributes=lists,
        new_expression=draw(st.booleans()),
        tags=tags(expression),
    )
