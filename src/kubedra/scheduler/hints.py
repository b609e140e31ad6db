"""What would make a pod (or claim) fit, from the blockers of the nodes that refused it.

One source for every place that says it (`kubedra explain`, `allocate --cluster`, the
dashboard and the FailedScheduling event), each passing the nodes it has diagnosed: per
blocked claim, a node where releasing claims makes it fit (checked by the allocator when
the blocker was diagnosed), else the nearest node and what it lacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kubedra.allocator import Blocker

# Blockers that no device, released or found elsewhere, would lift.
NOT_DEVICES = ("node", "error", "admin access", "search budget", "results limit")
_COMBINATIONS = ("claims together", "requests together")
_CONSTRAINTS = {"matchAttribute": "sharing one value", "distinctAttribute": "distinct values"}
Refused = tuple[str, Sequence[Blocker]]  # a node (or the first of a group) and its blockers


def hints(refused: Iterable[Refused]) -> list[str]:
    """One line per blocked claim: release on a node, else the nearest node (blocked at the
    latest stage, then with the most of what is needed) and what it lacks."""
    seen: dict[str, list[tuple[str, Blocker]]] = {}
    for node, blockers in refused:
        for b in blockers:
            if b.kind not in NOT_DEVICES:
                seen.setdefault(b.claim, []).append((node, b))
    return [_nearest(items) for items in seen.values()]


def _nearest(items: list[tuple[str, Blocker]]) -> str:
    releasable = [(n, b) for n, b in items if b.release]
    if releasable:
        node, b = min(releasable, key=lambda x: len(x[1].release))
        return f"{_who(b)}: fits on {node} if claim(s) {', '.join(b.release)} were released"
    node, b = max(items, key=lambda x: (_rank(x[1]), x[1].have / max(x[1].need, 1)))
    line = f"nearest: {node}: {_who(b)}: {b.short}"
    if b.fix:
        line += f"; {b.fix}"
    # Nodes blocked before the constraint lack even the candidates; only a node where every
    # constraint held alone (a combination blocker) could have them.
    if b.kind in _CONSTRAINTS and all(x.kind not in _COMBINATIONS for _, x in items):
        line += f"; no eligible node has {b.need} candidate devices {_CONSTRAINTS[b.kind]}"
    return line


def _who(b: Blocker) -> str:
    return f"{b.claim} {b.request}".strip()


def _rank(b: Blocker) -> int:
    """How far a node got: a constraint is checked only on nodes whose requests each have
    enough devices, a combination only where every constraint holds alone."""
    return 2 if b.kind in _COMBINATIONS else 1 if b.kind in _CONSTRAINTS else 0
