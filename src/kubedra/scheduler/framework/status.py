"""How an extension point says no: exceptions that end a pod's scheduling cycle.

Upstream's plugins return a Status (Success, Unschedulable, UnschedulableAndUnresolvable,
Wait, Skip, Error); kubedra's raise instead, and the cycle's caller turns the exception
into the pod's PodScheduled condition, a FailedScheduling event and a backoff (or a park).
"""

from __future__ import annotations


class Unschedulable(Exception):
    """The pod cannot be placed now; the message is what its PodScheduled condition says,
    the explanation what the FailedScheduling event adds (kubedra's funnel)."""

    def __init__(self, message: str, explanation: str = "") -> None:
        super().__init__(message)
        self.explanation = explanation


class Waiting(Unschedulable):
    """The pod cannot be tried yet: something it needs does not exist yet (upstream's
    PreEnqueue gate). No event; its arrival wakes the pod. `quiet`: not even a condition,
    for something about to appear (a moment's wait)."""

    def __init__(self, message: str, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet
