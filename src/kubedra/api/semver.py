"""Semantic Versioning 2.0.0 as Kubernetes uses it for CEL ``semver()`` and version attributes.

Parsing and ordering follow blang/semver v4, the library behind the Kubernetes CEL semver
functions; :func:`is_valid_semver` follows the semver.org regular expression that the API
server applies to ResourceSlice ``version`` attributes.
"""

from __future__ import annotations

import re
from typing import Final, final

__all__ = ["Semver", "SemverError", "is_valid_semver"]


class SemverError(ValueError):
    """Raised when text is not a semantic version."""


# The semver.org suggested expression, with ASCII-only digit classes (Go's \d is ASCII).
_SEMVER_RE: Final = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_NUMERIC_RE: Final = re.compile(r"[0-9]+")
_ALPHANUM_RE: Final = re.compile(r"[0-9A-Za-z-]+")
# blang stores every numeric field as a uint64 and rejects larger numbers.
_UINT64_MAX: Final = 2**64 - 1

Identifier = str | int


def is_valid_semver(text: str) -> bool:
    """Strict SemVer 2.0.0, exactly as the API server validates version attributes."""
    return _SEMVER_RE.fullmatch(text) is not None


@final
class Semver:
    """An immutable version; equality, hashing and order ignore build metadata.

    blang's ``Compare`` (and so CEL's ``compareTo``, ``isLessThan`` and ``==``) never looks at
    build metadata, so ``1.0.0+a == 1.0.0+b`` here too, and they hash alike.
    """

    __slots__ = ("_build", "_key", "_major", "_minor", "_patch", "_pre")

    _major: int
    _minor: int
    _patch: int
    _pre: tuple[Identifier, ...]
    _build: tuple[str, ...]
    _key: tuple[object, ...]

    def __init__(
        self,
        major: int,
        minor: int,
        patch: int,
        pre: tuple[Identifier, ...] = (),
        build: tuple[str, ...] = (),
    ) -> None:
        """Build from parts that are already valid; use :meth:`parse` for text."""
        self._major = major
        self._minor = minor
        self._patch = patch
        self._pre = pre
        self._build = build
        self._key = _precedence_key(major, minor, patch, pre)

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        """Strict blang ``Parse``; ``normalize`` applies CEL's ``semver(text, true)`` fixes."""
        return _parse(_normalize(text) if normalize else text)

    @property
    def major(self) -> int:
        return self._major

    @property
    def minor(self) -> int:
        return self._minor

    @property
    def patch(self) -> int:
        return self._patch

    @property
    def pre(self) -> tuple[Identifier, ...]:
        """Pre-release identifiers; numeric ones are ints so they order numerically."""
        return self._pre

    @property
    def build(self) -> tuple[str, ...]:
        return self._build

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by SemVer precedence, as blang's Compare."""
        return (self._key > other._key) - (self._key < other._key)

    def __str__(self) -> str:
        text = f"{self._major}.{self._minor}.{self._patch}"
        if self._pre:
            text += "-" + ".".join(str(part) for part in self._pre)
        if self._build:
            text += "+" + ".".join(self._build)
        return text

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __lt__(self, other: Semver) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key < other._key

    def __le__(self, other: Semver) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key <= other._key

    def __gt__(self, other: Semver) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key > other._key

    def __ge__(self, other: Semver) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key >= other._key


def _precedence_key(
    major: int, minor: int, patch: int, pre: tuple[Identifier, ...]
) -> tuple[object, ...]:
    """A tuple whose natural order is SemVer precedence (semver.org section 11).

    A release sorts after all of its pre-releases; numeric identifiers sort before
    alphanumeric ones; a longer identifier list wins when it extends a shorter one.
    """
    if not pre:
        return (major, minor, patch, 1)
    ids = tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in pre)
    return (major, minor, patch, 0, ids)


def _parse(text: str) -> Semver:
    """blang/semver v4 ``Parse``: the same checks, in the same order, with its messages."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major number", "Major number")
    minor = _number(parts[1], "minor number", "Minor number")
    rest, _, build_text = parts[2].partition("+")
    patch_text, _, pre_text = rest.partition("-")
    patch = _number(patch_text, "patch number", "Patch number")
    pre = tuple(_pre_identifier(p) for p in pre_text.split(".")) if "-" in rest else ()
    build = tuple(_build_identifier(b) for b in build_text.split(".")) if "+" in parts[2] else ()
    return Semver(major, minor, patch, pre, build)


def _number(text: str, what: str, label: str) -> int:
    if text and _NUMERIC_RE.fullmatch(text) is None:
        raise SemverError(f"Invalid character(s) found in {what} {_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise SemverError(f"{label} must not contain leading zeroes {_quote(text)}")
    return _uint64(text)


def _uint64(text: str) -> int:
    """Go's strconv.ParseUint(text, 10, 64), with its error texts."""
    if not text:
        raise SemverError('strconv.ParseUint: parsing "": invalid syntax')
    value = int(text)
    if value > _UINT64_MAX:
        raise SemverError(f"strconv.ParseUint: parsing {_quote(text)}: value out of range")
    return value


def _pre_identifier(text: str) -> Identifier:
    if not text:
        raise SemverError("Prerelease is empty")
    if _NUMERIC_RE.fullmatch(text):
        if len(text) > 1 and text[0] == "0":
            raise SemverError(
                f"Numeric PreRelease version must not contain leading zeroes {_quote(text)}"
            )
        return _uint64(text)
    if _ALPHANUM_RE.fullmatch(text) is None:
        raise SemverError(f"Invalid character(s) found in prerelease {_quote(text)}")
    return text


def _build_identifier(text: str) -> str:
    if not text:
        raise SemverError("Build meta data is empty")
    if _ALPHANUM_RE.fullmatch(text) is None:
        raise SemverError(f"Invalid character(s) found in build meta data {_quote(text)}")
    return text


def _normalize(text: str) -> str:
    """The k8s semverlib ``normalizeAndParse`` rewrite, applied before strict parsing.

    Drops one leading "v", strips leading zeros from each of the (up to) three dot-separated
    parts, and pads a short "1" or "1.2" with ".0"; a short form may not carry pre-release
    or build data. It does not trim whitespace.
    """
    text = text.removeprefix("v")
    parts = [_strip_zeros(part) for part in text.split(".", 2)]
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _strip_zeros(part: str) -> str:
    if len(part) <= 1:
        return part
    stripped = part.lstrip("0")
    if not stripped or not stripped[0].isascii() or not stripped[0].isdigit():
        stripped = "0" + stripped
    return stripped


def _quote(text: str) -> str:
    """A double-quoted string close to Go's %q for the ASCII text versions contain."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
