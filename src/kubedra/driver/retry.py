"""Retrying work against the API server: exponential backoff, and logs of states, not attempts.

An unreachable API server must not stop the node agent (it keeps answering the kubelet from
its checkpoint) nor flood its log: a retried operation logs one line when it starts
failing, one when it fails differently, and one when it works again, as client-go's
workqueues back off per item (upstream's resourceslice controller and the example driver's
status updater both retry this way).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubedra.cluster.rest import Unreachable
from kubedra.driver.logs import log_bug, log_event
from kubedra.errors import KubedraError


class Backoff:
    """Delays that double from `initial` up to `cap`, back to `initial` after `reset`."""

    def __init__(self, initial: float = 0.5, cap: float = 30.0) -> None:
        self.initial, self.cap = initial, max(initial, cap)
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.cap, delay * 2)
        return delay

    def reset(self) -> None:
        self._next = self.initial


def problem(err: BaseException) -> str:
    """What a failure is, for telling states apart: all unreachable-server errors are one
    state (their text names the request that happened to fail), any other error its text."""
    if isinstance(err, Unreachable):
        return "API server unreachable"
    return f"{type(err).__name__}: {err}"


class Transitions:
    """The state of one retried operation (`what`), logged when it changes."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger, self.what = logger, what
        self.failing: str | None = None  # the current problem, None while it works
        self._lock = threading.Lock()

    def failed(self, err: BaseException, **fields: Any) -> bool:
        """Record a failure; True (and a log line) when it is a new state."""
        state = problem(err)
        with self._lock:
            if state == self.failing:
                return False
            self.failing = state
        event = f"{self.what} failing, retrying with backoff"
        if isinstance(err, (KubedraError, OSError)):
            log_event(self.logger, event, logging.WARNING, error=str(err), **fields)
        else:  # a bug, not the cluster
            log_bug(self.logger, event, err, **fields)
        return True

    def succeeded(self, **fields: Any) -> bool:
        """Record a success; True (and a log line) when it ends a failing state."""
        with self._lock:
            if self.failing is None:
                return False
            self.failing = None
        log_event(self.logger, f"{self.what} working again", **fields)
        return True
