"""Collects the problems of one object, worded like the API server's field errors."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sized
from typing import Any

from kubedra.api.bounds import INT64_MAX, INT64_MIN
from kubedra.api.codec import format_path
from kubedra.errors import ObjectRef, Problem, Severity

Path = tuple[str | int, ...]


def show(value: Any) -> str:
    """A value as the API server quotes it in messages (JSON)."""
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return repr(value)


class Report:
    """All problems of one object, so the user sees every mistake at once."""

    def __init__(self, ref: ObjectRef) -> None:
        self.ref = ref
        self.problems: list[Problem] = []

    def add(self, path: Path, message: str, severity: Severity = Severity.ERROR) -> None:
        self.problems.append(Problem(message, format_path(path), self.ref, severity=severity))

    def warn(self, path: Path, message: str) -> None:
        self.add(path, message, Severity.WARNING)

    def required(self, path: Path, detail: str = "") -> None:
        self.add(path, f"Required value: {detail}" if detail else "Required value")

    def invalid(self, path: Path, value: Any, detail: str) -> None:
        self.add(path, f"Invalid value: {show(value)}: {detail}")

    def forbidden(self, path: Path, detail: str) -> None:
        self.add(path, f"Forbidden: {detail}")

    def duplicate(self, path: Path, value: Any) -> None:
        self.add(path, f"Duplicate value: {show(value)}")

    def unsupported(self, path: Path, value: Any, supported: Iterable[str]) -> None:
        options = ", ".join(show(s) for s in supported)
        self.add(path, f"Unsupported value: {show(value)}: supported values: {options}")

    def too_long(self, path: Path, limit: int) -> None:
        self.add(path, f"Too long: may not be more than {limit} bytes")

    def int64(self, path: Path, value: int | None, struct: str) -> bool:
        """An int64 field of the Go type `struct`: a number beyond int64 fails upstream's
        JSON decoding (worded as encoding/json words it), before any validation rule."""
        if value is None or INT64_MIN <= value <= INT64_MAX:
            return True
        field = ".".join(s for s in path if isinstance(s, str))
        self.add(path, f"json: cannot unmarshal number {value} into Go struct field "
                       f"{struct}.{field} of type int64")  # fmt: skip
        return False

    def int32(self, path: Path, value: int | None, struct: str) -> bool:
        """An int32 field of the Go type `struct`, as `int64` does for int64 fields."""
        if value is None or -(2**31) <= value < 2**31:
            return True
        field = ".".join(s for s in path if isinstance(s, str))
        self.add(path, f"json: cannot unmarshal number {value} into Go struct field "
                       f"{struct}.{field} of type int32")  # fmt: skip
        return False

    def within(self, path: Path, items: Sized, limit: int) -> bool:
        """Report a list or map over its limit; False means: skip checking its entries."""
        if len(items) > limit:
            noun = "item" if limit == 1 else "items"
            self.add(path, f"Too many: {len(items)}: must have at most {limit} {noun}")
            return False
        return True

    def name(
        self,
        path: Path,
        value: str | None,
        check: Callable[[str], str | None],
        required: bool = True,
    ) -> None:
        """A name-like field: required (unless optional) and well-formed."""
        if not value:
            if required:
                self.required(path)
            return
        self.valid(path, value, check)

    def valid(self, path: Path, value: str, check: Callable[[str], str | None]) -> None:
        """A value the check must accept, the empty string included."""
        detail = check(value)
        if detail:
            self.invalid(path, value, detail)

    def unique(self, path: Path, values: Iterable[str], field: str | None = None) -> None:
        """Report each repeated value of a list at its item (upstream's list-map rule), or
        at the item's `field` (core/v1's rule for container and claim names)."""
        seen: set[str] = set()
        for i, value in enumerate(values):
            if value in seen:
                self.duplicate((*path, i, field) if field else (*path, i), value)
            seen.add(value)
