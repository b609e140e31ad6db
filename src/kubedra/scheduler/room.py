"""What each node has left for pod requests, and which nodes a request fits, kept between
pods.

The scheduler checks every pod's CPU and memory requests against every node it may go to
(upstream's NodeResourcesFit filter). Between two pods the answer changes only on the node
the first was placed on, unless the nodes or their pods are read afresh; so the verdicts
are kept per (node constraints, requests) and re-checked on the nodes changed since.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubedra.api.core import Node
from kubedra.api.quantity import Quantity
from kubedra.scheduler.nodes import Left, Wanted, resources_left, shortfall

# Kept verdicts (one per distinct constraints and requests) and changed nodes logged before
# both are dropped: a workload of many shapes re-checks all nodes now and then, not for ever.
VERDICTS_LIMIT = 512
CHANGES_LIMIT = 1 << 14


@dataclass(slots=True)
class _Verdicts:
    nodes: Sequence[str]  # the nodes judged
    why: dict[str, str]  # node -> why the requests do not fit ("" when they do)
    counts: Counter[str]  # the nodes refused per reason
    seen: int  # the changed nodes read so far (a position in Room's log)


class Room:
    """Room on the nodes for pod requests, read from `sync`'s nodes and usage."""

    def __init__(self) -> None:
        self._left: dict[str, Left] = {}
        self._nodes: Mapping[str, Node] = {}
        self._usage: Mapping[str, Mapping[str, Quantity]] = {}
        self._verdicts: dict[tuple[bytes, Wanted], _Verdicts] = {}
        self._changed: list[str] = []  # nodes changed in place, in order

    def sync(
        self, nodes: Mapping[str, Node], usage: Mapping[str, Mapping[str, Quantity]]
    ) -> None:
        """Read these nodes and what their pods use: all afresh when either is another
        object than last time (the scheduler rebuilds them after outside changes)."""
        if nodes is not self._nodes or usage is not self._usage:
            self._nodes, self._usage = nodes, usage
            self._forget()

    def changed(self, node: str) -> None:
        """What pods use on `node` changed in place (the scheduler assumed a pod there)."""
        self._left.pop(node, None)
        if not self._verdicts:
            return
        if len(self._changed) >= CHANGES_LIMIT:
            self._forget()
        else:
            self._changed.append(node)

    def left(self, node: str) -> Left:
        room = self._left.get(node)
        if room is None:
            room = self._left[node] = resources_left(self._nodes[node], self._usage.get(node, {}))
        return room

    def fitting(
        self, key: bytes, nodes: Sequence[str], wants: Wanted, reasons: dict[str, int]
    ) -> list[str]:
        """`nodes` (the same list for the same `key`) that `wants` fit, in their order; the
        others are counted by reason into `reasons`."""
        verdicts = self._verdicts.get((key, wants))
        if verdicts is None or verdicts.nodes is not nodes:
            if len(self._verdicts) >= VERDICTS_LIMIT:
                self._forget()
            why = {name: shortfall(wants, self.left(name)) for name in nodes}
            verdicts = _Verdicts(nodes, why, Counter(why.values()), len(self._changed))
            self._verdicts[key, wants] = verdicts
        else:
            self._recheck(verdicts, wants)
        for _, _, reason in wants:  # in the order of the resources, as `shortfall` checks
            if verdicts.counts[reason]:
                reasons[reason] = reasons.get(reason, 0) + verdicts.counts[reason]
        why = verdicts.why
        return [name for name in nodes if not why[name]]

    def _recheck(self, verdicts: _Verdicts, wants: Wanted) -> None:
        for name in set(self._changed[verdicts.seen :]):
            before = verdicts.why.get(name)
            if before is None:
                continue  # not one of this key's nodes
            now = verdicts.why[name] = shortfall(wants, self.left(name))
            verdicts.counts[before] -= 1
            verdicts.counts[now] += 1
        verdicts.seen = len(self._changed)

    def _forget(self) -> None:
        self._left.clear()
        self._verdicts.clear()
        self._changed.clear()
