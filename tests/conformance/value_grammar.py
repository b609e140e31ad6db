"""Plain CEL expressions over the libraries the CEL gap list named: IP and CIDR, quantities,
semver, strings (offsets past the end too), optional values, mixed numbers, format, regexes,
URLs, and Kubernetes' named formats (`format.dns1123Label().validate(...)`).

Inputs are drawn from near-valid text (an octet of 256, a leading zero, a zone, an
IPv4-mapped address, a fraction with a binary suffix...), where parsers differ most.
"""

from __future__ import annotations

import functools

from hypothesis import strategies as st

from tests.conformance.cel_value import ValueCase

_IPS = ("1.2.3.4", "0.0.0.0", "255.255.255.255", "1.2.3.256", "01.2.3.4", "1.2.3", "1..2.3",
        "127.0.0.1", "169.254.1.1", "224.0.0.1", "8.8.8.8", "::", "::1", "fe80::1",
        "fe80::1%eth0", "::ffff:1.2.3.4", "::1.2.3.4", "2001:db8::1", "2001:0db8::1",
        "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "12345::", "1::2::3", "ff02::1", "", "x")  # fmt: skip
_PREFIXES = ("/0", "/8", "/16", "/24", "/32", "/33", "/64", "/128", "/01", "", "/x")
_QUANTITIES = ("0", "1", "-1", "1.5", "0.5Gi", "1Gi", "1e3", "1E-3", "1m", "1000m", "2.0",
               ".5", "5.", "1Ki", "1Ei", "8Ei", "999999999999999999", "9223372036854775807",
               "1.0000000001", "100n", "1u", "abc", "1GB", "+1", "-0")  # fmt: skip
_VERSIONS = ("1.2.3", "v1.2.3", "1.2", "01.2.3", "1.2.3-rc.1+b.5", "1.2.3-01", "0.0.0",
             "1.10.0", "2.0.0-alpha", "x")  # fmt: skip
_WORDS = ("", "a", "hello", "héllo", "a,b,c", "AbC", "  x  ")
_NUMBERS = ("1", "-1", "0", "1u", "0u", "1.5", "-0.0", "9223372036854775807",
            "-9223372036854775808", "18446744073709551615u", "1e300", "0.0/0.0",
            "9223372036854775808.0", "-9223372036854775809.0")  # fmt: skip

# Pieces of URLs, joined at random: schemes, authorities, IPv6 literals and zones, ports,
# escapes valid or not per part, queries, fragments, and bytes each part must escape.
_URL_PIECES = ("http://", "https://", "HTTP://", "foo://", "mailto:", "1a:", "//", "/", "///",
               "@", "u:p@", ":", ":80", ":x", "[::1]", "[fe80::1%25eth0]", "[1.2.3.4]",
               "example.com", "%", "%2", "%25", "%2F", "%41", "%C3%A4", "%FF", "%zz", "?", "&",
               "=", ";", "k=v", "#", "[", "]", " ", "+", "*", "!", "'", "~", ".", "..", "a",
               "ä", "€", "\\", '"', "<", "^", "{", "|", "\t")  # fmt: skip
_URL_CALLS = ("url({0})", "isURL({0})", "url({0}).getScheme()", "url({0}).getHost()",
              "url({0}).getHostname()", "url({0}).getPort()", "url({0}).getEscapedPath()",
              "url({0}).getQuery()", "url({0}) == url({1})", "type(url({0}))")  # fmt: skip

_FORMATS = ("dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
            "dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue",
            "uri", "uuid", "byte", "date", "datetime")  # fmt: skip
# Pieces of names, dates, UUIDs and base64, joined at random (with lengths past 63).
_NAME_PIECES = ("a", "Z", "0", "-", ".", "_", "/", "é", "example.com", "my-name", "a" * 30,
                "2024-02-29", "2023-02-29", "T", "t", "10:00:00", "23:59:60", "z", "+01:00",
                ".123", "123e4567", "e89b", "aGk=", "==", ":", "http://x")  # fmt: skip


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def _ip_expr(draw: st.DrawFn) -> str:
    a, b = _q(draw(st.sampled_from(_IPS))), _q(draw(st.sampled_from(_IPS)))
    net = _q(draw(st.sampled_from(_IPS)) + draw(st.sampled_from(_PREFIXES)))
    net2 = _q(draw(st.sampled_from(_IPS)) + draw(st.sampled_from(_PREFIXES)))
    return draw(st.sampled_from([
        f"ip({a})", f"isIP({a})", f"ip({a}).family()", f"ip.isCanonical({a})",
        f"string(ip({a}))", f"ip({a}).isLoopback()", f"ip({a}).isUnspecified()",
        f"ip({a}).isLinkLocalUnicast()", f"ip({a}).isLinkLocalMulticast()",
        f"ip({a}).isGlobalUnicast()", f"ip({a}) == ip({b})", f"cidr({net})", f"isCIDR({net})",
        f"cidr({net}).prefixLength()", f"string(cidr({net}).masked())",
        f"string(cidr({net}).ip())", f"cidr({net}).containsIP({a})",
        f"cidr({net}).containsIP(ip({a}))", f"cidr({net}).containsCIDR({net2})",
        f"cidr({net}).containsCIDR(cidr({net2}))", f"cidr({net}) == cidr({net2})",
    ]))  # fmt: skip


@st.composite
def _quantity_expr(draw: st.DrawFn) -> str:
    a, b = _q(draw(st.sampled_from(_QUANTITIES))), _q(draw(st.sampled_from(_QUANTITIES)))
    n = draw(st.sampled_from(["1", "-2", "9223372036854775807"]))
    return draw(st.sampled_from([
        f"quantity({a})", f"isQuantity({a})", f"quantity({a}).isInteger()",
        f"quantity({a}).asInteger()", f"quantity({a}).asApproximateFloat()",
        f"sign(quantity({a}))", f"quantity({a}).compareTo(quantity({b}))",
        f"quantity({a}).isGreaterThan(quantity({b}))", f"quantity({a}).add(quantity({b}))",
        f"quantity({a}).sub(quantity({b})).isInteger()", f"quantity({a}).add({n}).asInteger()",
        f"quantity({a}) == quantity({b})",
    ]))  # fmt: skip


@st.composite
def _semver_expr(draw: st.DrawFn) -> str:
    a, b = _q(draw(st.sampled_from(_VERSIONS))), _q(draw(st.sampled_from(_VERSIONS)))
    return draw(st.sampled_from([
        f"semver({a})", f"isSemver({a})", f"isSemver({a}, true)", f"semver({a}, true).major()",
        f"semver({a}).minor()", f"semver({a}).patch()", f"semver({a}).compareTo(semver({b}))",
        f"semver({a}).isLessThan(semver({b}))", f"semver({a}) == semver({b})",
    ]))  # fmt: skip


@st.composite
def _string_expr(draw: st.DrawFn) -> str:
    s, t = _q(draw(st.sampled_from(_WORDS))), _q(draw(st.sampled_from(_WORDS)))
    i, j = draw(st.integers(-1, 8)), draw(st.integers(-1, 8))
    return draw(st.sampled_from([
        f"{s}.indexOf({t})", f"{s}.indexOf({t}, {i})", f"{s}.lastIndexOf({t}, {i})",
        f"{s}.substring({i})", f"{s}.substring({i}, {j})", f"{s}.charAt({i})",
        f"{s}.split({t})", f"{s}.split({t}, {i})", f"{s}.replace({t}, 'x')",
        f"{s}.replace({t}, 'x', {i})", f"{s}.lowerAscii()", f"{s}.upperAscii()",
        f"{s}.trim()", f"{s}.matches({t})", f"{s}.find('[a-c]+')", f"{s}.findAll('.', {i})",
        f"[{s}, {t}].join('-')", f"strings.quote({s})", f"size({s})",
    ]))  # fmt: skip


@st.composite
def _misc_expr(draw: st.DrawFn) -> str:
    x, y = draw(st.sampled_from(_NUMBERS)), draw(st.sampled_from(_NUMBERS))
    verb = draw(st.sampled_from(["%s", "%d", "%f", "%.2f", "%e", "%x", "%X", "%o", "%b"]))
    return draw(st.sampled_from([
        f"dyn({x}) < dyn({y})", f"dyn({x}) == dyn({y})", f"int({x})", f"uint({x})",
        f"double({x})", f"string({x})", f"'{verb}'.format([{x}])",
        f"'{verb} {verb}'.format([{x}, {y}])", f"optional.of({x}).optMap(v, v)",
        f"[?optional.of({x}), ?optional.none()]", f"{{'k': {x}}}.?k.orValue({x})",
        f"optional.none().orValue({x})", f"[{x}].first()", f"[{x}, {x}].last().value()",
        f"has({{'a': {{'b': {x}}}}}.?a.b)", "optional_type", f"type(optional.of({x}))",
    ]))  # fmt: skip


@st.composite
def _url_expr(draw: st.DrawFn) -> str:
    pieces = st.lists(st.sampled_from(_URL_PIECES), max_size=9).map("".join)
    a, b = draw(pieces), draw(pieces)
    return draw(st.sampled_from(_URL_CALLS)).format(_q(a), _q(b))


@st.composite
def _named_format_expr(draw: st.DrawFn) -> str:
    text = _q("".join(draw(st.lists(st.sampled_from(_NAME_PIECES), max_size=8))))
    name, other = draw(st.sampled_from(_FORMATS)), draw(st.sampled_from(_FORMATS))
    return draw(st.sampled_from([
        f"format.{name}().validate({text})", f"format.named('{name}').value().validate({text})",
        f"format.named({text}).hasValue()", f"format.{name}() == format.{other}()",
        f"type(format.{name}())",
    ]))  # fmt: skip


@functools.cache
def cases() -> st.SearchStrategy[ValueCase]:
    def case(tag: str, strategy: st.SearchStrategy[str]) -> st.SearchStrategy[ValueCase]:
        return strategy.map(lambda e: ValueCase(e, frozenset({tag})))

    return st.one_of(
        case("ip/cidr", _ip_expr()),
        case("quantity", _quantity_expr()),
        case("semver", _semver_expr()),
        case("strings", _string_expr()),
        case("numbers/optional/format", _misc_expr()),
        case("url", _url_expr()),
        case("named formats", _named_format_expr()),
    )
