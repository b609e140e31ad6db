"""The one error family of kubedra: every failure on user input names where it happened.

A `Problem` is one finding (error or warning) with the object reference, the source file
and line, and the field path in kubectl's notation (`spec.devices.requests[0].name`).
`ValidationError` carries all problems of a load or validation, so a user sees every
mistake of an object at once instead of fixing them one round trip at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Which object a problem belongs to: kind and namespace/name (namespace may be empty)."""

    kind: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        who = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {who}".strip()


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding about an object, printed as `FILE:LINE: Kind ns/name: path: message`."""

    message: str
    path: str = ""
    ref: ObjectRef = ObjectRef()
    file: str = ""
    line: int = 0
    severity: Severity = Severity.ERROR

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def located(self, file: str, line: int) -> Problem:
        """The same problem placed in a source file (kept when already placed)."""
        return replace(self, file=self.file or file, line=self.line or line)

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line else self.file)
        if self.ref.kind or self.ref.name:
            parts.append(str(self.ref))
        if self.path:
            parts.append(self.path)
        prefix = ": ".join(parts)
        tag = "warning: " if self.severity is Severity.WARNING else ""
        return f"{prefix}: {tag}{self.message}" if prefix else f"{tag}{self.message}"


class KubedraError(Exception):
    """Base of every kubedra error."""


class ValidationError(KubedraError):
    """Bad input: one or more problems, each with object, file, line and field path."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @property
    def first(self) -> Problem:
        return self.problems[0]

    @property
    def kind(self) -> str:
        return self.first.ref.kind

    @property
    def namespace(self) -> str:
        return self.first.ref.namespace

    @property
    def name(self) -> str:
        return self.first.ref.name

    @property
    def path(self) -> str:
        return self.first.path

    @property
    def file(self) -> str:
        return self.first.file

    @property
    def line(self) -> int:
        return self.first.line


def errors_only(problems: Iterable[Problem]) -> list[Problem]:
    """The problems that are errors (warnings never block a load)."""
    return [p for p in problems if p.is_error]


class StoreError(KubedraError):
    """A store operation that cannot be done as asked."""


class NotFound(StoreError):
    """The object does not exist (kubectl: `Error from server (NotFound)`)."""


class AlreadyExists(StoreError):
    """An object with that kind, namespace and name exists already."""


class Conflict(StoreError):
    """A write raced another one: the resourceVersion given is no longer current."""


class DamagedStore(StoreError):
    """The embedded store's file cannot be trusted: what is wrong, and where."""
