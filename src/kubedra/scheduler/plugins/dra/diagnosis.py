"""Why a pod's claims fit on no node, beyond upstream's "cannot allocate all claims".

On failure only (the DRA plugin's PostFilter), the first DIAGNOSED_NODES nodes the
allocator refused are diagnosed: the stage that stopped each claim there, with numbers,
goes in brackets after the allocator's summary in the PodScheduled message. The
FailedScheduling event adds kubedra's explanation: on the node that came closest, the
blockers and the device funnel, then what would make the pod fit.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.allocator.blockers import Holders, diagnose
from kubedra.allocator.explain import Blocker, Unsatisfiable
from kubedra.scheduler.funnels import format_funnel
from kubedra.scheduler.hints import hints

DIAGNOSED_NODES = 32  # refused nodes whose blocker the PodScheduled message names
Blockers = tuple[Blocker, ...]


def with_blockers(
    reasons: dict[str, int], misses: Sequence[Unsatisfiable], blocked: dict[str, Blockers]
) -> dict[str, int]:
    """The reasons with kubedra's blockers in brackets after the allocator's summary, for
    the refused nodes that were diagnosed (`blocked`, by node)."""
    out = dict(reasons)
    for miss in misses:
        blockers = blocked.get(miss.node)
        if not blockers or out.get(miss.summary, 0) <= 0:
            continue
        short = "; ".join(f"{b.request or b.claim}: {b.short}" for b in blockers)
        out[miss.summary] -= 1
        if not out[miss.summary]:
            del out[miss.summary]
        key = f"{miss.summary} ({short})"
        out[key] = out.get(key, 0) + 1
    return out


def explained(
    misses: Sequence[Unsatisfiable], blocked: dict[str, Blockers], holders: Holders
) -> str:
    """kubedra's explanation of a pod that fit nowhere: on the node that came closest (the
    most devices left at the last stage), the blockers and the allocator's funnel; then
    what would make it fit (a release, else the nearest node), from the diagnosed nodes
    and that one."""
    with_funnels = [m for m in misses if m.funnels]
    if not with_funnels:
        return ""
    best = max(with_funnels, key=lambda m: sum(f.counts[-1] for f in m.funnels))
    why = blocked[best.node] if best.node in blocked else diagnose(best, holders)
    funnels = "; ".join(format_funnel(f) for f in best.funnels)
    text = f"on node {best.node}, {'; '.join(map(str, why)) or best.summary}: {funnels}"
    return "; ".join([text, *hints({**blocked, best.node: why}.items())])
