"""`kubedra scheduler run` on the embedded store: the loop, its metrics and health, leader
election between real processes, and the background binding used on clusters."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from kubedra.api.coordination import Lease
from kubedra.api.core import Pod
from kubedra.cluster import SqliteStore
from kubedra.cluster.kubeconfig import load_config
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.rest import ApiClient
from kubedra.scheduler.runner import LOST_LEASE, STOPPED, RunConfig, SchedulerRunner
from kubedra.scheduler.verify import check_allocations
from tests.conftest import REPO
from tests.e2e.scheduler_process import wait_for
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store

FAST_LEASE = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.2}


def workload(store: SqliteStore, pods: int, nodes: int = 8, scheduler: str = "kubedra") -> None:
    for n in range(nodes):
        gpu_node(store, f"n{n}", gpus=8)
    gpu_template(store, "one", 1)
    gpu_template(store, "two", 2)
    for i in range(pods):
        gpu_pod(store, f"p{i:03d}", template="one" if i % 2 else "two", schedulerName=scheduler)


def bound(store: SqliteStore) -> list[Pod]:
    return [p for p in store.list(Pod) if p.spec.node_name]


class Running:
    """A runner in a thread, stopped at the end."""

    def __init__(self, runner: SchedulerRunner) -> None:
        self.runner, self.stop = runner, threading.Event()
        self.result: list[int] = []
        self.thread = threading.Thread(target=lambda: self.result.append(runner.run(self.stop)))
        self.thread.start()

    def end(self) -> int:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.result[0]


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for r in started:
        if r.thread.is_alive():
            r.end()


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.parametrize("background", [False, True], ids=["in-line", "background"])
def test_the_runner_schedules_serves_metrics_and_releases_its_lease(
    tmp_path: Path, running: list[Running], background: bool
) -> None:
    store = new_store(tmp_path)
    workload(store, 40)
    gpu_pod(store, "not-mine", template="one", schedulerName="other")
    gpu_pod(store, "too-big", template="nine-missing", schedulerName="kubedra")
    config = RunConfig(metrics_port=0, claim_controller=True, shared_nodes="warn", **FAST_LEASE)
    runner = SchedulerRunner(store, config, election_store=SqliteStore(store.path),
                             background=background)
    r = Running(runner)
    running.append(r)
    wait_for("40 pods bound", lambda: len(bound(store)) == 40)
    assert runner.port is not None
    assert get(runner.port, "/healthz")[0] == 200 and get(runner.port, "/readyz")[0] == 200
    _, metrics = get(runner.port, "/metrics")
    assert 'kubedra_scheduler_schedule_attempts_total{profile="kubedra",result="scheduled"} 40.0' in metrics
    assert 'kubedra_scheduler_leader 1.0' in metrics
    assert "kubedra_scheduler_scheduling_attempt_duration_seconds_bucket" in metrics
    assert store.get(Pod, "not-mine").spec.node_name is None  # another scheduler's pod
    condition = store.get(Pod, "too-big").status.conditions[0]  # type: ignore[union-attr]
    assert condition.message == 'resource claim template "nine-missing" not found'
    assert check_allocations(store) == []
    assert r.end() == STOPPED
    assert store.get(Lease, "kubedra", "kube-system").spec.holder_identity == ""


def test_a_leader_that_loses_its_lease_stops(tmp_path: Path, running: list[Running]) -> None:
    store = new_store(tmp_path)
    workload(store, 4)
    runner = SchedulerRunner(store, RunConfig(claim_controller=True, **FAST_LEASE))
    r = Running(runner)
    running.append(r)
    wait_for("4 pods bound", lambda: len(bound(store)) == 4)
    lease = store.get(Lease, "kubedra", "kube-system")  # taken by force: a new holder record
    store.update(msgspec.structs.replace(lease, spec=msgspec.structs.replace(
        lease.spec, holder_identity="thief", lease_duration_seconds=30)))
    r.thread.join(15)
    assert r.result == [LOST_LEASE]


def test_a_standby_process_takes_over_when_the_leader_is_killed(tmp_path: Path) -> None:
    """Two `kubedra scheduler run` processes on one store: kill -9 the leader in the middle
    of a burst; the standby finishes it; every pod is bound once, every allocation valid."""
    store = new_store(tmp_path)
    workload(store, 0, nodes=24)
    env = {**os.environ, "KUBEDRA_STORE": str(store.path), "PYTHONPATH": str(REPO / "src")}
    env.pop("KUBECONFIG", None)
    command = [sys.executable, "-m", "kubedra", "-v", "scheduler", "run",
               "--leader-elect-lease-duration", "3", "--leader-elect-renew-deadline", "2",
               "--leader-elect-retry-period", "0.2"]
    logs = [open(tmp_path / f"r{i}.log", "wb") for i in range(2)]  # noqa: SIM115
    replicas = [subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
                for log in logs]
    try:
        wait_for("a leader", lambda: _holder(store) != "")
        for i in range(120):
            gpu_pod(store, f"p{i:03d}", template="one" if i % 2 else "two",
                    schedulerName="kubedra")
        wait_for("the burst to start", lambda: len(bound(store)) >= 10)
        leader_id = _holder(store)
        leader = next(p for p, log in zip(replicas, logs, strict=True)
                      if leader_id in Path(log.name).read_text())
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait(10)
        # The lease passes once it expires (3 s), even if the leader had bound every pod.
        wait_for("the standby to lead", lambda: _holder(store) not in ("", leader_id), timeout=60)
        wait_for("the standby to finish", lambda: len(bound(store)) == 120, timeout=120)
    finally:
        for p in replicas:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(30)
        for log in logs:
            log.close()
    assert check_allocations(store) == []
    assert len(bound(store)) == 120


def _holder(store: SqliteStore) -> str:
    try:
        return store.get(Lease, "kubedra", "kube-system").spec.holder_identity or ""
    except Exception:
        return ""


def test_a_stop_while_the_api_server_does_not_answer_ends_the_run(tmp_path: Path) -> None:
    """The caches cannot be filled (nothing listens): SIGTERM still ends the run at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free, and nothing listens once closed
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    store = KubeStore(ApiClient(load_config(str(kubeconfig))))
    runner = SchedulerRunner(store, RunConfig(leader_elect=False, metrics_port=0))
    r = Running(runner)
    time.sleep(1.0)
    assert runner.port is not None and get(runner.port, "/readyz")[0] == 503
    started = time.monotonic()
    assert r.end() == STOPPED
    assert time.monotonic() - started < 5
