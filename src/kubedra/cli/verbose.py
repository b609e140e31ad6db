"""What `-v` and `-vv` add to every command, on stderr (stdout stays the command's output).

`-v`: which store or cluster a command works on, and how long the command took.
`-vv`: also every store call (get, list, create, update, delete, bind) with its kind,
name, result size and time, and the debug logs of kubedra's modules.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the cluster client is imported where it is used
    from kubedra.cluster import SqliteStore
    from kubedra.cluster.kubernetes import KubeStore

log = logging.getLogger("kubedra")

STORE_CALLS = ("get", "list", "create", "update", "update_status", "delete", "bind")


def setup(verbosity: int) -> None:
    levels = {0: logging.WARNING, 1: logging.INFO}
    logging.basicConfig(
        level=levels.get(verbosity, logging.DEBUG),
        format="%(levelname)s %(name)s: %(message)s",
    )


def timed(command: str | None) -> Callable[[], None]:
    """A callback for the end of a command that logs its duration (at -v)."""
    start = time.perf_counter()
    return lambda: log.info("%s done in %.3f s", command or "kubedra", time.perf_counter() - start)


def opened(store: SqliteStore | KubeStore, verbosity: int) -> SqliteStore | KubeStore:
    """Log which store a command uses (-v); trace every call made on it (-vv)."""
    path = getattr(store, "path", None)  # an embedded store's file; a cluster's `location`
    where = f"embedded store {path}" if path is not None else getattr(store, "location", "?")
    log.info("working on %s", where)
    if verbosity >= 2:
        for name in STORE_CALLS:
            setattr(store, name, _traced(name, getattr(store, name)))
    return store


def _traced(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def traced(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        outcome = "failed"
        try:
            result = call(*args, **kwargs)
            outcome = f"{len(result)} object(s)" if isinstance(result, list) else "ok"
            return result
        finally:
            ms = (time.perf_counter() - start) * 1e3
            log.debug("store %s %s: %s in %.1f ms", name, _subject(name, args), outcome, ms)

    return traced


def _subject(call: str, args: tuple[Any, ...]) -> str:
    """`ResourceClaim in default`, `Pod default/x`: a call's kind (or object) and where."""
    if not args:
        return ""
    first = args[0]
    if not isinstance(first, type):
        return f"{type(first).__name__} {getattr(first, 'namespace', '') or ''}/{first.name}"
    where = [a for a in args[1:3] if isinstance(a, str)]
    if call == "list":
        return f"{first.__name__} in {where[0]}" if where else first.__name__
    return f"{first.__name__} {'/'.join(reversed(where))}"
