"""Explanations on a 1,000-node cluster: what naming the blocker costs, and where.

Nodes are scheduler_run's 8-GPU catalog profiles (two GPUs per PCIe root); the pod asks
for 4 GPUs on one `resource.kubernetes.io/pcieRoot`, so it fits nowhere and every node
fails at the constraint, the case where the search works hardest before it gives up.
Rows: `kubedra explain pod` (allocation, funnels and blockers on every node, grouped, and
what would make it fit), and one scheduling attempt of that pod with and without the
blocker diagnosis (`DIAGNOSED_NODES` = 0): their difference is what naming the blocker
adds to a failure. A pod that fits never reaches the diagnosis.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.harness import Row, best_of, sized
from bench.scheduler_run import populate
from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster import SqliteStore
from kubedra.scheduler import scheduler as scheduler_module
from kubedra.scheduler.explain import explain_claims, pod_claims, what_would_fit
from kubedra.scheduler.scheduler import Scheduler

CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "four-on-one-root", "namespace": "default"},
    "spec": {
        "devices": {
            "requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "high-memory-gpu", "count": 4}}
            ],
            "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
        }
    },
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "wants-one-root", "namespace": "default"},
    "spec": {
        "resourceClaims": [{"name": "gpus", "resourceClaimName": "four-on-one-root"}],
        "containers": [{"name": "train", "resources": {"claims": [{"name": "gpus"}]}}],
    },
}


def _cluster(nodes: int) -> tuple[SqliteStore, Pod]:
    store = SqliteStore(Path(tempfile.mkdtemp()) / "state.db")
    populate(store, nodes, 0)
    store.create(decode_object(CLAIM).obj)
    pod = store.create(decode_object(POD).obj)
    assert isinstance(pod, Pod)
    return store, pod


def _failure(store: SqliteStore, pod: Pod, diagnosed: int) -> tuple[float, str]:
    """Best time of one scheduling attempt that fits nowhere, and its message."""
    sched = Scheduler(store)
    sched.refresh()
    saved = scheduler_module.DIAGNOSED_NODES
    scheduler_module.DIAGNOSED_NODES = diagnosed
    message: list[str] = []

    def attempt() -> None:
        sched._forget_infeasible()  # every attempt tries every node, as a first one does
        message.append(sched.schedule(pod).message)

    try:
        return best_of(attempt), message[-1]
    finally:
        scheduler_module.DIAGNOSED_NODES = saved


def run() -> list[Row]:
    nodes = sized(1000, 100)
    store, pod = _cluster(nodes)
    sched = Scheduler(store)
    claims: list[ResourceClaim] = pod_claims(sched, pod)
    hints: list[Any] = []

    def explain() -> None:
        hints.append(what_would_fit(explain_claims(sched, claims, pod)))

    explained = best_of(explain)
    assert hints[-1] and "no eligible node has 4" in hints[-1][0], hints[-1]
    with_blockers, message = _failure(store, pod, scheduler_module.DIAGNOSED_NODES)
    without, plain = _failure(store, pod, 0)
    assert "share one resource.kubernetes.io/pcieRoot" in message and "share" not in plain
    added = with_blockers - without
    per_node = added / min(nodes, scheduler_module.DIAGNOSED_NODES) * 1e3
    size = f"{nodes} nodes"
    return [
        Row("explain", f"explain pod, fits nowhere, {size}", explained, "s",
            note="allocation, funnels and blockers on every node, grouped; what would fit"),
        Row("explain", f"scheduling attempt that fails, {size}, with blockers", with_blockers,
            "s", note=f"blocker named for the first {scheduler_module.DIAGNOSED_NODES} nodes"),
        Row("explain", f"scheduling attempt that fails, {size}, without", without, "s",
            note="DIAGNOSED_NODES = 0: upstream's message only"),
        Row("explain", "blocker diagnosis per refused node", per_node, "ms",
            note=f"adds {added / max(without, 1e-9):.1%} to a failed attempt"),
    ]  # fmt: skip
