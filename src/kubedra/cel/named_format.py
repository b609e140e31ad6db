"""The Kubernetes format CEL library (k8s.io/apiserver/pkg/cel/library format.go).

`format.dns1123Label()`, `format.named("uri")`, ... return a `kubernetes.NamedFormat`;
`<format>.validate(s)` is `optional.none()` for a valid string, else an optional list of
the messages upstream's validators give (apimachinery's name and label rules, Go's
`url.ParseRequestURI`, kube-openapi's uuid/byte/date/datetime checks). Not to be confused
with `string.format` (ext_format).

Lengths are counted in UTF-8 bytes and patterns match the whole string, as Go's `len`
and `^...$` do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from math import ceil

from kubedra.cel.registry import Library
from kubedra.cel.types import NAMED_FORMAT, STRING, list_of, optional_of
from kubedra.cel.url_lib import request_uri_problem
from kubedra.cel.values import Optional

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + "(\\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _LABEL_KEY + ")?"
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
              "or '-', and must start and end with an alphanumeric character")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                  "characters, '-' or '.', and must start and end with an alphanumeric "
                  "character")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character")
_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
              "'-', '_' or '.', and must start and end with an alphanumeric character")
_UUID = "[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}"
_BASE64 = "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})"
_TIME = r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))"
MAX_REGEX_SIZE = 128  # apiserver's MaxNameFormatRegexSize: what the estimate assumes
MAX_FORMAT_SIZE = 64  # apiserver's MaxFormatSize: what comparing two formats may cost


def _whole(pattern: str, text: str, flags: int = 0) -> bool:
    return re.fullmatch(pattern, text, flags | re.ASCII) is not None


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError."""
    shown = "".join((" or " if i else "") + f"'{e}', " for i, e in enumerate(examples))
    given = f"e.g. {shown}" if examples else ""
    return f"{message} ({given}regex used for validation is '{pattern}')"


def _too_long(limit: int, unit: str = "characters") -> str:
    """apimachinery's MaxLenError: "characters" in util/validation (the DNS names),
    "bytes" in api/validate/content (label keys and values); both count bytes."""
    return f"must be no more than {limit} {unit}"


def dns1123_label(value: str) -> list[str]:
    errors = [_too_long(63)] if _size(value) > 63 else []
    if not _whole(_LABEL, value):
        if _whole(_SUBDOMAIN, value):
            errors.append("must not contain dots")
        else:
            errors.append(_regex_error(_LABEL_MSG, _LABEL, "my-name", "123-abc"))
    return errors


def dns1123_subdomain(value: str, unit: str = "characters") -> list[str]:
    errors = [_too_long(253, unit)] if _size(value) > 253 else []
    if not _whole(_SUBDOMAIN, value):
        errors.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN, "example.com"))
    return errors


def dns1035_label(value: str) -> list[str]:
    errors = [_too_long(63)] if _size(value) > 63 else []
    if not _whole(_DNS1035, value):
        errors.append(_regex_error(_DNS1035_MSG, _DNS1035, "my-name", "abc-123"))
    return errors


def qualified_name(value: str) -> list[str]:
    """A label key: an optional DNS subdomain prefix and '/', then a name."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a valid label key " + _regex_error(_KEY_MSG, _LABEL_KEY, "MyName", "my.name",
                "123-abc") + " with an optional DNS subdomain prefix and '/' (e.g. "
                "'example.com/MyName')"]  # fmt: skip
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        problems = ["must be non-empty"] if not prefix else dns1123_subdomain(prefix, "bytes")
        errors += ["prefix part " + p for p in problems]
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif _size(name) > 63:
        errors.append("name part " + _too_long(63, "bytes"))
    if not _whole(_LABEL_KEY, name):
        errors.append("name part " + _regex_error(_KEY_MSG, _LABEL_KEY, "MyName", "my.name",
                                                  "123-abc"))  # fmt: skip
    return errors


def label_value(value: str) -> list[str]:
    errors = [_too_long(63, "bytes")] if _size(value) > 63 else []
    if not _whole(_LABEL_VALUE, value):
        errors.append(_regex_error(_VALUE_MSG, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errors


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A name to be used as a generateName prefix: a trailing dash is allowed (masked)."""

    def masked(value: str) -> list[str]:
        raw = value.encode("utf-8", "surrogateescape")
        if len(raw) > 1 and raw.endswith(b"-"):
            value = (raw[:-2] + b"a").decode("utf-8", "surrogateescape")
        return check(value)

    return masked


