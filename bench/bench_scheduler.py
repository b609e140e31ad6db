"""End-to-end scheduling through the SqliteStore: pods/s, latency, RSS, time split.

Targets (store/scheduler and placement issues): at least 300 pods/s at 5,000 nodes with
every policy (first-fit, binpack, spread, topology, fragmentation, fragmentation-lookahead,
fragmentation-priced),
and a per-pod cost that grows sub-linearly with the node count (each policy's ms/pod at
5,000 over 1,250 nodes). The CPU time of the scheduling phase is reported beside the wall
time: on a shared machine it is the steadier figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import Row, sized

POLICIES = (
    "first-fit", "binpack", "spread", "topology", "fragmentation", "fragmentation-lookahead",
    "fragmentation-priced",
)  # fmt: skip
# (nodes, pods): the two sizes; quick mode keeps their 4x ratio on small ones
SIZES = ((sized(1250, 100), sized(10_000, 400)), (sized(5000, 400), sized(40_000, 1600)))
RUNS = [(nodes, pods, p) for nodes, pods in SIZES for p in POLICIES]
TARGET_PODS_PER_S = 300


def measure(nodes: int, pods: int, policy: str, saved: Path) -> dict[str, Any]:
    """One policy on a copy of the store `saved` (populated once per size: `prepare`)."""
    out = _run_module(str(nodes), str(pods), policy, str(saved))
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def prepare(nodes: int, pods: int, saved: Path) -> None:
    _run_module(str(nodes), str(pods), "--prepare", str(saved))


def _run_module(*args: str) -> str:
    command = [sys.executable, "-m", "bench.scheduler_run", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=1800).stdout


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="kubedra-bench-scheduler-") as stores:
        measured = []
        for nodes, pods, policy in RUNS:
            saved = Path(stores) / f"{nodes}-{pods}.db"
            if not saved.exists():
                prepare(nodes, pods, saved)
            measured.append((nodes, pods, policy, measure(nodes, pods, policy, saved)))
    return _rows(measured)


def _rows(measured: list[tuple[int, int, str, dict[str, Any]]]) -> list[Row]:
    rows = []
    ms_per_pod: dict[tuple[str, int], float] = {}
    for nodes, pods, policy, m in measured:
        rate, split = float(m["pods_per_s"]), m["split"]
        note = (
            f"{m['placed']}/{pods} placed; p50 {m['p50_ms']:.2f} ms, p99 {m['p99_ms']:.2f} ms; "
            f"CPU {m['cpu_pods_per_s']:.0f} pods/s; RSS {m['peak_rss_mb']:.0f} MB; "
            f"store {split.get('store', 0):.0%}, allocator {split.get('allocator', 0):.0%}, "
            f"cel {split.get('cel', 0):.0%}, policy {split.get('policy', 0):.0%}"
        )
        at_scale = nodes == SIZES[-1][0]
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
        ms_per_pod[policy, nodes] = 1e3 / rate
    (small, _), (large, _) = SIZES
    for policy in POLICIES:
        growth = ms_per_pod[policy, large] / ms_per_pod[policy, small]
        rows.append(
            Row(
                "scheduler",
                f"ms/pod growth, {large // small}x nodes ({policy})",
                growth,
                "x",
                target=f"< {large // small} (sub-linear)",
                ok=growth < large // small,
            )
        )
    return rows
