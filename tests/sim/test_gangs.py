"""Gang jobs in the simulator (`kubedra.sim.gangs`): the job mix, the racks, and what each
mode measures on small hand-checkable cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.sim.gangs import (
    MODES,
    QUICK,
    RACK_LABEL,
    Job,
    compare,
    gang_cluster,
    gang_jobs,
    job_templates,
    main,
    run_gangs,
    table,
)
from kubedra.sim.trace import OPENB_DIR, Cluster, NodeSpec, TaskSpec, Workload

needs_trace = pytest.mark.skipif(
    not (OPENB_DIR / "openb_pod_list_default.csv").exists(), reason="openb trace not available"
)


def node(name: str, rack: str = "rack-00", gpus: int = 4) -> NodeSpec:
    return NodeSpec(name, 16000, 65536, gpus, "G2", labels=((RACK_LABEL, rack),))


def job(name: str, members: int, gpus: int, arrival: float, duration: float) -> Job:
    pods = tuple(
        TaskSpec(f"{name}-{i}", 1000, 1024, gpus, 1000, creation=arrival)
        for i in range(members)
    )
    return Job(name, pods, arrival, duration)


# Two 4-GPU nodes. x (one 4-GPU pod) holds a node until t=1000; y (two 4-GPU pods) comes at
# t=10 and needs both nodes; z (one 4-GPU pod, 50 s) at t=20.
#   pod by pod: y-0 takes the free node at 10 and holds it idle until x ends; y runs
#     1000-1100, z waits for it (1100-1150): waits x 0, y 990, z 1080; 4 GPUs idle 990 s.
#   gang: y holds nothing; z runs at once (20-70); y runs at 1000: waits 0, 990, 0.
CONTENTION = (job("x", 1, 4, 0.0, 1000.0), job("y", 2, 4, 10.0, 100.0),
              job("z", 1, 4, 20.0, 50.0))
TWO_NODES = Cluster((node("n1"), node("n2")))


def test_pod_by_pod_holds_gpus_idle_for_a_partial_job() -> None:
    r = run_gangs(TWO_NODES, CONTENTION, "pod-by-pod")
    assert sorted(r.waits) == [0.0, 990.0, 1080.0]
    s = r.summary
    assert (s["started"], s["finished"], s["partial_at_end"]) == (3, 3, 0)
    assert s["idle_held_gpu_h"] == pytest.approx(4 * 990 / 3600)
    # the arrival window is [0, 20]: 4 of 8 GPUs allocated, then all 8 (y-0 joined x)
    assert s["mean_unalloc_pct"] == pytest.approx(25.0)
    assert s["mean_idle_held_pct"] == pytest.approx(25.0)  # y-0's 4 of 8 for 10 of 20 s
    assert (s["wait_p50_s"], s["wait_p99_s"]) == (990.0, 1080.0)
    assert s["end_s"] == 1150.0  # z ran 1100-1150


@pytest.mark.parametrize("mode", ["gang", "gang-anywhere"])
def test_a_gang_never_holds_gpus_for_a_partial_job(mode: str) -> None:
    r = run_gangs(TWO_NODES, CONTENTION, mode)
    assert sorted(r.waits) == [0.0, 0.0, 990.0]
    s = r.summary
    assert s["idle_held_gpu_h"] == 0.0 and s["mean_idle_held_pct"] == 0.0
    assert all(row["idle_held_gpus"] == 0.0 for row in r.rows)
    assert s["mean_unalloc_pct"] == pytest.approx(50.0)  # y waited, holding nothing
    assert (s["started"], s["finished"]) == (3, 3)
    assert s["end_s"] == 1100.0


def test_the_device_plugin_model_runs_pod_by_pod() -> None:
    r = run_gangs(TWO_NODES, CONTENTION, "device-plugin")
    assert sorted(r.waits) == [0.0, 990.0, 1080.0]
    assert r.summary["idle_held_gpu_h"] == pytest.approx(1.1)


def test_a_gang_stays_in_one_rack_and_pod_by_pod_does_not() -> None:
    # Two racks of one 4-GPU node each plus a 4-GPU node: an 8-GPU job of two pods fits
    # only across racks, which the gang's topology key refuses.
    cluster = Cluster((node("n1", "rack-00"), node("n2", "rack-01")))
    jobs = (job("w", 2, 4, 0.0, 60.0),)
    across = run_gangs(cluster, jobs, "pod-by-pod")
    assert across.summary["cross_rack"] == 1 and across.summary["finished"] == 1
    anywhere = run_gangs(cluster, jobs, "gang-anywhere")
    assert anywhere.summary["cross_rack"] == 1 and anywhere.summary["finished"] == 1
    one_rack = run_gangs(cluster, jobs, "gang")
    s = one_rack.summary
    assert (s["started"], s["idle_held_gpu_h"], s["cross_rack"]) == (0, 0.0, 0)


def test_a_deadlock_of_partial_jobs_ends_the_run() -> None:
    # Two 8-GPU nodes; x (one 4-GPU pod) 0-100; a (two 8-GPU pods) at 10; b (three 4-GPU
    # pods) at 20; each runs 100 s.
    #   pod by pod: a-0 takes n2 at 10, b-0 the rest of n1 at 20; when x ends, a-1 does not
    #     fit and b-1 takes n1: a and b each hold a part for good (ended at t=100, the last
    #     event; 8 GPUs idle for 90 s, 4 for 80 s).
    #   gang: a (16 GPUs) waits holding nothing, b runs 20-120, a 120-220.
    cluster = Cluster((node("n1", gpus=8), node("n2", gpus=8)))
    jobs = (job("x", 1, 4, 0.0, 100.0), job("a", 2, 8, 10.0, 100.0),
            job("b", 3, 4, 20.0, 100.0))
    pods = run_gangs(cluster, jobs, "pod-by-pod").summary
    assert (pods["started"], pods["finished"], pods["partial_at_end"]) == (1, 1, 2)
    assert pods["end_s"] == 100.0
    assert pods["idle_held_gpu_h"] == pytest.approx((8 * 90 + 4 * 80) / 3600)
    gang = run_gangs(cluster, jobs, "gang")
    assert (gang.summary["finished"], gang.summary["partial_at_end"]) == (3, 0)
    assert sorted(gang.waits) == [0.0, 0.0, 110.0]
    assert gang.summary["idle_held_gpu_h"] == 0.0


def test_gang_jobs_mix() -> None:
    templates = [
        TaskSpec("t2", 1000, 1024, 2, 1000, creation=0.0, deletion=600.0),
        TaskSpec("t8", 1000, 1024, 8, 1000, creation=100.0, deletion=10100.0),
    ]
    jobs = gang_jobs(templates, 64, jobs=200, load=0.8, seed=7, max_duration=3600.0)
    assert jobs == gang_jobs(templates, 64, jobs=200, load=0.8, seed=7, max_duration=3600.0)
    assert len(jobs) == 200
    arrivals = [j.arrival for j in jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0
    for j in jobs:
        assert 2 <= j.gpus <= 64
        assert len({(t.num_gpu, t.cpu_milli) for t in j.members}) == 1
        assert all(t.creation == j.arrival and t.deletion is None for t in j.members)
        assert j.duration in (600.0, 3600.0)  # the 10,000 s template capped at an hour
    assert {len(j.members) for j in jobs} == {1, 2, 4, 8}
    # the rate offers load x capacity: mean GPU work / mean gap ~ 0.8 x 64 GPUs
    work = sum(j.gpus * j.duration for j in jobs) / len(jobs)
    gap = arrivals[-1] / len(jobs)
    assert 0.6 * 64 < work / gap < 1.0 * 64


def test_job_templates_and_racks() -> None:
    big = TaskSpec("big", 120000, 1024, 8, 1000, creation=0.0, deletion=10.0)
    ok = TaskSpec("ok", 1000, 1024, 4, 1000, creation=0.0, deletion=10.0)
    shared = TaskSpec("shared", 1000, 1024, 1, 500, creation=0.0, deletion=10.0)
    forever = TaskSpec("forever", 1000, 1024, 2, 1000, creation=0.0)
    w = Workload((big, ok, shared, forever))
    assert job_templates(w) == [big, ok]
    assert job_templates(w, NodeSpec("n", 96000, 393216, 8, "G2")) == [ok]
    nodes = tuple(NodeSpec(f"n{i:02d}", 96000, 393216, 8, "G2") for i in range(10))
    cluster = gang_cluster(Cluster((*nodes, NodeSpec("t4", 1, 1, 2, "T4"))), 5, rack_size=2)
    names = [n.name for n in cluster.nodes]
    assert names == sorted(names) and len(names) == 5
    assert [dict(n.labels)[RACK_LABEL] for n in cluster.nodes] == [
        "rack-00", "rack-00", "rack-01", "rack-01", "rack-02"]
    with pytest.raises(ValueError):
        gang_cluster(cluster, 6)


@needs_trace
def test_quick_comparison_on_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    results = compare(QUICK, (42,), MODES)
    by = {r.mode: r.summary for r in results}
    assert set(by) == set(MODES)
    for s in by.values():
        assert s["jobs"] == QUICK.jobs and s["started"] == s["finished"] == QUICK.jobs
    assert by["gang"]["idle_held_gpu_h"] == 0.0 and by["gang"]["cross_rack"] == 0
    assert by["gang-anywhere"]["idle_held_gpu_h"] == 0.0
    assert "| gang |" in table(results)
    out = tmp_path / "g.png"
    assert main(["--quick", "--modes", "gang", "pod-by-pod", "--plot", str(out),
                 "--json", str(tmp_path / "g.json")]) == 0
    assert "idle_held_gpu_h" in (tmp_path / "g.json").read_text()
    assert out.stat().st_size > 0
    assert "gang" in capsys.readouterr().out


def test_binned_means() -> None:
    from kubedra.sim.gangs import binned

    rows = [{"time_s": 0.0, "v": 0.0}, {"time_s": 1800.0, "v": 100.0},
            {"time_s": 5400.0, "v": 0.0}]
    assert binned(rows, "v", 3600.0) == ([0.0, 1.0], [50.0, 100.0])  # the last bin ends at 5400
