"""The Kubernetes URL CEL library (k8s.io/apiserver/pkg/cel/library urls.go).

`url()` accepts what Go's `url.ParseRequestURI` accepts (an absolute URI or an absolute
path) and then keeps what the more lenient `url.Parse` makes of it (which splits off a
`#fragment`). Both parsers are rebuilt here from net/url's rules, with its error texts:
escapes are checked per URL part, hosts may %-encode only non-ASCII bytes, a bracketed
host must be an IPv6 address, and an http(s) host takes a port after its first colon only.

Go strings are bytes: a %-escape may decode to bytes that are not UTF-8. Those travel as
surrogate escapes (Python's `surrogateescape`) so that re-escaping gives the same bytes,
and reach CEL as U+FFFD, as Go's invalid bytes count and print.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kubedra.cel.errors import CelEvalError
from kubedra.cel.goquote import go_quote
from kubedra.cel.ip_lib import AddrError, parse_addr
from kubedra.cel.registry import Library
from kubedra.cel.types import BOOL, STRING, URL, list_of, map_of

# net/url's encoding modes: which part of a URL a string is escaped or unescaped for.
PATH, PATH_SEGMENT, HOST, ZONE, USER_PASSWORD, QUERY_COMPONENT, FRAGMENT = range(7)
_HEX = frozenset(b"0123456789abcdefABCDEF")
_MAX_QUERY_PARAMS = 10_000  # net/url's default limit on parameters in one query


class _ParseError(Exception):
    """A net/url error, before `parse "<url>": ` is put in front of it."""


def _should_escape(c: int, mode: int) -> bool:
    """net/url's shouldEscape: whether byte c must be %-encoded in this part of a URL."""
    if chr(c).isascii() and chr(c).isalnum():
        return False
    if mode in (HOST, ZONE) and chr(c) in "!$&'()*+,;=:[]<>\"":
        return False
    if chr(c) in "-_.~":
        return False
    if chr(c) in "$&+,/:;=?@":  # reserved: each part lets a few through
        if mode == PATH:
            return c == ord("?")
        if mode == PATH_SEGMENT:
            return chr(c) in "/;,?"
        if mode == USER_PASSWORD:
            return chr(c) in "@/?:"
        return mode != FRAGMENT
    return not (mode == FRAGMENT and chr(c) in "!()*")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _escape_error(raw: bytes) -> _ParseError:
    return _ParseError(f"invalid URL escape {go_quote(_text(raw))}")


def unescape(text: str, mode: int) -> str:
    """net/url's unescape: %XX decoded, checked as the URL part `mode` allows."""
    s = _bytes(text)
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise _escape_error(s[i : i + 3])
            value = int(s[i + 1 : i + 3], 16)
            # A host may %-encode only non-ASCII bytes (and %25 before an IPv6 zone); a
            # zone only bytes a host could hold as they are (or a space).
            if mode == HOST and value < 0x80 and s[i : i + 3] != b"%25":
                raise _escape_error(s[i : i + 3])
            if mode == ZONE and s[i : i + 3] != b"%25" and value != 0x20 \
                    and _should_escape(value, HOST):  # fmt: skip
                raise _escape_error(s[i : i + 3])
            out.append(value)
            i += 3
            continue
        if mode in (HOST, ZONE) and c < 0x80 and _should_escape(c, mode):
            raise _ParseError(f"invalid character {go_quote(chr(c))} in host name")
        out.append(0x20 if c == ord("+") and mode == QUERY_COMPONENT else c)
        i += 1
    return _text(bytes(out))


def escape(text: str, mode: int) -> str:
    """net/url's escape: every byte the part `mode` does not allow as %XX."""
    out = []
    for c in _bytes(text):
        if c == 0x20 and mode == QUERY_COMPONENT:
            out.append("+")
        elif _should_escape(c, mode):
            out.append(f"%{c:02X}")
        else:
            out.append(chr(c))
    return "".join(out)


def _valid_encoded(text: str, mode: int) -> bool:
    """Whether text needs no escaping beyond what it has (RFC 3986 pchars allowed)."""
    return all(
        ch in "!$&'()*+,;=:@[]%" or not _should_escape(c, mode)
        for ch, c in ((chr(b), b) for b in _bytes(text))
    )


def _valid_optional_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all("0" <= ch <= "9" for ch in port[1:]))


def _split_host_port(host_port: str) -> tuple[str, str]:
    """net/url's splitHostPort: a numeric port after the last colon, brackets dropped."""
    host, port = host_port, ""
    colon = host.rfind(":")
    if colon != -1 and _valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1 :]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _cel_string(text: str) -> str:
    """A decoded Go string as CEL sees it: invalid UTF-8 bytes as U+FFFD."""
    return _bytes(text).decode("utf-8", "replace")


