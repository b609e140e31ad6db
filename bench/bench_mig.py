"""MIG placement cost: one claim for a MIG instance placed on 1,000 partitionable GPUs.

1,000 H100 80GB GPUs under dynamic MIG (125 nodes of 8, 26,000 devices drawing on 1,000
counter sets), claims of the mixed stream of `bench.mig_placement` placed one after another
into the empty cluster (no departures) by the scheduler's placement step (the policy's
calls, kubedra's allocator; `mig_placement.Placer`, no store): the wall time per claim,
for `mig-aware` (its prices learned from the claims as they come, so the first ones pay for
solving them) and for `first-fit` beside it. No target is set by the issue.
"""

from __future__ import annotations

import statistics
import time

from bench.harness import Row, sized
from bench.mig_placement import Placer, build_cluster, stream
from kubedra.scheduler.policies import make_policy

GPUS = 1000
PER_NODE = 8


def measure(policy: str, claims: int) -> tuple[list[float], int]:
    """Seconds per claim placed, and how many were placed. highspy and numpy (the prices'
    solver) are imported first, as in any scheduler that has placed a pod before."""
    import highspy  # noqa: F401
    import numpy  # noqa: F401

    slices, nodes = build_cluster(GPUS, per_node=PER_NODE)
    placer = Placer(slices, nodes, make_policy(policy))
    times, placed = [], 0
    for request in stream(7, GPUS, claims, 1.0):
        began = time.perf_counter()
        got = placer.place(request)
        times.append(time.perf_counter() - began)
        placed += got is not None
    return times, placed


def run() -> list[Row]:
    claims = sized(1500, 150)
    rows = []
    for policy in ("mig-aware", "first-fit"):
        times, placed = measure(policy, claims)
        ms = sorted(t * 1e3 for t in times)
        rows.append(
            Row(
                "mig",
                f"placement per claim, {GPUS:,} MIG GPUs ({policy})",
                statistics.fmean(ms),
                "ms/claim",
                note=(
                    f"{placed}/{claims} claims placed into an empty cluster; "
                    f"p50 {ms[len(ms) // 2]:.2f} ms, p99 {ms[int(len(ms) * 0.99)]:.2f} ms; "
                    f"{GPUS // PER_NODE} nodes x {PER_NODE} H100, policy + allocator, no store"
                ),
            )
        )
    return rows
