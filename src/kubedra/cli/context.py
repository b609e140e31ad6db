"""What every subcommand shares: global settings, the store, and kubectl-style errors."""

from __future__ import annotations

import functools
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import click
from click.core import ParameterSource

from kubedra.cli.verbose import opened
from kubedra.cluster import SqliteStore
from kubedra.cluster.connect import Backend
from kubedra.cluster.kubernetes import KubeStore
from kubedra.errors import KubedraError

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Settings:
    """Global options, passed to subcommands through click's context object."""

    store: str  # the embedded store's path (used when the backend is not a cluster)
    strict: bool
    verbosity: int
    backend: Backend = field(default_factory=Backend)

    def open_store(self) -> SqliteStore | KubeStore:
        return opened(self.backend.open(), self.verbosity)

    def embedded_path(self, command: str) -> str:
        """The embedded store's path, for commands that only make sense on it."""
        if self.backend.is_kubernetes():
            raise KubedraError(
                f"{command} works on the embedded store only (on a cluster it would replace "
                "everything): drop --kubeconfig/--context/--in-cluster or unset KUBECONFIG"
            )
        return self.backend.store_path


def backend_of(root: click.Context) -> Backend:
    """The backend the global options select (`--store` counts only when given, on the
    command line or in KUBEDRA_STORE: see kubedra.cluster.connect for the rule)."""
    params = root.params
    given = root.get_parameter_source("store") is not ParameterSource.DEFAULT
    return Backend(
        store=params.get("store") if given else None,
        kubeconfig=params.get("kubeconfig"),
        context=params.get("kube_context"),
        in_cluster=bool(params.get("in_cluster")),
    )


def fails_cleanly(fn: Callable[P, R]) -> Callable[P, R]:
    """User errors print one `error: ...` block on stderr and exit 1 (no traceback)."""
    return fails_with(1)(fn)


def fails_with(code: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """`fails_cleanly` with another exit code, for commands whose 1 means something else
    (`diff`: 1 is "differences found", as in kubectl)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except (KubedraError, KeyError, ValueError, OSError) as err:
                message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
                click.echo(f"error: {message}", err=True)
                sys.exit(code)

        return wrapper

    return decorate


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM, for a command that serves until stopped. The
    handlers are installed even where SIGINT came in ignored (a shell's background job):
    Ctrl-C and a pod's termination must stop it cleanly either way."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return stop
