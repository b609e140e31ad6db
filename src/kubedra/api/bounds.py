"""Bounds on the work one input may cause: bytes read, nesting, alias expansion, numbers.

A hostile manifest must end in one clear error, never in a traceback, a hang or gigabytes
of memory. Each bound is checked before the work it protects: the size of a file before
it is read, the size of an object while it is parsed, the nesting depth before anything
walks the data recursively, the length of a number before it is converted.
"""

from __future__ import annotations

from typing import Any

from kubedra.errors import KubedraError

# One file (or stdin). Large inventories are fine (a 5,000-slice stream is 27 MB); the
# bound only stops reading an endless or enormous stream into memory.
MAX_INPUT_BYTES = 128 * 1024 * 1024
# One object, aliases expanded: the kube-apiserver's request body limit
# (MaxRequestBodyBytes, 3 MiB), so no object is accepted here that a cluster would refuse
# for its size. A kubectl List is measured item by item, as kubectl sends each item alone.
MAX_OBJECT_BYTES = 3 * 1024 * 1024
# Nested mappings and lists. Go's JSON decoder allows 10,000 levels; every recursive walk
# over plain data in Python (copying, stripping unknown fields, encoding) costs a few stack
# frames a level, so kubedra's bound sits well below Python's 1,000-frame stack.
MAX_DEPTH = 100
# The text of one number literal (an int64 has 19 digits, a YAML 1.1 binary int 66 chars).
MAX_NUMBER_CHARS = 100

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# go-yaml's alias-expansion rule (CVE-2019-11254), which kubectl and the API server apply
# to YAML: small documents may take up to 99% of their decoded values from aliases, very
# large ones 10%, scaling linearly in between.
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000


class InputError(KubedraError):
    """Input that breaks a bound or is not valid data; `line` (1-based) when known and
    `path` (kubectl notation) of the offending field when known."""

    def __init__(self, message: str, line: int = 0, path: str = "") -> None:
        super().__init__(message)
        self.message, self.line, self.path = message, line, path


def allowed_alias_ratio(decoded: int) -> float:
    """The share of decoded values that may come from alias expansion (go-yaml's scale)."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    span = _ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / span


def check_aliasing(decoded: int, aliased: int, line: int) -> None:
    """Refuse a document whose values come mostly from aliases (a "billion laughs")."""
    if aliased > 100 and decoded > 1000 and aliased / decoded > allowed_alias_ratio(decoded):
        raise InputError("document contains excessive aliasing", line)


def too_deep(line: int = 0) -> InputError:
    return InputError(
        f"nested too deeply: more than {MAX_DEPTH} levels of mappings and lists", line
    )


def too_large(size: int, line: int = 0) -> InputError:
    return InputError(
        f"Request entity too large: {size:,} bytes, limit is {MAX_OBJECT_BYTES:,} "
        "(the API server's request body limit)",
        line,
    )


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Raise InputError when plain data nests dicts and lists deeper than `limit`.

    Iterative, as it must not need the stack it protects. A value shared by reference (a
    YAML alias) is walked once per reference: the alias bound keeps that linear.
    """
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise too_deep()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))


def number_too_long(text: str, line: int = 0) -> InputError:
    return InputError(
        f"number too long: {len(text):,} characters, may not be more than {MAX_NUMBER_CHARS}",
        line,
    )
