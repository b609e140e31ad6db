"""The Kubernetes IP and CIDR CEL libraries (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go).

Addresses parse as Go's net/netip does, with its error texts: IPv4 needs four decimal
fields without leading zeros; IPv6 groups have at most four hex digits, one `::`, and an
embedded IPv4 tail. Kubernetes then rejects zones and IPv4-mapped IPv6 addresses.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from kubedra.cel.errors import CelEvalError
from kubedra.cel.goquote import go_quote as _quote
from kubedra.cel.registry import Library
from kubedra.cel.types import BOOL, CIDR, INT, IP, STRING


@dataclass(frozen=True, slots=True)
class IPAddress:
    """A `net.IP` value: 4 or 16 bytes as an integer."""

    bits: int  # 32 or 128
    value: int

    def __str__(self) -> str:
        if self.bits == 32:
            return str(ipaddress.IPv4Address(self.value))
        return ipaddress.IPv6Address(self.value).compressed

    def byte(self, i: int) -> int:
        return (self.value >> (self.bits - 8 * (i + 1))) & 0xFF

    def group(self, i: int) -> int:
        """The i-th 16-bit group of an IPv6 address."""
        return (self.value >> (128 - 16 * (i + 1))) & 0xFFFF


@dataclass(frozen=True, slots=True)
class CIDRPrefix:
    """A `net.CIDR` value: an address (not necessarily masked) and a prefix length."""

    ip: IPAddress
    length: int

    def __str__(self) -> str:
        return f"{self.ip}/{self.length}"

    def mask(self) -> int:
        return ((1 << self.ip.bits) - 1) ^ ((1 << (self.ip.bits - self.length)) - 1)

    def contains(self, ip: IPAddress) -> bool:
        if ip.bits != self.ip.bits:
            return False
        return (ip.value ^ self.ip.value) & self.mask() == 0


class AddrError(Exception):
    """netip.ParseAddr's error."""

    def __init__(self, text: str, message: str, at: str = "") -> None:
        quoted = f"ParseAddr({_quote(text)}): {message}"
        super().__init__(f"{quoted} (at {_quote(at)})" if at else quoted)


def parse_addr(text: str) -> tuple[IPAddress, str]:
    """netip.ParseAddr: the address and its zone (empty when none)."""
    for ch in text:
        if ch == ".":
            return IPAddress(32, _ipv4_fields(text, text)), ""
        if ch == ":":
            return _ipv6(text)
        if ch == "%":
            raise AddrError(text, "missing IPv6 address")
    raise AddrError(text, "unable to parse IP")


def _ipv4_fields(whole: str, s: str) -> int:
    value = pos = digits = field = 0
    for i, ch in enumerate(s):
        if "0" <= ch <= "9":
            if digits == 1 and field == 0:
                raise AddrError(whole, "IPv4 field has octet with leading zero")
            field = field * 10 + ord(ch) - 48
            digits += 1
            if field > 255:
                raise AddrError(whole, "IPv4 field has value >255")
        elif ch == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise AddrError(whole, "IPv4 field must have at least one digit", s[i:])
            if pos == 3:
                raise AddrError(whole, "IPv4 address too long")
            value, pos, field, digits = (value << 8) | field, pos + 1, 0, 0
        else:
            raise AddrError(whole, "unexpected character", s[i:])
    if pos < 3:
        raise AddrError(whole, "IPv4 address too short")
    return (value << 8) | field


