"""A device selector in a few words (`memory > 40Gi`, `productName == "H100"`), for the
one-line messages of gang scheduling and `kubedra explain`."""

from __future__ import annotations

import re

_PATH = r'((?:\[\s*"[^"]*"\s*\]|\.\w+)+)'
_CAPACITY = re.compile(
    r"device\.capacity" + _PATH + r'\s*\.\s*(isGreaterThan|isLessThan|compareTo)\(\s*quantity\(\s*"'
    r'([^"]+)"\s*\)\s*\)(?:\s*(>=|<=|==|!=|>|<)\s*(-?\d+))?'
)
_ATTRIBUTE = re.compile(r"device\.attributes" + _PATH + r'\s*(==|!=|>=|<=|>|<)\s*("[^"]*"|[\w.]+)')
_LAST = re.compile(r'(?:\["([^"]*)"\]|\.(\w+))\s*$')
_SHORT_EXPRESSION = 48  # an expression not summarised is shown when at most this long


def summarise_selector(expression: str) -> list[str]:
    """A request selector in a few words: capacity comparisons (`memory > 40Gi`) and
    attribute comparisons (`productName == "H100"`); else the expression itself when short,
    or `a CEL selector`."""
    out = []
    for m in _CAPACITY.finditer(expression):
        label, call, value, op, zero = (m.group(i) for i in range(1, 6))
        label = _last(label)
        if call == "isGreaterThan":
            out.append(f"{label} > {value}")
        elif call == "isLessThan":
            out.append(f"{label} < {value}")
        elif op is not None and zero == "0":
            out.append(f"{label} {op} {value}")
    for m in _ATTRIBUTE.finditer(expression):
        out.append(f"{_last(m.group(1))} {m.group(2)} {m.group(3)}")
    if out:
        return out
    text = " ".join(expression.split())
    return [text if len(text) <= _SHORT_EXPRESSION else "a CEL selector"]


def _last(path: str) -> str:
    m = _LAST.search(path)
    if m is None:
        return path
    name = m.group(1) if m.group(1) is not None else m.group(2)
    return name.rpartition("/")[2]
