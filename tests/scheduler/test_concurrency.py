"""Real processes on one SqliteStore: no double allocation, recovery after a kill."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster import SqliteStore
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store

RUN_SCHEDULER = textwrap.dedent("""
    import sys
    from kubedra.cluster import SqliteStore
    from kubedra.scheduler.scheduler import Scheduler
    scheduler = Scheduler(SqliteStore(sys.argv[1]), sys.argv[2])
    idle = 0
    while idle < 3:
        outcomes = scheduler.run_once()
        idle = 0 if any(o.node for o in outcomes) else idle + 1
""")

CRASH_BEFORE_BIND = textwrap.dedent("""
    import os, signal, sys
    from kubedra.cluster import SqliteStore
    from kubedra.scheduler.plugins.binder import DefaultBinder
    from kubedra.scheduler.scheduler import Scheduler
    def die(self, state, pod, node):
        os.kill(os.getpid(), signal.SIGKILL)  # claims are written, the pod is not bound
    DefaultBinder.bind = die
    Scheduler(SqliteStore(sys.argv[1])).run_once()
""")


def allocated_devices(store: SqliteStore) -> list[str]:
    out = []
    for claim in store.list(ResourceClaim):
        if claim.status is not None and claim.status.allocation is not None:
            out += [f"{r.driver}/{r.pool}/{r.device}" for r in claim.status.allocation.devices.results]
    return out


def test_two_scheduler_processes_never_allocate_a_device_twice(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    for n in range(40):
        gpu_node(store, f"node-{n:02d}")
    gpu_template(store, "one", 1)
    gpu_template(store, "two", 2)
    for i in range(500):
        gpu_pod(store, f"p{i:03d}", template="one" if i % 3 else "two")
    procs = [subprocess.Popen([sys.executable, "-c", RUN_SCHEDULER, str(store.path), policy])
             for policy in ("first-fit", "spread")]
    for proc in procs:
        assert proc.wait(timeout=600) == 0
    devices = allocated_devices(store)
    assert [d for d, n in Counter(devices).items() if n > 1] == []
    bound = [p for p in store.list(Pod) if p.spec.node_name]
    # 320 GPUs for 667 requested: every GPU is used, the rest of the pods wait
    assert len(devices) == 320
    assert len(bound) == len([c for c in store.list(ResourceClaim) if c.status and c.status.allocation])
    for pod in bound:
        for recorded in pod.status.resource_claim_statuses if pod.status else ():
            claim = store.get(ResourceClaim, recorded.resource_claim_name or "")
            assert claim.status is not None and claim.status.allocation is not None
            assert {r.pool for r in claim.status.allocation.devices.results} == {pod.spec.node_name}


def test_killed_between_claim_write_and_bind_recovers(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    gpu_node(store, "n2", gpus=2)
    gpu_template(store, "two", 2)
    gpu_pod(store, "victim", template="two")
    crashed = subprocess.run([sys.executable, "-c", CRASH_BEFORE_BIND, str(store.path)], timeout=120)
    assert crashed.returncode == -9
    (claim,) = store.list(ResourceClaim)
    assert claim.status is not None and claim.status.allocation is not None
    assert store.get(Pod, "victim").spec.node_name is None
    before = allocated_devices(store)
    (outcome,) = Scheduler(store).run_once()  # a fresh scheduler after the crash
    assert outcome.node == "n1"
    assert allocated_devices(store) == before  # the same devices: no second allocation
    assert len(store.list(ResourceClaim)) == 1  # and no leaked second claim
    gpu_pod(store, "next", template="two")
    (nxt,) = Scheduler(store).run_once()
    assert nxt.node == "n2"