def _ipv6(whole: str) -> tuple[IPAddress, str]:
    s, sep, zone = whole.partition("%")
    if sep and not zone:
        raise AddrError(whole, "zone must be a non-empty string")
    groups: list[int] = []  # 16-bit groups
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return IPAddress(128, 0), zone
    while len(groups) < 8:
        off, acc = 0, 0
        while off < len(s) and s[off] in "0123456789abcdefABCDEF":
            acc = (acc << 4) + int(s[off], 16)
            if off > 3:
                raise AddrError(whole, "each group must have 4 or less digits", s)
            off += 1
        if off == 0:
            raise AddrError(whole, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            groups.extend(_embedded_ipv4(whole, s, groups, ellipsis))
            s = ""
            break
        groups.append(acc)
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise AddrError(whole, "unexpected character, want colon", s)
        if len(s) == 1:
            raise AddrError(whole, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise AddrError(whole, "multiple :: in address", s)
            ellipsis, s = len(groups), s[1:]
            if not s:
                break
    if s:
        raise AddrError(whole, "trailing garbage after address", s)
    if len(groups) < 8:
        if ellipsis < 0:
            raise AddrError(whole, "address string too short")
        groups[ellipsis:ellipsis] = [0] * (8 - len(groups))
    elif ellipsis >= 0:
        raise AddrError(whole, "the :: must expand to at least one field of zeros")
    value = 0
    for g in groups:
        value = (value << 16) | g
    return IPAddress(128, value), zone


def _embedded_ipv4(whole: str, s: str, groups: list[int], ellipsis: int) -> list[int]:
    if ellipsis < 0 and len(groups) != 6:
        raise AddrError(whole, "embedded IPv4 address must replace the final 2 fields of "
                         "the address", s)  # fmt: skip
    if len(groups) > 6:
        raise AddrError(whole, "too many hex fields to fit an embedded IPv4 at the end of "
                         "the address", s)  # fmt: skip
    v4 = _ipv4_fields(whole, s)
    return [v4 >> 16, v4 & 0xFFFF]


def _is_4in6(ip: IPAddress) -> bool:
    return ip.bits == 128 and ip.value >> 32 == 0xFFFF


def _k8s_ip(text: str) -> IPAddress:
    """Kubernetes' parseIPAddr: netip, then no zone and no IPv4-mapped IPv6."""
    try:
        ip, zone = parse_addr(text)
    except AddrError as exc:
        raise CelEvalError(
            f"IP Address {_quote(text)} parse error during conversion from string: {exc}"
        ) from None
    if zone:
        raise CelEvalError(f"IP address {_quote(text)} with zone value is not allowed")
    if _is_4in6(ip):
        raise CelEvalError(f"IPv4-mapped IPv6 address {_quote(text)} is not allowed")
    return ip


def _parse_prefix(text: str) -> CIDRPrefix:
    """netip.ParsePrefix, with its error texts."""
    head, sep, bits = text.rpartition("/")
    if not sep:
        raise ValueError("no '/'")
    try:
        ip, zone = parse_addr(head)
    except AddrError as exc:
        raise ValueError(str(exc)) from None
    if zone:
        raise ValueError("IPv6 zones cannot be present in a prefix")
    bad = f"bad bits after slash: {_quote(bits)}"
    numeric = bits != "" and all(c in "0123456789" for c in bits)
    if (len(bits) > 1 and not "1" <= bits[0] <= "9") or not numeric or len(bits) > 18:
        raise ValueError(bad)  # what strconv.Atoi refuses
    if int(bits) > ip.bits:
        raise ValueError("prefix length out of range")
    return CIDRPrefix(ip, int(bits))


def parse_ip(text: str) -> IPAddress:
    return _k8s_ip(text)


def parse_cidr(text: str) -> CIDRPrefix:
    """Kubernetes' stringToCIDR (whose message repeats its prefix, as upstream's does)."""
    try:
        prefix = _parse_prefix(text)
    except ValueError as exc:
        wrapped = "network address parse error during conversion from string"
        raise CelEvalError(
            f"{wrapped}: {wrapped}: netip.ParsePrefix({_quote(text)}): {exc}"
        ) from None
    if _is_4in6(prefix.ip):
        raise CelEvalError(
            "network address parse error during conversion from string: "
            f"IPv4-mapped IPv6 address {_quote(text)} is not allowed"
        )
    return prefix


def _valid(parse: object) -> object:
    def check(text: str) -> bool:
        try:
            parse(text)  # type: ignore[operator]
        except CelEvalError:
            return False
        return True

    return check


def is_canonical(text: str) -> bool:
    return str(_k8s_ip(text)) == text


# -- classification (netip.Addr.Is*) -------------------------------------------------------
def is_unspecified(ip: IPAddress) -> bool:
    return ip.value == 0


def is_loopback(ip: IPAddress) -> bool:
    return ip.byte(0) == 127 if ip.bits == 32 else ip.value == 1


def is_link_local_multicast(ip: IPAddress) -> bool:
    if ip.bits == 32:
        return ip.byte(0) == 224 and ip.byte(1) == 0 and ip.byte(2) == 0
    return ip.group(0) & 0xFF0F == 0xFF02


def is_link_local_unicast(ip: IPAddress) -> bool:
    if ip.bits == 32:
        return ip.byte(0) == 169 and ip.byte(1) == 254
    return ip.group(0) & 0xFFC0 == 0xFE80


def _is_multicast(ip: IPAddress) -> bool:
    return ip.byte(0) & 0xF0 == 0xE0 if ip.bits == 32 else ip.byte(0) == 0xFF


def is_global_unicast(ip: IPAddress) -> bool:
    if ip.bits == 32 and ip.value in (0, 0xFFFFFFFF):
        return False
    return not (
        (ip.bits == 128 and ip.value == 0)
        or is_loopback(ip)
        or _is_multicast(ip)
        or is_link_local_unicast(ip)
    )


def masked(prefix: CIDRPrefix) -> CIDRPrefix:
    return CIDRPrefix(IPAddress(prefix.ip.bits, prefix.ip.value & prefix.mask()), prefix.length)


def contains_ip_string(prefix: CIDRPrefix, text: str) -> bool:
    """Upstream passes the parse error on as an argument, which then matches no overload:
    an unparsable address reads "no such overload" (containsCIDR keeps its parse error)."""
    try:
        ip = parse_ip(text)
    except CelEvalError:
        raise CelEvalError("no such overload") from None
    return prefix.contains(ip)


def contains_cidr(prefix: CIDRPrefix, other: CIDRPrefix) -> bool:
    """cidr.Overlaps(other) and the other is at least as specific."""
    if prefix.ip.bits != other.ip.bits or prefix.length > other.length:
        return False
    return prefix.contains(other.ip)


def ip_library() -> Library:
    lib = Library()
    lib.add("ip", (STRING,), IP, parse_ip)
    lib.add("isIP", (STRING,), BOOL, _valid(parse_ip))  # type: ignore[arg-type]
    lib.add("ip.isCanonical", (STRING,), BOOL, is_canonical)
    lib.add("family", (IP,), INT, lambda ip: 4 if ip.bits == 32 else 6, member=True)
    for name, impl in (
        ("isUnspecified", is_unspecified),
        ("isLoopback", is_loopback),
        ("isLinkLocalMulticast", is_link_local_multicast),
        ("isLinkLocalUnicast", is_link_local_unicast),
        ("isGlobalUnicast", is_global_unicast),
    ):
        lib.add(name, (IP,), BOOL, impl, member=True)
    lib.add("string", (IP,), STRING, str)
    return lib


def cidr_library() -> Library:
    lib = Library()
    lib.add("cidr", (STRING,), CIDR, parse_cidr)
    lib.add("isCIDR", (STRING,), BOOL, _valid(parse_cidr))  # type: ignore[arg-type]
    lib.add("containsIP", (CIDR, STRING), BOOL, contains_ip_string, member=True)
    lib.add("containsIP", (CIDR, IP), BOOL, CIDRPrefix.contains, member=True)
    lib.add("containsCIDR", (CIDR, STRING), BOOL, lambda c, s: contains_cidr(c, parse_cidr(s)),
            member=True)  # fmt: skip
    lib.add("containsCIDR", (CIDR, CIDR), BOOL, contains_cidr, member=True)
    lib.add("ip", (CIDR,), IP, lambda c: c.ip, member=True)
    lib.add("prefixLength", (CIDR,), INT, lambda c: c.length, member=True)
    lib.add("masked", (CIDR,), CIDR, masked, member=True)
    lib.add("string", (CIDR,), STRING, str)
    return lib
