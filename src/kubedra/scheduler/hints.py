"""What would make a pod (or claim) fit, from the blockers of the nodes that refused it.

One source for every place that says it (`kubedra explain`, `allocate --cluster`, the
dashboard and the FailedScheduling event), each passing the nodes it has diagnosed: per
blocked claim, a node where releasing claims makes it fit (checked by the allocator when
the blocker was diagnosed), else the nearest node and what it lacks. When the caller passed
every node of the cluster and none could hold a claim even with all its devices free, that
comes first, with the kind of node that would.

"Nearest" is judged by what the claim needs, never by pool size: a node that could hold it
once its devices are free, then the most devices passing the claim's selectors, then the
most of them free and fitting now, then the latest stage reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kubedra.allocator import Blocker

# Blockers that no device, released or found elsewhere, would lift.
NOT_DEVICES = ("node", "error", "admin access", "search budget", "results limit")
_COMBINATIONS = ("claims together", "requests together")
_CONSTRAINTS = {"matchAttribute": "sharing one value", "distinctAttribute": "distinct values"}
Refused = tuple[str, Sequence[Blocker]]  # a node (or the first of a group) and its blockers


def hints(refused: Iterable[Refused], every_node: bool = False) -> list[str]:
    """One line per blocked claim: release on a node, else the nearest node and what it
    lacks. With `every_node` (`refused` is the whole cluster, one node per group of alike
    nodes), a claim that no node could hold even with all devices free says so, first."""
    nodes = list(refused)
    seen: dict[str, list[tuple[str, Blocker]]] = {}
    for node, blockers in nodes:
        for b in blockers:
            if b.kind not in NOT_DEVICES:
                seen.setdefault(b.claim, []).append((node, b))
    never, rest = [], []
    for items in seen.values():
        if every_node and _nowhere(items, len(nodes)):
            never.append(_never(items))
        else:
            rest.append(_nearest(items))
    return never + rest


def _nowhere(items: list[tuple[str, Blocker]], nodes: int) -> bool:
    """Every node refuses the claim, and would with all its devices free."""
    return len({n for n, _ in items}) == nodes and all(b.fits_free is False for _, b in items)


def _never(items: list[tuple[str, Blocker]]) -> str:
    node, b = max(items, key=lambda x: _closeness(x[1]))
    limit = b.limit or b
    who = f"{node}: {limit.request}" if limit.request else node
    if limit.kind == "untainted":  # the devices exist, but are tainted (unhealthy, drained)
        return f"{b.claim}: the devices that would do are tainted; nearest: {who}: {limit.detail}"
    line = f"{b.claim}: no node of the cluster can hold it, even with all devices free"
    if b.wants:
        line += f": it needs a node with {b.wants}"
    line += f"; nearest: {who}: {limit.short}"
    return line + (f"; {limit.fix}" if limit.fix else "")


def _nearest(items: list[tuple[str, Blocker]]) -> str:
    releasable = [(n, b) for n, b in items if b.release]
    if releasable:
        node, b = min(releasable, key=lambda x: len(x[1].release))
        return f"{_who(b)}: fits on {node} if claim(s) {', '.join(b.release)} were released"
    node, b = max(items, key=lambda x: _closeness(x[1]))
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


def _closeness(b: Blocker) -> tuple[bool, float, float, int, float]:
    """How near a node comes to what the claim needs: it could hold the claim once its
    devices are free; the share of the needed devices passing the claim's selectors; the
    share also free and fitting now; the stage reached; the blocker's own numbers."""
    need = max(b.needed, 1)
    return (
        b.fits_free is not False,
        b.matching / need,
        b.usable / need,
        _rank(b),
        b.have / max(b.need, 1),
    )


def _rank(b: Blocker) -> int:
    """How far a node got: a constraint is checked only on nodes whose requests each have
    enough devices, a combination only where every constraint holds alone."""
    return 2 if b.kind in _COMBINATIONS else 1 if b.kind in _CONSTRAINTS else 0
