"""Tokenizer for the CEL grammar (cel-spec langdef: literals, identifiers, operators)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kubedra.cel.errors import Issue
from kubedra.cel.values import UInt

# CEL reserves these words; they may not be used as identifiers (cel-spec "Syntax").
RESERVED = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)

_TOKEN = re.compile(
    r"""
    (?P<ws>[\s]+|//[^\n]*)
  | (?P<num>(?:\d+\.\d+(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
           |0[xX][0-9a-fA-F]+[uU]?|\d+[uU]?)
  | (?P<str>(?:[rR][bB]?|[bB][rR]?)?(?:'''|\"\"\"|'|\"))
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<escident>`[-_a-zA-Z0-9./ ]+`)
  | (?P<op>\|\||&&|==|!=|<=|>=|\.\?|\[\?|[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE,
)

_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "?": "?", '"': '"', "'": "'", "`": "`",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Token:
    # "escident": a field name in backquotes (`a.b`), cel-go's escaped identifier, which
    # may name a map key that is no identifier after a "." (value: the name).
    kind: str  # "num" | "str" | "ident" | "escident" | "op" | "eof"
    text: str
    pos: int
    value: object = None


def tokenize(source: str) -> list[Token]:
    """Split `source` into tokens, decoding literal values as it goes."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:
            raise Issue(f"Syntax error: token recognition error at: '{source[pos]}'", pos)
        kind = m.lastgroup or ""
        if kind == "ws":
            pos = m.end()
            continue
        if kind == "str":
            tok, pos = _string(source, pos, m.group())
            tokens.append(tok)
            continue
        text = m.group()
        value = _number(text, pos) if kind == "num" else text[1:-1] if kind == "escident" else None
        tokens.append(Token(kind, text, pos, value))
        pos = m.end()
    tokens.append(Token("eof", "<EOF>", len(source)))
    return tokens


# Longest literal (leading zeros aside) that can fit 64 bits: checked before converting, so
# a 5,000-digit literal fails at once (Python's int() would refuse it past 4,300 digits).
_MAX_DIGITS = {10: 20, 16: 16}


def _number(text: str, pos: int) -> object:
    """Decode an int/uint/double literal as strconv does for cel-go; out of range is an error.

    The int range is checked by the parser, where a leading minus is known.
    """
    is_hex = text[:2].lower() == "0x"
    if not is_hex and any(c in text for c in ".eE"):
        value = float(text)
        if math.isinf(value):  # strconv.ParseFloat: ErrRange
            raise Issue("invalid double literal", pos)
        return value
    unsigned = text[-1] in "uU"
    digits = text[:-1] if unsigned else text
    base = 16 if is_hex else 10
    significant = (digits[2:] if is_hex else digits).lstrip("0") or "0"
    if len(significant) > _MAX_DIGITS[base]:
        raise Issue("invalid uint literal" if unsigned else "invalid int literal", pos)
    value = int(significant, base)
    if unsigned:
        if value >= 1 << 64:
            raise Issue("invalid uint literal", pos)
        return UInt(value)
    return value


def _string(source: str, pos: int, opener: str) -> tuple[Token, int]:
    """Scan a (raw/bytes/triple-quoted) string literal starting at `pos`."""
    prefix = opener.rstrip("'\"").lower()
    quote = opener[len(prefix) :]
    raw, is_bytes = "r" in prefix, "b" in prefix
    i = pos + len(opener)
    out: list[str] = []
    while True:
        if i >= len(source) or (len(quote) == 1 and source[i] == "\n"):
            raise Issue("Syntax error: unterminated string literal", pos)
        if source.startswith(quote, i):
            i += len(quote)
            break
        ch = source[i]
        if ch == "\\" and not raw:
            decoded, i = _escape(source, i, is_bytes)
            out.append(decoded)
            continue
        if ch == "\\" and raw and i + 1 < len(source):
            out.append(source[i : i + 2])
            i += 2
            continue
        out.append(ch)
        i += 1
    text = "".join(out)
    value: object = _to_bytes(text) if is_bytes else text
    return Token("str", source[pos:i], pos, value), i


def _to_bytes(text: str) -> bytes:
    """Bytes literal: code points < 256 from \\x/octal escapes are single bytes."""
    out = bytearray()
    for ch in text:
        if "\udc00" <= ch <= "\udcff":  # marker for a raw byte escape
            out.append(ord(ch) - 0xDC00)
        else:
            out.extend(ch.encode("utf-8"))
    return bytes(out)


def _escape(source: str, i: int, is_bytes: bool) -> tuple[str, int]:
    """Decode one backslash escape at `i`; returns (text, next index)."""
    c = source[i + 1 : i + 2]
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], i + 2
    widths = {"x": 2, "X": 2, "u": 4, "U": 8}
    if c in widths:
        if is_bytes and c in "uU":
            raise Issue("Syntax error: unicode escape in bytes literal", i)
        digits = source[i + 2 : i + 2 + widths[c]]
        if len(digits) != widths[c] or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise Issue("Syntax error: invalid escape sequence", i)
        code = int(digits, 16)
        if is_bytes and c in "xX":
            return chr(0xDC00 + code), i + 2 + widths[c]
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise Issue("Syntax error: invalid unicode code point", i)
        return chr(code), i + 2 + widths[c]
    digits = source[i + 1 : i + 4]
    if len(digits) == 3 and all(d in "01234567" for d in digits) and digits[0] in "0123":
        code = int(digits, 8)
        return (chr(0xDC00 + code) if is_bytes else chr(code)), i + 4
    raise Issue("Syntax error: invalid escape sequence", i)
