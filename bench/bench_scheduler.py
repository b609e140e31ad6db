"""End-to-end scheduling through the SqliteStore: pods/s, latency, RSS, time split.

Targets (store/scheduler issue): at least 300 pods/s at 5,000 nodes with first-fit, and a
per-pod cost that grows sub-linearly with the node count (compare the two sizes' ms/pod).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench.harness import Row

RUNS = [(1250, 10_000, p) for p in ("first-fit", "binpack", "spread", "topology", "fragmentation")]
RUNS.append((5000, 40_000, "first-fit"))
TARGET_PODS_PER_S = 300


def measure(nodes: int, pods: int, policy: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.scheduler_run", str(nodes), str(pods), policy],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def run() -> list[Row]:
    rows = []
    per_pod: dict[int, float] = {}
    for nodes, pods, policy in RUNS:
        m = measure(nodes, pods, policy)
        rate, split = float(m["pods_per_s"]), m["split"]
        note = (
            f"{m['placed']}/{pods} placed; p50 {m['p50_ms']:.2f} ms, p99 {m['p99_ms']:.2f} ms; "
            f"RSS {m['peak_rss_mb']:.0f} MB; store {split.get('store', 0):.0%}, "
            f"allocator {split.get('allocator', 0):.0%}, cel {split.get('cel', 0):.0%}"
        )
        at_scale = nodes == 5000 and policy == "first-fit"
        rows.append(
            Row(
                "scheduler",
                f"{pods} pods / {nodes} nodes, {policy}",
                rate,
                "pods/s",
                target=f">= {TARGET_PODS_PER_S}" if at_scale else "",
                ok=rate >= TARGET_PODS_PER_S if at_scale else None,
                note=note,
            )
        )
        if policy == "first-fit":
            per_pod[nodes] = 1e3 / rate
    if len(per_pod) == 2:
        growth = per_pod[5000] / per_pod[1250]
        rows.append(
            Row(
                "scheduler",
                "ms/pod growth, 4x nodes (first-fit)",
                growth,
                "x",
                target="< 4 (sub-linear)",
                ok=growth < 4,
            )
        )
    return rows
