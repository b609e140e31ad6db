"""Simulator benchmark: simulated pods per second on a slice of the openb default trace.

The full 1213-node cluster, the first N arrivals of the FGD arrival list (seed 42), through
the real scheduler and allocator; setup (store, nodes, slices) is timed apart.
"""

from __future__ import annotations

import time

from bench.harness import Row
from kubedra.sim.engine import run_saturate
from kubedra.sim.trace import OPENB_DIR, Workload, fgd_arrivals, load_cluster, load_workload

SLICE = 1000
POLICIES = ("first-fit", "fragmentation", "device-plugin")


def run() -> list[Row]:
    nodes = OPENB_DIR / "openb_node_list_gpu_node.csv"
    pods = OPENB_DIR / "openb_pod_list_default.csv"
    if not pods.exists():
        return [Row("sim", "openb default slice", 0.0, "pods/s", note="trace not available")]
    cluster = load_cluster(nodes)
    workload = load_workload(pods)
    arrivals = fgd_arrivals(workload, cluster.gpu_milli, seed=42)
    part = Workload(arrivals.tasks[:SLICE], "default")
    rows = []
    for policy in POLICIES:
        start = time.perf_counter()
        result = run_saturate(cluster, part, policy, target=workload.tasks)
        wall = time.perf_counter() - start
        rows.append(
            Row(
                "sim",
                f"{policy}, first {SLICE} arrivals",
                SLICE / wall,
                "pods/s",
                note=f"{wall:.1f} s incl. setup; alloc {result.summary['alloc_pct']:.1f}%",
            )
        )
    return rows
