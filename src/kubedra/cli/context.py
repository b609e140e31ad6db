"""What every subcommand shares: global settings, the store, and kubectl-style errors."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import click

from kubedra.cluster import SqliteStore
from kubedra.errors import KubedraError

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Settings:
    """Global options, passed to subcommands through click's context object."""

    store: str
    strict: bool
    verbosity: int

    def open_store(self) -> SqliteStore:
        return SqliteStore(self.store)


def fails_cleanly(fn: Callable[P, R]) -> Callable[P, R]:
    """User errors print one `error: ...` block on stderr and exit 1 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (KubedraError, KeyError, ValueError, OSError) as err:
            message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            click.echo(f"error: {message}", err=True)
            sys.exit(1)

    return wrapper
