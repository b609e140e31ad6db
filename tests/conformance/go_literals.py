"""Reading Go string literals out of upstream's test sources (in the Go module cache).

Upstream's test tables write CEL expressions as Go string literals: raw (`...`) or
interpreted ("..." with Go's escapes), sometimes joined with `+`. `field_literal` reads the
value of `name: <literal>` at a position; anything else there (fmt.Sprintf, a constant) is
not a literal and reads as None, so callers can count what they skip.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
           "\\": "\\", '"': '"', "'": "'"}  # fmt: skip
_WIDTHS = {"x": 2, "u": 4, "U": 8}


def unquote(source: str, start: int) -> tuple[str, int]:
    """The Go string literal at `start` and the index after it; ValueError if none."""
    quote = source[start]
    if quote == "`":
        end = source.index("`", start + 1)
        return source[start + 1 : end].replace("\r", ""), end + 1
    if quote != '"':
        raise ValueError(f"no string literal at {start}")
    out = bytearray()
    i = start + 1
    while source[i] != '"':
        if source[i] == "\n":
            raise ValueError("newline in string literal")
        if source[i] != "\\":
            out += source[i].encode()
            i += 1
            continue
        i = _escape(source, i, out)
    return out.decode("utf-8", "surrogateescape"), i + 1


def _escape(source: str, i: int, out: bytearray) -> int:
    """Decode the escape at `i` into `out` (\\x and octal are bytes, as in Go)."""
    c = source[i + 1]
    if c in _SIMPLE:
        out += _SIMPLE[c].encode()
        return i + 2
    if c in _WIDTHS:
        digits = source[i + 2 : i + 2 + _WIDTHS[c]]
        code = int(digits, 16)
        out += bytes([code]) if c == "x" else chr(code).encode()
        return i + 2 + _WIDTHS[c]
    if c in "01234567":
        out.append(int(source[i + 1 : i + 4], 8))
        return i + 4
    raise ValueError(f"unknown escape \\{c}")


_SPACE = re.compile(r"\s*")


def literal_at(source: str, start: int) -> str | None:
    """The value of the expression at `start` if it is string literals joined by `+`
    (up to the `,` or `}` that ends a composite-literal field); else None."""
    parts = []
    i = _SPACE.match(source, start).end()  # type: ignore[union-attr]
    while True:
        try:
            text, i = unquote(source, i)
        except (ValueError, IndexError):
            return None
        parts.append(text)
        i = _SPACE.match(source, i).end()  # type: ignore[union-attr]
        if source[i] == "+":
            i = _SPACE.match(source, i + 1).end()  # type: ignore[union-attr]
            continue
        return "".join(parts) if source[i] in ",}" else None


def field_literals(source: str, name: str) -> Iterator[tuple[int, str | None]]:
    """Each `name:` field of a composite literal: (line number, its string or None)."""
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}:", source):
        line = source.count("\n", 0, match.start()) + 1
        yield line, literal_at(source, match.end())
