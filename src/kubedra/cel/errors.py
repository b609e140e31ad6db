"""Error types raised by the CEL engine (compile-time vs. evaluation-time)."""

from __future__ import annotations


class CelError(Exception):
    """Base class of every error raised by `kubedra.cel`."""


class CelCompileError(CelError):
    """The expression was rejected before evaluation (syntax, types, size, cost)."""


class CelEvalError(CelError):
    """Evaluation failed for one activation (missing key, overflow, bad types, ...)."""


class BareKeyMissing(CelEvalError):
    """Lenient mode: `device.capacity["memory"]` on a device that has no `memory` at all.

    Upstream has no such lookup (it is the seed's non-portable spelling); kubedra reads it
    as "this device lacks what the selector asks for": the selector is false for the device
    instead of failing the whole allocation. `||`/`&&` absorb it like any CEL error.
    """


class CostLimitExceeded(CelEvalError):
    """The runtime cost budget ran out; never absorbed by `||`/`&&`."""


class Issue(CelCompileError):
    """A compile error at a source offset; formatted like cel-go's issue list."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset

    def render(self, source: str) -> str:
        """Format as `ERROR: <input>:line:col: message` (1-based, as cel-go prints; cel-go
        adds the source line and a caret below, which kubedra leaves out to keep every
        problem on one line)."""
        line = source.count("\n", 0, self.offset) + 1
        start = source.rfind("\n", 0, self.offset) + 1
        column = self.offset - start + 1
        return f"ERROR: <input>:{line}:{column}: {self.message}"
