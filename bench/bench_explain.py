"""Explanations on a 1,000-node cluster: what naming the blocker costs, and where.

Nodes are scheduler_run's 8-GPU catalog profiles (two GPUs per PCIe root); the pod asks
for 4 GPUs on one `resource.kubernetes.io/pcieRoot`, so it fits nowhere and every node
fails at the constraint, the case where the search works hardest before it gives up.
Rows: `kubedra explain pod` (allocation, funnels and blockers on every node, grouped, and
what would make it fit), one scheduling attempt of that pod (its PodScheduled message names
the blockers), and the diagnosis of one refused node alone, with its share of that attempt
(timed directly: the attempt's own noise on a shared machine is larger than the share). A
pod that fits never reaches the diagnosis.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.harness import Row, best_of, per_call, sized
from bench.scheduler_run import populate
from kubedra.allocator import allocate, diagnose, holders_of
from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster import SqliteStore
from kubedra.scheduler import scheduler as scheduler_module
from kubedra.scheduler.explain import explain_claims, pod_claims, what_would_fit
from kubedra.scheduler.scheduler import Scheduler

ROOT = "resource.kubernetes.io/pcieRoot"
CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "four-on-one-root", "namespace": "default"},
    "spec": {
        "devices": {
            "requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "high-memory-gpu", "count": 4}}
            ],
            "constraints": [{"matchAttribute": ROOT}],
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


def _failure(store: SqliteStore, pod: Pod) -> tuple[float, str]:
    """Best time of one scheduling attempt that fits nowhere, and its message."""
    sched = Scheduler(store)
    sched.refresh()
    message: list[str] = []

    def attempt() -> None:
        sched.framework.forget()  # every attempt tries every node, as a first one does
        message.append(sched.schedule(pod).message)

    return best_of(attempt), message[-1]


def _diagnosis(store: SqliteStore, pod: Pod, claims: list[ResourceClaim]) -> float:
    """Seconds to diagnose one refused node: the blockers of the failed searches of the
    nodes whose blocker the PodScheduled message names."""
    sched = Scheduler(store)
    sched.refresh()
    misses = []
    for node in sched.nodes()[: scheduler_module.DIAGNOSED_NODES]:
        found = allocate(
            *sched.allocator_inputs(claims, node), **sched.allocator_options(pod.namespace)
        )
        assert found.unsatisfiable is not None
        misses.append(found.unsatisfiable)
    holders = holders_of(store.list(ResourceClaim, None))
    return per_call(lambda: [diagnose(u, holders) for u in misses], 20) / len(misses)


def run() -> list[Row]:
    nodes = sized(1000, 100)
    store, pod = _cluster(nodes)
    sched = Scheduler(store)
    claims: list[ResourceClaim] = pod_claims(sched, pod)
    hints: list[Any] = []

    def explain() -> None:
        hints.append(what_would_fit(explain_claims(sched, claims, pod)))

    explained = best_of(explain)
    assert hints[-1] and "no node of the cluster can hold it" in hints[-1][0], hints[-1]
    failed, message = _failure(store, pod)
    assert f"share one {ROOT}" in message, message
    per_node = _diagnosis(store, pod, claims)
    share = per_node * min(nodes, scheduler_module.DIAGNOSED_NODES) / failed
    size, diagnosed = f"{nodes} nodes", scheduler_module.DIAGNOSED_NODES
    return [
        Row("explain", f"explain pod, fits nowhere, {size}", explained, "s",
            note="allocation, funnels and blockers on every node, grouped; what would fit"),
        Row("explain", f"scheduling attempt that fails, {size}", failed, "s",
            note=f"PodScheduled names the blockers of the first {diagnosed} nodes"),
        Row("explain", "blocker diagnosis per refused node", per_node * 1e3, "ms",
            note=f"{share:.1%} of the failed attempt"),
    ]  # fmt: skip