def _kept_raw(raw: str, decoded: str, mode: int) -> bool:
    """Whether the raw text as written is a valid escaping of the decoded value."""
    if not raw or not _valid_encoded(raw, mode):
        return False
    try:
        return unescape(raw, mode) == decoded
    except _ParseError:
        return False


def _escaped(raw: str, decoded: str, mode: int) -> str:
    """net/url's EscapedPath/EscapedFragment: the text as written when it is a valid
    escaping of the value, else the value escaped."""
    return raw if _kept_raw(raw, decoded, mode) else escape(decoded, mode)


@dataclass(frozen=True, slots=True, eq=False)
class URLValue:
    """A `kubernetes.URL`: net/url's URL fields that parsing sets."""

    scheme: str = ""
    opaque: str = ""
    user: tuple[str, str | None] | None = None  # (username, password or None)
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""
    fragment: str = ""
    raw_fragment: str = ""
    force_query: bool = False
    omit_host: bool = False

    def __eq__(self, other: object) -> bool:
        """Upstream compares URLs by their string form."""
        return isinstance(other, URLValue) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def escaped_path(self) -> str:
        if self.path == "*" and not _kept_raw(self.raw_path, self.path, PATH):
            return "*"  # never escaped (Go issue 11202)
        return _escaped(self.raw_path, self.path, PATH)

    def _escaped_fragment(self) -> str:
        return _escaped(self.raw_fragment, self.fragment, FRAGMENT)

    def __str__(self) -> str:
        """net/url's URL.String: the URL reassembled."""
        out = f"{self.scheme}:" if self.scheme else ""
        if self.opaque:
            out += self.opaque
        else:
            if (self.scheme or self.host or self.user) and not (
                self.omit_host and not self.host and self.user is None
            ):
                if self.host or self.path or self.user is not None:
                    out += "//"
                if self.user is not None:
                    out += self._userinfo() + "@"
                out += escape(self.host, HOST)
            path = self.escaped_path()
            if path and path[0] != "/" and self.host:
                out += "/"
            if not out and ":" in path.split("/", 1)[0]:
                out += "./"  # RFC 3986 4.2: not to be read as a scheme
            out += path
        if self.force_query or self.raw_query:
            out += "?" + self.raw_query
        if self.fragment:
            out += "#" + self._escaped_fragment()
        return out

    def _userinfo(self) -> str:
        assert self.user is not None
        name, password = self.user
        text = escape(name, USER_PASSWORD)
        return text if password is None else f"{text}:{escape(password, USER_PASSWORD)}"

    def query(self) -> dict[str, list[str]]:
        """net/url's URL.Query: repeated keys collect values; malformed pairs are dropped."""
        result: dict[str, list[str]] = {}
        if self.raw_query.count("&") + 1 > _MAX_QUERY_PARAMS:
            return result
        for pair in self.raw_query.split("&") if self.raw_query else []:
            if ";" in pair or not pair:
                continue
            key, _, value = pair.partition("=")
            try:
                key, value = unescape(key, QUERY_COMPONENT), unescape(value, QUERY_COMPONENT)
            except _ParseError:
                continue
            result.setdefault(_cel_string(key), []).append(_cel_string(value))
        return result


def _scheme(raw: str) -> tuple[str, str]:
    """A leading `scheme:` ([a-zA-Z][a-zA-Z0-9+.-]*) split off, if there is one."""
    for i, ch in enumerate(raw):
        if ch.isascii() and ch.isalpha():
            continue
        if ch.isascii() and (ch.isdigit() or ch in "+-."):
            if i == 0:
                return "", raw
            continue
        if ch == ":":
            if i == 0:
                raise _ParseError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return "", raw
    return "", raw


def _parse(raw: str, via_request: bool) -> URLValue:
    """net/url's parse: viaRequest (ParseRequestURI) allows only absolute forms."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in raw):
        raise _ParseError("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise _ParseError("empty url")
    if raw == "*":
        return URLValue(path="*")
    scheme, rest = _scheme(raw)
    scheme = scheme.lower()
    force_query = rest.endswith("?") and rest.count("?") == 1
    if force_query:
        rest, query = rest[:-1], ""
    else:
        rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:  # a rootless path (RFC 3986) is opaque
            return URLValue(scheme=scheme, opaque=rest, raw_query=query, force_query=force_query)
        if via_request:
            raise _ParseError("invalid URI for request")
        if ":" in rest.split("/", 1)[0]:
            raise _ParseError("first path segment in URL cannot contain colon")
    user: tuple[str, str | None] | None = None
    host, omit_host = "", False
    if rest.startswith("//") and (scheme or (not via_request and not rest.startswith("///"))):
        authority, slash, path = rest[2:].partition("/")
        user, host = _authority(scheme, authority)
        rest = slash + path
    elif scheme and rest.startswith("/"):
        omit_host = True
    path = unescape(rest, PATH)
    raw_path = "" if escape(path, PATH) == rest else rest
    return URLValue(scheme, "", user, host, path, raw_path, query, "", "", force_query,
                    omit_host)  # fmt: skip


def _authority(scheme: str, authority: str) -> tuple[tuple[str, str | None] | None, str]:
    at = authority.rfind("@")
    host = _host(scheme, authority[at + 1 :])
    if at < 0:
        return None, host
    userinfo = authority[:at]
    if not all((ch.isascii() and ch.isalnum()) or ch in "-._:~!$&'()*+,;=%@" for ch in userinfo):
        raise _ParseError("net/url: invalid userinfo")
    name, colon, password = userinfo.partition(":")
    name = unescape(name, USER_PASSWORD)
    return (name, unescape(password, USER_PASSWORD) if colon else None), host


def _host(scheme: str, host: str) -> str:
    """net/url's parseHost: host[:port], or an IPv6 literal in brackets."""
    bracket = host.rfind("[")
    if bracket > 0:
        raise _ParseError("invalid IP-literal")
    if bracket == 0:
        return _ip_literal(host)
    if (i := host.find(":")) != -1:
        # Only http(s) hosts keep colons strict (Go 1.26's urlstrictcolons): others take
        # the port after the last colon (databases list several hosts this way).
        if scheme not in ("http", "https"):
            i = host.rfind(":")
        if not _valid_optional_port(host[i:]):
            raise _ParseError(f"invalid port {go_quote(host[i:])} after host")
    return unescape(host, HOST)


def _ip_literal(host: str) -> str:
    """`[IPv6 address%25zone]:port`: the address must be IPv6 (RFC 3986, RFC 6874)."""
    close = host.rfind("]")
    if close < 0:
        raise _ParseError("missing ']' in host")
    colon_port = host[close + 1 :]
    if not _valid_optional_port(colon_port):
        raise _ParseError(f"invalid port {go_quote(colon_port)} after host")
    colon_port = unescape(colon_port, HOST)
    name = host[1:close]
    zone = name.find("%25")
    if zone >= 0:
        name = unescape(name[:zone], HOST) + unescape(name[zone:], ZONE)
    else:
        name = unescape(name, HOST)
    try:
        address, _ = parse_addr(name)
    except AddrError as exc:  # netip's error, wrapped as net/url wraps it
        raise _ParseError(f"invalid host: {exc}") from None
    if address.bits == 32:
        raise _ParseError("invalid IP-literal")
    return f"[{name}]{colon_port}"


def _request_uri(raw: str) -> None:
    try:
        _parse(raw, via_request=True)
    except _ParseError as exc:
        raise _ParseError(f"parse {go_quote(raw)}: {exc}") from None


def parse_url(raw: str) -> URLValue:
    """Kubernetes' url(): checked as a request URI, kept as url.Parse reads it."""
    try:
        _request_uri(raw)
        # url.Parse: the fragment is cut off first (ParseRequestURI leaves it in place).
        before, hash_sign, fragment = raw.partition("#")
        try:
            value = _parse(before, via_request=False)
        except _ParseError as exc:
            raise _ParseError(f"parse {go_quote(before)}: {exc}") from None
        if not hash_sign:
            return value
        try:
            decoded = unescape(fragment, FRAGMENT)
        except _ParseError as exc:
            raise _ParseError(f"parse {go_quote(raw)}: {exc}") from None
        raw_fragment = "" if escape(decoded, FRAGMENT) == fragment else fragment
        return replace(value, fragment=decoded, raw_fragment=raw_fragment)
    except _ParseError as exc:
        raise CelEvalError(f"URL parse error during conversion from string: {exc}") from None


def request_uri_problem(raw: str) -> str | None:
    """Why Go's url.ParseRequestURI refuses `raw` (its error text), or None."""
    try:
        _request_uri(raw)
    except _ParseError as exc:
        return str(exc)
    return None


def is_url(raw: str) -> bool:
    return request_uri_problem(raw) is None


def url_library() -> Library:
    lib = Library()
    lib.add("url", (STRING,), URL, parse_url)
    lib.add("isURL", (STRING,), BOOL, is_url)
    for name, impl in (
        ("getScheme", lambda u: u.scheme),
        ("getHost", lambda u: _cel_string(u.host)),
        ("getHostname", lambda u: _cel_string(_split_host_port(u.host)[0])),
        ("getPort", lambda u: _split_host_port(u.host)[1]),
        ("getEscapedPath", URLValue.escaped_path),
    ):
        lib.add(name, (URL,), STRING, impl, member=True)
    lib.add("getQuery", (URL,), map_of(STRING, list_of(STRING)), URLValue.query, member=True)
    return lib
