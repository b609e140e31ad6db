"""What every subcommand shares: global settings, the store, and kubectl-style errors."""

from __future__ import annotations

import functools
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import click
from click.core import ParameterSource

from kubedra.cli.verbose import opened
from kubedra.cluster import SqliteStore
from kubedra.cluster.connect import Backend
from kubedra.errors import KubedraError

if TYPE_CHECKING:  # the cluster client is imported only by commands that reach a cluster
    from kubedra.cluster.kubernetes import KubeStore

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Settings:
    """Global options, passed to subcommands through click's context object."""

    strict: bool
    verbosity: int
    backend: Backend = field(default_factory=Backend)

    def open_store(self, create: bool = False) -> SqliteStore | KubeStore:
        """The store commands work on; only the commands that put a cluster's first objects
        in it (`apply`, `cluster create`, `driver run`) pass `create`."""
        return opened(self.backend.open(create), self.verbosity)

    @contextmanager
    def store_for_preview(self) -> Iterator[SqliteStore | KubeStore]:
        """The store a dry run reads: the one selected or, where the embedded store does not
        exist yet, an empty one that is gone afterwards (a dry run never makes a store)."""
        if self.backend.is_kubernetes() or Path(self.backend.store_path).exists():
            yield self.open_store()
            return
        with tempfile.TemporaryDirectory(prefix="kubedra-preview-") as folder:
            store = SqliteStore(Path(folder) / "state.db")
            try:
                yield store
            finally:
                store.close()

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
