"""The scheduler's metrics after a scheduling run: kube-scheduler's series under its own
names, labels and buckets (attempts, attempt durations, the DynamicResources plugin's
allocator runs), and kubedra's device figures (idle devices, FGD fragmentation)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kubedra.api.core import Pod
from kubedra.cluster import SqliteStore
from kubedra.scheduler.metrics import UPSTREAM_ATTEMPT_BUCKETS, SchedulerMetrics, cluster_figures
from kubedra.scheduler.policies.fragmentation import Fragmentation, TaskShape
from kubedra.scheduler.runner import RunConfig, SchedulerRunner
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store

GPU = "gpu.nvidia.com"


def samples(metrics: SchedulerMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def run_until_idle(runner: SchedulerRunner) -> None:
    """The runner's loop turns, in line, until the queue has nothing due."""
    runner.scheduler.refresh()
    for _ in range(20):
        runner.scheduler.refresh()
        runner._turn()
        runner._report()
        if not len(runner.scheduler.queue) or runner.scheduler.queue.next_due() is None:
            break


def test_upstream_series_after_a_scheduling_run(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    for n in range(4):
        gpu_node(store, f"n{n}", gpus=8)
    gpu_template(store, "one", 1)
    gpu_template(store, "nine", 9)
    for i in range(10):
        gpu_pod(store, f"p{i}", template="one", schedulerName="kubedra")
    gpu_pod(store, "too-big", template="nine", schedulerName="kubedra")
    gpu_pod(store, "no-claim", claim="not-yet", schedulerName="kubedra")  # waits for it
    runner = SchedulerRunner(store, RunConfig(claim_controller=True, leader_elect=False),
                             background=False)  # fmt: skip
    run_until_idle(runner)
    assert sum(1 for p in store.list(Pod) if p.spec.node_name) == 10
    metrics = runner.metrics
    attempts = samples(metrics, "scheduler_schedule_attempts_total")
    scheduled = (("profile", "kubedra"), ("result", "scheduled"))
    unschedulable = (("profile", "kubedra"), ("result", "unschedulable"))
    assert attempts[scheduled] == 10
    assert attempts[unschedulable] >= 2  # too big; and waiting for a claim counts here too
    assert {dict(k)["result"] for k in attempts} <= {"scheduled", "unschedulable", "error"}
    old = samples(metrics, "kubedra_scheduler_schedule_attempts_total")
    assert sum(old.values()) == sum(attempts.values())  # the deprecated series agree
    assert old[(("profile", "kubedra"), ("result", "waiting"))] >= 1
    counts = samples(metrics, "scheduler_scheduling_attempt_duration_seconds_count")
    assert counts[scheduled] == 10
    buckets = samples(metrics, "scheduler_scheduling_attempt_duration_seconds_bucket")
    les = sorted({dict(k)["le"] for k in buckets}, key=float)
    # kube-scheduler's ExponentialBuckets(0.001, 2, 15), as Go prints them
    assert les[:4] == ["0.001", "0.002", "0.004", "0.008"] and les[-2:] == ["16.384", "+Inf"]
    assert len(UPSTREAM_ATTEMPT_BUCKETS) == 15
    plugin = samples(metrics, "scheduler_plugin_execution_duration_seconds_count")
    by_status = {dict(k)["status"]: v for k, v in plugin.items()}
    assert {dict(k)["plugin"] for k in plugin} == {"DynamicResources"}
    assert {dict(k)["extension_point"] for k in plugin} == {"Filter"}
    assert by_status["Success"] >= 10  # at least one node tried per scheduled pod
    assert by_status["Unschedulable"] >= 4  # the 9-GPU claim, on each of the 4 nodes
    # the device figures: 32 GPUs, 10 held, whole-device pods leave nothing fragmented
    figures = {
        name: samples(metrics, name)[(("driver", GPU),)]
        for name in (
            "kubedra_scheduler_devices",
            "kubedra_scheduler_idle_devices",
            "kubedra_scheduler_fragmentation_ratio",
        )
    }
    assert figures == {
        "kubedra_scheduler_devices": 32,
        "kubedra_scheduler_idle_devices": 22,
        "kubedra_scheduler_fragmentation_ratio": 0.0,
    }


def test_fragmentation_under_the_policys_mix(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n0", gpus=8)
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "one", 1)
    for i in range(7):  # first-fit packs n0: one GPU left there
        gpu_pod(store, f"p{i}", template="one", schedulerName="kubedra")
    placer = Scheduler(store, "first-fit", scheduler_names=("kubedra",))
    assert len([o for o in placer.run_once() if o.node == "n0"]) == 7
    fgd = Fragmentation()
    fgd.prime({TaskShape(2): 1})  # the workload asks two GPUs a pod
    watcher = Scheduler(store, fgd, scheduler_names=("kubedra",))
    watcher.refresh()
    (f,) = cluster_figures(watcher).values()
    # n0's last GPU is free but no 2-GPU pod can use it: one device fragmented of 16
    assert (f.devices, f.idle, f.fragmented) == (16, 9, 1.0)
    metrics = SchedulerMetrics("kubedra")
    assert metrics.observe_cluster(watcher, now=100.0)
    assert metrics.value("kubedra_scheduler_fragmentation_ratio", driver=GPU) == 1 / 16
    assert not metrics.observe_cluster(watcher, now=101.0)  # at most every 10 s
    assert not metrics.observe_cluster(watcher, now=200.0)  # nothing changed since
    gpu_pod(store, "p7", template="one", schedulerName="kubedra")
    placer.run_once()
    watcher.refresh()
    assert metrics.observe_cluster(watcher, now=300.0)
    assert metrics.value("kubedra_scheduler_idle_devices", driver=GPU) == 8
    assert metrics.value("kubedra_scheduler_fragmented_devices", driver=GPU) == 0.0


def test_figures_of_a_store_without_devices(tmp_path: Path) -> None:
    store: SqliteStore = new_store(tmp_path)
    scheduler = Scheduler(store, "first-fit")
    scheduler.refresh()
    assert cluster_figures(scheduler) == {}
    metrics = SchedulerMetrics("kubedra")
    assert metrics.observe_cluster(scheduler, now=1.0)
    assert metrics.value("kubedra_scheduler_devices", driver=GPU) is None
