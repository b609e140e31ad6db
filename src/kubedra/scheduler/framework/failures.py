"""Pods like one that fit nowhere fail the same way until something is freed.

Placing pods only takes resources away, so a pod equivalent to one that fit nowhere (the
same signature from every PreFilter plugin: claims, requests, node constraints) can only
fit on a node where something was freed since. The kube-scheduler once kept such an
equivalence cache; its queueing hints now narrow retries to what an event can change, and
this does both: the failure is answered again at once while nothing was freed, and a retry
tries only the nodes freed since.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from kubedra.scheduler.framework.status import Unschedulable

# Freed nodes logged before old failures are forgotten rather than kept with a long log.
FREED_LOG_LIMIT = 4096


class FailureCache:
    def __init__(self) -> None:
        # signature -> why it fit nowhere, and the length of `freed` then
        self.failed: dict[bytes, tuple[Unschedulable, int]] = {}
        self.freed: list[str] = []  # nodes where devices, CPU or memory were freed, in order

    def scope(self, signature: bytes) -> set[str] | None:
        """The nodes worth trying for a pod like one that fit nowhere (those freed since);
        None for a pod not seen failing. Raises when nothing was freed since."""
        failed = self.failed.get(signature)
        if failed is None:
            return None
        why, seen = failed
        if seen == len(self.freed):
            raise Unschedulable(str(why), why.explanation)
        return set(self.freed[seen:])

    def last(self, signature: bytes) -> Unschedulable:
        return self.failed[signature][0]

    def record(self, signature: bytes, why: Unschedulable) -> None:
        self.failed[signature] = (why, len(self.freed))

    def forget(self) -> None:
        self.failed.clear()
        self.freed.clear()

    def freed_on(self, nodes: AbstractSet[str]) -> None:
        if len(self.freed) >= FREED_LOG_LIMIT:
            self.forget()
        if self.failed:  # only cached failures read the log
            self.freed.extend(sorted(nodes))