def is_date(value: str) -> bool:
    """Go's time.Parse("2006-01-02"): four-digit year, two-digit month and day, a real day."""
    if not _whole(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return False
    year, month, day = (int(p) for p in value.split("-"))
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    return 1 <= month <= 12 and 1 <= day <= days[month - 1]


def is_datetime(value: str) -> bool:
    """kube-openapi's IsDateTime: a date, a 't', then a time matching its pattern."""
    if _size(value) < 4:
        return False
    parts = value.lower().split("t")
    if len(parts) < 2 or not is_date(parts[0]):
        return False
    match = re.fullmatch(_TIME, parts[1])
    return match is not None and match[1] <= "23" and match[2] <= "59" and match[3] <= "59"


def _problem(ok: Callable[[str], bool], message: str) -> Callable[[str], list[str]]:
    return lambda value: [] if ok(value) else [message]


def _uri(value: str) -> list[str]:
    problem = request_uri_problem(value)
    return [problem] if problem else []


@dataclass(frozen=True, slots=True)
class NamedFormat:
    """A `kubernetes.NamedFormat`; two are equal when their names are."""

    name: str
    check: Callable[[str], list[str]] = field(compare=False)
    max_regex_size: int = field(compare=False)

    def __str__(self) -> str:
        return self.name


FORMATS: dict[str, NamedFormat] = {
    key: NamedFormat(name, check, size)
    for key, name, check, size in (
        ("dns1123Label", "DNS1123Label", dns1123_label, 30),
        ("dns1123Subdomain", "DNS1123Subdomain", dns1123_subdomain, 60),
        ("dns1035Label", "DNS1035Label", dns1035_label, 30),
        ("qualifiedName", "QualifiedName", qualified_name, 60),
        ("dns1123LabelPrefix", "DNS1123LabelPrefix", _prefix(dns1123_label), 30),
        ("dns1123SubdomainPrefix", "DNS1123SubdomainPrefix", _prefix(dns1123_subdomain), 60),
        ("dns1035LabelPrefix", "DNS1035LabelPrefix", _prefix(dns1035_label), 30),
        ("labelValue", "LabelValue", label_value, 40),
        ("uri", "URI", _uri, 1103),  # govalidator's URL pattern length
        ("uuid", "uuid", _problem(lambda v: _whole(_UUID, v, re.IGNORECASE),
                                  "does not match the UUID format"), 70),
        ("byte", "byte", _problem(lambda v: _whole(_BASE64, v), "invalid base64"), 84),
        ("date", "date", _problem(is_date, "invalid date"), 71),  # the datetime pattern's length
        ("datetime", "datetime", _problem(is_datetime, "invalid datetime"), 71),
    )
}  # fmt: skip


def validate(fmt: NamedFormat, value: str) -> Optional:
    problems = fmt.check(value)
    return Optional(problems) if problems else Optional.NONE


def named(name: str) -> Optional:
    found = FORMATS.get(name)
    return Optional(found) if found else Optional.NONE


def validate_cost(fmt: object, value: object) -> int:
    """Run-time cost: the string scanned against a pattern of the format's regex size."""
    assert isinstance(fmt, NamedFormat) and isinstance(value, str)
    return ceil((1 + len(value)) * 0.1) * ceil(fmt.max_regex_size * 0.25)


def named_format_library() -> Library:
    lib = Library()
    for key, fmt in FORMATS.items():
        lib.add(f"format.{key}", (), NAMED_FORMAT, lambda fmt=fmt: fmt)
    lib.add("format.named", (STRING,), optional_of(NAMED_FORMAT), named)
    lib.add("validate", (NAMED_FORMAT, STRING), optional_of(list_of(STRING)), validate,
            member=True)  # fmt: skip
    return lib
