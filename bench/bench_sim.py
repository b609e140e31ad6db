"""Simulator benchmark: simulated pods per second on the openb default trace.

Saturate: the full 1213-node cluster, the first N arrivals of the FGD arrival list (seed 42).
Replay: the report's departures run cut to one hour of arrivals (a Poisson stream at 90 %
load on 1/16 of the nodes), where pending pods retry on every release. Both go through the
real scheduler and allocator; the wall time includes setup (store, nodes, slices).
"""

from __future__ import annotations

import time

from bench.harness import Row, quick, sized
from kubedra.sim.engine import run_replay, run_saturate
from kubedra.sim.trace import (
    OPENB_DIR,
    Cluster,
    Workload,
    fgd_arrivals,
    load_cluster,
    load_workload,
    poisson_stream,
    prefix,
    sample_cluster,
)

SLICE = sized(1000, 100)
REPLAY_PODS = 150 if quick() else None  # quick: the replay's first arrivals only
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
    return [*rows, _replay(cluster, workload)]


def _replay(cluster: Cluster, workload: Workload) -> Row:
    small = sample_cluster(cluster, 1 / 16, seed=42)
    stream = prefix(
        poisson_stream(workload, small.gpu_milli, 0.9, horizon_s=3600, seed=42), REPLAY_PODS
    )
    start = time.perf_counter()
    result = run_replay(small, stream, "fragmentation")
    wall = time.perf_counter() - start
    return Row(
        "sim",
        f"replay fragmentation, {len(stream.tasks)} pods, {len(small.nodes)} nodes",
        len(stream.tasks) / wall,
        "pods/s",
        note=f"{wall:.1f} s incl. setup; max pending {result.summary['max_pending']:.0f}",
    )
