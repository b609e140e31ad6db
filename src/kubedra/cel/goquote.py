"""Go's strconv.Quote (`%q`), which upstream's error messages use to show user input."""

from __future__ import annotations

_SHORT = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
          "\v": "\\v", '"': '\\"', "\\": "\\\\"}  # fmt: skip


def go_quote(text: str) -> str:
    """Double-quoted with Go's escapes: printable runes stay, control characters read
    `\\xHH`, other unprintable runes `\\uHHHH`/`\\UHHHHHHHH`, and an invalid UTF-8 byte
    (carried as a surrogate escape, see `url_lib`) `\\xHH`."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif 0xDC80 <= code <= 0xDCFF:  # a raw byte that was not valid UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)
