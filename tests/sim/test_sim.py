"""kubedra.sim: hand-checked traces, the device-plugin baseline, determinism, real CSVs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.api.core import Pod
from kubedra.scheduler.policies import make_policy
from kubedra.scheduler.policies.fragmentation import (
    Fragmentation,
    TaskShape,
    fgd_score,
    node_fragmentation,
    placements,
)
from kubedra.sim import convert
from kubedra.sim.engine import Simulation, parse_policy, run_replay, run_saturate, simulation
from kubedra.sim.metrics import ClusterState, FragMeter, typical_types
from kubedra.sim.trace import (
    OPENB_DIR,
    Cluster,
    NodeSpec,
    TaskSpec,
    Workload,
    fgd_arrivals,
    load_cluster,
    load_workload,
    poisson_stream,
    sample_cluster,
    workload_from_yaml,
)

NODES = Cluster((NodeSpec("node-a", 8000, 32768, 2, "T4", 16384), NodeSpec("node-b", 8000, 32768, 2, "V100M16", 16384)))


def task(name: str, gpus: int, milli: int, spec: tuple[str, ...] = (), cpu: int = 1000, t0: float = 0, t1: float | None = None) -> TaskSpec:
    return TaskSpec(name, cpu, 1024, gpus, milli if gpus else 0, spec, t0, t1)


# p1 whole -> node-a gpu-0; p2 0.5 -> node-a gpu-1; p3 2 whole -> node-b; p4 whole T4 ->
# nothing (node-a has 0.5 left, node-b is V100M16); p5 0.1 -> node-a gpu-1 (0.4 left).
TASKS = (task("p1", 1, 1000), task("p2", 1, 500), task("p3", 2, 1000), task("p4", 1, 1000, ("T4",)), task("p5", 1, 100))


def drive(sim: Simulation, tasks: tuple[TaskSpec, ...]) -> list[str | None]:
    names = sim.submit_all(tasks)
    sim.scheduler.refresh()
    nodes = []
    for name in names:
        pod = sim.scheduler.queue.pop()
        assert pod is not None and pod.name == name
        out = sim.scheduler.schedule(pod)
        if out.node:
            sim.record(out)
        nodes.append(out.node)
    return nodes


def test_hand_checked_trace_first_fit() -> None:
    result = run_saturate(NODES, Workload(TASKS, "tiny"), "first-fit", target=TASKS)
    s = result.summary
    assert (s["placed"], s["failed"]) == (4, 1)
    assert s["alloc_pct"] == pytest.approx(90.0)  # (1000 + 500 + 2000 + 100) / 4000
    # node-a: CPU 5000 free, GPUs [0, 400] free; node-b: nothing free. Five task types, p=0.2
    # each: only the 0.1-GPU type can use gpu-1's 400 (and fragments nothing); for the four
    # others all 400 are fragmented: 0.8 * 400 = 320 milli = 8 % of 4000.
    assert s["frag_pct"] == pytest.approx(8.0)
    by_pct = {r["arrived_pct"]: r for r in result.rows}
    # arrived 25, 37.5, 87.5, 112.5, 115 %: the 100 % row is read after p4 (87.5 % allocated)
    assert by_pct[100.0]["alloc_pct"] == pytest.approx(87.5)
    assert by_pct[25.0]["alloc_pct"] == pytest.approx(25.0)
    assert max(by_pct) == 115.0
    # empty cluster: only the T4-only type fragments node-b (V100M16): 0.2 * 2000 = 10 %
    assert by_pct[0.0]["frag_pct"] == pytest.approx(10.0)


def test_hand_checked_placements_match_allocator_state() -> None:
    with simulation(NODES, "first-fit", target=TASKS) as sim:
        assert drive(sim, TASKS) == ["node-a", "node-a", "node-b", None, "node-a"]
        assert sim.state.nodes["node-a"].gpu_free == [0, 400]
        assert sim.state.nodes["node-b"].gpu_free == [0, 0]
        allocated = sim.scheduler.allocated()
        for node, st in sim.state.nodes.items():
            for i, free in enumerate(st.gpu_free):
                ref = next(r for r in allocated.shared if r.pool == node and r.device == f"gpu-{i}")
                assert 1000 - allocated.consumed(ref)[convert.MILLI_QUALIFIED] // 10**9 == free


def test_device_plugin_rounds_fractions_up_to_whole_gpus() -> None:
    result = run_saturate(NODES, Workload(TASKS, "tiny"), "device-plugin+first-fit", target=TASKS)
    s = result.summary
    # p2 (0.5 GPU) holds node-a gpu-1 whole, so p4 and p5 find no GPU.
    assert (s["placed"], s["failed"]) == (3, 2)
    assert s["alloc_pct"] == pytest.approx(87.5)  # demand placed: 1000 + 500 + 2000
    assert s["reserved_pct"] == pytest.approx(100.0)  # GPUs held: 4 of 4
    one = Cluster((NodeSpec("n", 8000, 32768, 1, "T4"),))
    half = (task("half", 1, 500),)
    dp = run_saturate(one, Workload(half), "device-plugin", target=half).summary
    assert (dp["alloc_pct"], dp["reserved_pct"], dp["idle_gpus"]) == (50.0, 100.0, 0.0)
    dra = run_saturate(one, Workload(half), "binpack", target=half).summary
    assert (dra["alloc_pct"], dra["reserved_pct"]) == (50.0, 50.0)


def test_baseline_uses_node_affinity_not_device_selectors() -> None:
    t = task("x", 1, 300, ("V100M16", "V100M32"))
    assert parse_policy("device-plugin") == ("device-plugin", "spread")
    assert parse_policy("device-plugin+binpack") == ("device-plugin", "binpack")
    assert parse_policy("fragmentation") == ("dra", "fragmentation")
    pod = convert.pod_doc(t, "device-plugin")
    term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0]["values"] == ["V100M16", "V100M32"]
    dp = convert.template_doc(t, "device-plugin")
    assert dp is not None and dp["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {"deviceClassName": "gpu.nvidia.com", "count": 1}
    dra = convert.template_doc(t, "dra")
    assert dra is not None
    exactly = dra["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["capacity"] == {"requests": {"gpu.nvidia.com/milli": "300"}}
    assert "productName in" in exactly["selectors"][0]["cel"]["expression"]
    assert "affinity" not in convert.pod_doc(t, "dra")["spec"]


def test_gpu_model_constraint_is_enforced_in_both_modes() -> None:
    tasks = (task("v", 1, 1000, ("V100M16",)), task("v2", 1, 1000, ("V100M16",)), task("v3", 1, 1000, ("V100M16",)))
    for policy in ("first-fit", "device-plugin+first-fit"):
        with simulation(NODES, policy, target=tasks) as sim:
            assert drive(sim, tasks) == ["node-b", "node-b", None]


def synthetic(n: int = 60) -> Workload:
    shapes = [(1, 1000), (1, 500), (1, 250), (2, 1000), (0, 0), (1, 700), (4, 1000)]
    return Workload(tuple(task(f"t{i:03d}", *shapes[i % len(shapes)]) for i in range(n)), "synthetic")


SMALL = Cluster(tuple(NodeSpec(f"n{i}", 32000, 131072, g, m) for i, (g, m) in enumerate([(8, "G2"), (4, "T4"), (2, "P100"), (8, "G2"), (1, "A10")])))


def test_same_seed_same_result() -> None:
    w = synthetic()
    a = fgd_arrivals(w, SMALL.gpu_milli, seed=7)
    b = fgd_arrivals(w, SMALL.gpu_milli, seed=7)
    assert [t.name for t in a.tasks] == [t.name for t in b.tasks]
    assert [t.name for t in fgd_arrivals(w, SMALL.gpu_milli, seed=8).tasks] != [t.name for t in a.tasks]
    assert sum(t.demand_milli for t in a.tasks) >= 1.3 * SMALL.gpu_milli
    r1 = run_saturate(SMALL, a, "fragmentation", target=w.tasks)
    r2 = run_saturate(SMALL, b, "fragmentation", target=w.tasks)
    assert r1.rows == r2.rows and r1.summary == r2.summary


def test_fragmentation_policy_packs_shared_gpus() -> None:
    one = Cluster((NodeSpec("n", 8000, 32768, 2, "T4"),))
    tasks = (task("a", 1, 500), task("b", 1, 500), task("c", 1, 1000))
    with simulation(one, "fragmentation", target=tasks) as sim:
        assert drive(sim, tasks) == ["n", "n", "n"]  # halves on two GPUs would block c
        assert sorted(sim.state.nodes["n"].gpu_free) == [0, 0]
    # FGD's options for a half GPU: onto the half-used GPU, or onto the free one.
    half = TaskShape(1, 500)
    assert placements([500, 1000], half) == [(0, 1000), (500, 500)]
    assert placements([200, 300], half) == []
    assert placements([1000, 0, 1000], TaskShape(2, 1000)) == [(0, 0, 0)]
    mix = [(half, 0.5), (TaskShape(1, 1000), 0.5)]
    # [0, 1000]: nothing fragmented; [500, 500]: the whole type can use neither half.
    assert node_fragmentation((0, 1000), mix) == 0
    assert node_fragmentation((500, 500), mix) == pytest.approx(0.5 * 1000)


def test_fragmentation_shares_the_gpu_fgd_picks_not_only_the_best_fit() -> None:
    # One T4 node, 3 GPUs; the mix is 300-milli tasks only. After 650 and 400 the GPUs have
    # 350, 600 and 1000 free. For the next 300: the best fit (350) leaves 50 no task can use
    # (score 48); the 600 or the whole GPU leave nothing unusable (score 50), and among those
    # the least free one is taken: the 600, which neither best-fit nor most-free would pick.
    one = Cluster((NodeSpec("n", 64000, 262144, 3, "T4"),))
    tasks = (task("a", 1, 650), task("b", 1, 400), task("c", 1, 300))
    with simulation(one, "fragmentation", target=(task("m", 1, 300),)) as sim:
        drive(sim, tasks[:2])
        assert sorted(sim.state.nodes["n"].gpu_free) == [350, 600, 1000]
        drive(sim, tasks[2:])
        assert sorted(sim.state.nodes["n"].gpu_free) == [300, 350, 1000]
    mix = [(TaskShape(1, 300), 1.0)]
    assert [fgd_score(node_fragmentation(after, mix) - 0) for after in ((50, 600, 1000), (300, 350, 1000))] == [48, 50]


def test_the_simulator_primes_fragmentation_with_fgds_typical_pods() -> None:
    # 19 one-GPU tasks and 1 eight-GPU task: the one-GPU type alone covers 95 % of the
    # pods, so FGD's typical pods (and the policy's mix) leave the rare type out; the
    # fragmentation measure still counts every type.
    tasks = (*(task(f"s{i}", 1, 1000) for i in range(19)), task("big", 8, 1000))
    with simulation(NODES, "fragmentation", target=tasks) as sim:
        assert isinstance(sim.policy, Fragmentation)
        assert [shape.devices for shape, _ in sim.policy.mix()] == [1]
        assert sorted(t.devices for t, _ in sim.types) == [1, 8]


def test_fragmentation_measure_by_hand() -> None:
    cpu_only = TaskShape(0, 0, cpu_milli=2000)
    half = TaskShape(1, 500, cpu_milli=1000)
    v100 = TaskShape(1, 1000, cpu_milli=1000, models=frozenset({"V100M32"}))
    two = TaskShape(2, 1000, cpu_milli=4000)
    mix = [(half, 0.4), (cpu_only, 0.2), (v100, 0.2), (two, 0.2)]
    t4 = frozenset({"T4"})
    # [1000, 300] on a T4 node with 8000m CPU: the half GPU leaves only 300 idle; the CPU-only
    # type, the V100M32 type (model) and the 2-GPU type (one free GPU) leave all 1300.
    assert node_fragmentation((1000, 300), mix, 8000, t4) == pytest.approx(0.4 * 300 + 0.6 * 1300)
    # 500m CPU left: no GPU type runs at all.
    assert node_fragmentation((1000, 300), mix, 500, t4) == pytest.approx(1300)
    # Two free GPUs, 4000m CPU: the 2-GPU type uses them; 3999m: it does not.
    assert node_fragmentation((1000, 1000), mix, 4000, t4) == pytest.approx(0.4 * 2000)
    assert node_fragmentation((1000, 1000), mix, 3999, t4) == pytest.approx(0.6 * 2000)
    assert node_fragmentation((0, 0), mix, 8000, t4) == 0
    # The score: 50 for no change, towards 100 as fragmentation falls, integer steps.
    assert (fgd_score(0), fgd_score(-1000), fgd_score(1000)) == (50, 73, 26)
    assert (fgd_score(-10**9), fgd_score(10**9)) == (100, 0)


def test_lookahead_measure_by_hand() -> None:
    whole, part, cpu_only = TaskShape(1, 1000, 1000), TaskShape(1, 300, 1000), TaskShape(0, 0, 4000)
    p = make_policy("fragmentation-lookahead")
    assert isinstance(p, Fragmentation)
    p.prime({whole: 1, part: 2, cpu_only: 1})
    any_model = frozenset[str]()
    # One GPU with 300 free: the whole-GPU type (1/4) and the CPU-only type (1/4) leave its
    # 300 idle, the 300-milli type uses it: F = 150. The next 300-milli task (1/2) would
    # take F to 0, so the look-ahead takes off half of 150.
    assert p.fragmentation((300,), None, any_model) == pytest.approx(150)
    assert p.measure((300,), None, any_model) == pytest.approx(150 - 0.5 * 150)
    # 2500m CPU (covers 1000, not 4000): the same; the next task's 1000m come off 1000.
    assert p.measure((300,), 2500, any_model) == pytest.approx(75)
    # 900m: no GPU type runs here and none can next: F = 300 and nothing to take back.
    assert p.measure((300,), 900, any_model) == pytest.approx(300)
    # The next task's CPU comes off the node's own free CPU: a 300-milli task of 500m and a
    # whole-GPU task of 1000m on [300, 1000] with 1600m. F = 150 (the whole-GPU type leaves
    # the 300 idle). The next 300-milli task, on the 300, leaves 1100m: the whole-GPU type
    # still runs on the free GPU, F = 0; the whole-GPU task leaves 600m and F = 150.
    small, big = TaskShape(1, 300, 500), TaskShape(1, 1000, 1000)
    p.prime({small: 1, big: 1})
    assert p.fragmentation((300, 1000), 1600, any_model) == pytest.approx(150)
    assert p.measure((300, 1000), 1600, any_model) == pytest.approx(150 - 0.5 * 150)
    # 1499m: after the small task 999m are left, too little for the whole-GPU type: F
    # would be 500 there, so nothing is taken back.
    assert p.measure((300, 1000), 1499, any_model) == pytest.approx(150)
    # FGD's own policy compares F itself.
    fgd = make_policy("fragmentation")
    assert isinstance(fgd, Fragmentation)
    fgd.prime({whole: 1, part: 2, cpu_only: 1})
    assert fgd.measure((300,), None, any_model) == pytest.approx(150)


def test_fragmentation_policy_mix() -> None:
    p = make_policy("fragmentation")
    assert isinstance(p, Fragmentation)
    p.prime({TaskShape(1, 1000): 1, TaskShape(1, 500): 1, TaskShape(2, 1000): 2})
    assert dict(p.mix()) == {TaskShape(1, 1000): 0.25, TaskShape(1, 500): 0.25, TaskShape(2, 1000): 0.5}
    # [1000, 300]: (1,1000) -> 300 frag; (1,500) -> 300; (2,1000) -> all 1300.
    assert p.fragmentation((300, 1000), None, frozenset()) == pytest.approx(0.25 * 300 + 0.25 * 300 + 0.5 * 1300)
    p.prime({})
    p.observe(2)
    p.observe(1)
    assert dict(p.mix()) == {TaskShape(2): 0.5, TaskShape(1): 0.5}  # observed: whole devices
    assert p.fragmentation((1000,), None, frozenset()) == pytest.approx(0.5 * 1000)


def test_node_fragmentation_of_the_cluster() -> None:
    tasks = [task("a", 1, 500), task("b", 1, 500), task("c", 0, 0)]
    assert typical_types(tasks) == [(TaskShape(1, 500, 1000), 2 / 3), (TaskShape(0, 0, 1000), 1 / 3)]
    assert typical_types(tasks, threshold=0.5) == [(TaskShape(1, 500, 1000), 1.0)]
    state = ClusterState(NODES.nodes)
    assert FragMeter(state, typical_types(list(TASKS))).ratio() == pytest.approx(0.1)  # T4 type vs node-b


def test_poisson_stream_offers_the_load_inside_its_window() -> None:
    tasks = (task("short", 1, 500, t0=0, t1=100), task("long", 2, 1000, t0=5, t1=None), task("cpu", 0, 0, t0=9, t1=19))
    horizon, capacity = 20_000.0, 5_000_000
    many = poisson_stream(Workload(tasks, "w"), capacity, 0.8, horizon_s=horizon, seed=7)
    # Per arrival, integrated over the window: short 500 x (100 x 20,000 - 100^2 / 2), long
    # (never ends) 2000 x 20,000^2 / 2, cpu nothing; the rate is 0.8 x capacity x horizon
    # over their mean: 11,970 arrivals expected in the window.
    mean_work = (500 * (100 * horizon - 100**2 / 2) + 2000 * horizon**2 / 2) / 3
    assert round(0.8 * capacity * horizon / mean_work * horizon) == 11970
    assert len(many.tasks) == pytest.approx(11970, rel=0.03)
    offered = sum(t.demand_milli * ((min(t.deletion, horizon) if t.deletion else horizon) - t.creation) for t in many.tasks)
    assert offered / (capacity * horizon) == pytest.approx(0.8, rel=0.03)
    times = [t.creation for t in many.tasks]
    assert times == sorted(times) and times[0] > 0 and times[-1] < horizon
    assert {None if t.deletion is None else round(t.deletion - t.creation, 6) for t in many.tasks} == {100, None, 10}
    assert len({t.name for t in many.tasks}) == len(many.tasks)
    again = poisson_stream(Workload(tasks, "w"), capacity, 0.8, horizon_s=horizon, seed=7)
    assert again == many  # the seed fixes the stream
    with pytest.raises(ValueError, match="load and horizon"):
        poisson_stream(Workload(tasks, "w"), capacity, 0, horizon_s=horizon, seed=7)
    with pytest.raises(ValueError, match="no GPU work"):
        poisson_stream(Workload(tasks[2:], "w"), capacity, 0.8, horizon_s=horizon, seed=7)


def test_sample_cluster_keeps_the_mix() -> None:
    nodes = tuple(NodeSpec(f"t{i}", 8000, 1024, 2, "T4") for i in range(8)) + tuple(NodeSpec(f"v{i}", 8000, 1024, 8, "V100M32") for i in range(4))
    half = sample_cluster(Cluster(nodes), 0.5, seed=1)
    assert sorted(n.model for n in half.nodes) == ["T4"] * 4 + ["V100M32"] * 2
    assert sample_cluster(Cluster(nodes), 0.5, seed=1) == half and sample_cluster(Cluster(nodes), 1.0, seed=1).nodes == nodes
    with pytest.raises(ValueError, match="share"):
        sample_cluster(Cluster(nodes), 0.0, seed=1)


def test_pods_are_stamped_with_simulated_time(tmp_path: Path) -> None:
    # The queue orders pods by creation time: a wall-clock stamp made replays depend on
    # how fast the machine ran (pods created in the same wall second fell back to names).
    sim = Simulation(NODES, "first-fit", workdir=tmp_path)
    try:
        sim.now = 3661.5
        sim.submit(task("late", 1, 1000, t0=3661.5, t1=4000))
        pod = sim.store.get(Pod, "late", convert.NAMESPACE)
        assert pod.metadata.creation_timestamp == "2023-01-01T01:01:01Z"
    finally:
        sim.close()


def test_replay_queues_until_a_departure() -> None:
    one = Cluster((NodeSpec("n", 8000, 32768, 1, "T4"),))
    tasks = (task("a", 1, 1000, t0=0, t1=10), task("b", 1, 1000, t0=5, t1=20), task("c", 0, 0, t0=6, t1=7))
    r = run_replay(one, Workload(tasks, "replay"), "first-fit")
    s = r.summary
    assert (s["placed"], s["never_placed"]) == (3, 0)
    assert (s["delay_p50_s"], s["delay_p99_s"]) == (0.0, 5.0)  # b waited from 5 to 10
    assert s["max_pending"] == 1
    pending = {row["time_s"]: row["pending"] for row in r.rows}
    assert pending[5.0] == 1 and pending[10.0] == 0
    assert r.rows[-1]["alloc_pct"] == 0.0
    # means over the arrival window [0, 6]: the GPU is held throughout, b waits from 5
    assert s["mean_alloc_pct"] == 100.0 and s["mean_pending"] == pytest.approx(1 / 6)


def test_yaml_inputs(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("nodes:\n  - {profile: h100x8, count: 2}\n  - {profile: l4x4, count: 1}\n")
    cluster = load_cluster(tmp_path / "c.yaml")
    assert [n.gpus for n in cluster.nodes] == [8, 8, 4]
    assert cluster.nodes[0].model and cluster.nodes[0].gpu_memory_mib
    doc = {"duration": 600, "tasks": [{"name": "infer", "gpus": 1, "milli": 250, "rate": 0.05, "runtime": 120}, {"name": "train", "gpus": 4, "rate": 0.01, "runtime": 300}]}
    w = workload_from_yaml(doc, seed=3)
    assert w == workload_from_yaml(doc, seed=3)
    assert {t.gpu_milli for t in w.tasks} == {250, 1000} and all(t.deletion for t in w.tasks)
    r = run_replay(cluster, w, "fragmentation")
    assert r.summary["placed"] == len(w.tasks)


needs_trace = pytest.mark.skipif(not (OPENB_DIR / "openb_pod_list_default.csv").exists(), reason="openb trace not available")


@needs_trace
def test_loads_the_real_openb_csvs() -> None:
    cluster = load_cluster(OPENB_DIR / "openb_node_list_gpu_node.csv")
    assert (len(cluster.nodes), cluster.gpus) == (1213, 6212)
    assert sum(n.cpu_milli for n in cluster.nodes) == 107_018_000
    w = load_workload(OPENB_DIR / "openb_pod_list_default.csv")
    assert len(w.tasks) == 8152
    assert sum(t.num_gpu == 0 for t in w.tasks) == 1088
    assert sum(t.sharing for t in w.tasks) == 3078
    assert round(w.demand_milli / 1000) == 6087
    multi = load_workload(OPENB_DIR / "openb_pod_list_multigpu50.csv")
    assert multi.tasks[0].deletion is None and multi.tasks[0].gpu_spec == ()
    spec = load_workload(OPENB_DIR / "openb_pod_list_gpuspec33.csv")
    assert any(len(t.gpu_spec) > 1 for t in spec.tasks)
    arrivals = fgd_arrivals(w, cluster.gpu_milli, seed=42)
    short = Workload(arrivals.tasks[:150], "default")
    r = run_saturate(cluster, short, "fragmentation", target=w.tasks)
    assert r.summary["failed"] == 0 and r.summary["placed"] == 150
    # the paper's curves start near 14 % fragmented at 0 % arrived (CPU-only pods count)
    assert 12.0 < r.rows[0]["frag_pct"] < 16.0


def test_cli_functions_write_outputs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from kubedra.sim.cli import sim_compare, sim_run

    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nnode-a,8000,32768,2,T4\nnode-b,8000,32768,2,V100M16\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
                    "p1,1000,1024,1,1000,,LS,Running,0,100,0\np2,1000,1024,1,500,,LS,Running,10,50,10\n"
                    "p3,1000,1024,2,1000,,LS,Running,20,200,20\np4,1000,1024,1,1000,T4,LS,Running,30,60,30\n")
    lines: list[str] = []
    r = sim_run(nodes, pods, "fragmentation", tmp_path / "run", seed=1, progress=False, echo=lines.append)
    assert "GPU allocation ratio" in lines[0] and r.summary["pods"] >= 4
    assert {p.name for p in (tmp_path / "run").iterdir()} == {"saturate-fragmentation.csv", "allocation.png", "fragmentation.png", "summary.md"}
    results = sim_compare(nodes, pods, ["first-fit", "device-plugin"], tmp_path / "cmp", mode="replay", progress=False, echo=lines.append)
    assert [x.policy for x in results] == ["first-fit", "device-plugin"]
    assert (tmp_path / "cmp" / "replay.png").exists() and "delay p99 s" in lines[-1]


def trace_folder(tmp_path: Path, pod_rows: str, stems: tuple[str, ...] = ("openb_pod_list_default",)) -> Path:
    """A data folder as the report reads it: two T4 nodes, the same pods for every stem."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nnode-a,8000,32768,2,T4\nnode-b,8000,32768,2,T4\n")
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    for stem in stems:
        (data / f"{stem}.csv").write_text(header + pod_rows)
    return data


def test_sim_report_runs_both_fgd_policies_over_the_seeds(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from kubedra.sim.cli import sim_report
    from kubedra.sim.report import paper_summary

    data = trace_folder(tmp_path, "p1,1000,1024,1,600,,LS,Running,0,100,0\np2,1000,1024,1,500,,LS,Running,10,50,10\n"
                              "p3,1000,1024,1,1000,,LS,Running,20,200,20\n",
                        ("openb_pod_list_default", "openb_pod_list_multigpu50", "openb_pod_list_cpu250"))
    out = sim_report(tmp_path / "results.md", tmp_path / "figures", data_dir=data, seed=1,
                     variants=(("openb_pod_list_default", "default", ("fragmentation", "device-plugin")),
                               ("openb_pod_list_multigpu50", "multi-GPU", ("fragmentation",)),
                               ("openb_pod_list_cpu250", "non-GPU", ("fragmentation", "device-plugin"))),
                     seeds=(1, 2), variant_seeds=(1, 3), replay_pods=0, jobs=1, progress=False,
                     echo=lambda _: None)
    md = out.read_text()
    # one seeds table per variant, in the report's order of variants (not by file name)
    default, multigpu, cpu250 = md.split("\n## Seeds\n")[1].split("## Verdict")[0].split("\n### ")[1:]
    assert default.startswith(
        "`openb_pod_list_default`: `fragmentation`, `fragmentation-lookahead`, `fragmentation-pack`, "
        "`fragmentation-priced`")
    assert multigpu.startswith("`openb_pod_list_multigpu50`: `fragmentation`")
    assert cpu250.startswith("`openb_pod_list_cpu250`: `fragmentation`")
    for policy in ("fragmentation", "fragmentation-lookahead", "fragmentation-pack", "fragmentation-priced"):
        assert all(f"| {policy} | {seed} |" in default for seed in (1, 2))
    # the other variants: `fragmentation` alone, over `variant_seeds`
    assert all(f"| fragmentation | {seed} |" in cpu250 for seed in (1, 3))
    assert "fragmentation-pack" not in cpu250
    assert "`fragmentation-pack` in this engine leaves" in md and "(mean of 2 seeds)" in md
    if paper_summary("openb_pod_list_cpu250"):  # the verdict needs the paper's figures
        assert "* non-GPU: our `fragmentation` leaves" in md and "(the mean of 2 seeds)" in md


def test_seeds_table_reports_mean_and_sd() -> None:
    from kubedra.sim.engine import RunResult
    from kubedra.sim.report import seeds_table

    runs = [RunResult(policy, "saturate", "w", seed, [], {"alloc_at_100": a, "alloc_at_130": b}, 1.0)
            for policy, seed, a, b in (("fragmentation", 42, 95.0, 96.0), ("fragmentation", 43, 94.0, 95.0),
                                       ("fragmentation-pack", 42, 93.0, 94.0))]
    table = seeds_table(runs, {"unalloc_gpu_pct_at_arrive100_mean": "4.77", "unalloc_gpu_pct_at_arrive100_std": "0.11",
                               "unalloc_gpu_pct_at_arrive130_mean": "4.61", "unalloc_gpu_pct_at_arrive130_std": "0.08"})
    assert "| fragmentation | 42 | 5.00 | 4.00 |" in table and "| fragmentation | 43 | 6.00 | 5.00 |" in table
    assert "| fragmentation | mean ± sd | 5.50 ± 0.71 | 4.50 ± 0.71 |" in table
    assert "| fragmentation-pack | 42 | 7.00 | 6.00 |" in table
    assert "| fragmentation-pack | mean ± sd | n/a | n/a |" in table  # one seed: no sd
    assert table.rstrip().endswith("| paper FGD | 10 seeds | 4.77 ± 0.11 | 4.61 ± 0.08 |")


def test_standing_table_puts_ours_beside_the_paper_best_first_with_the_gap() -> None:
    from kubedra.sim.engine import RunResult
    from kubedra.sim.report import standing_table

    runs = [RunResult(policy, "saturate", "w", seed, [], {"alloc_at_100": a, "alloc_at_130": b}, 1.0)
            for policy, seed, a, b in (("fragmentation", 42, 95.0, 96.0), ("fragmentation", 43, 94.0, 95.0),
                                       ("device-plugin", 42, 70.0, 75.0))]
    paper = {"06-FGD": {"unalloc_gpu_pct_at_arrive100_mean": "4.77", "unalloc_gpu_pct_at_arrive100_std": "0.11",
                        "unalloc_gpu_pct_at_arrive130_mean": "4.61", "unalloc_gpu_pct_at_arrive130_std": "0.08"}}
    lines = standing_table(runs, paper).splitlines()
    assert lines[2] == "| `fragmentation` | kubedra | 2 | 5.50 ± 0.71 | 4.50 ± 0.71 | +0.00 |"
    assert lines[3] == "| 06-FGD | paper | 10 | 4.77 ± 0.11 | 4.61 ± 0.08 | +0.11 |"
    assert lines[4] == "| `device-plugin` | kubedra | 1 | 30.00 | 25.00 | +20.50 |"


def test_verdict_rule_accounts_for_the_standard_deviations() -> None:
    from kubedra.sim.report import MEETS, MISSES, WITHIN_NOISE, verdict

    assert verdict([4.5, 4.7], 4.61, 0.08, 10) == MEETS  # mean 4.60: at or below
    # 4.70 over 4.61: the difference 0.09 is within 2 * sqrt(0.2828²/2 + 0.08²/10) = 0.41
    assert verdict([4.5, 4.9], 4.61, 0.08, 10) == WITHIN_NOISE
    # the same mean from tight seeds: 2 * sqrt(0.0071²/2 + 0.08²/10) = 0.053 < 0.09
    assert verdict([4.695, 4.705], 4.61, 0.08, 10) == MISSES
    # one seed: the paper's sd stands for ours, 2 * sqrt(0.08² + 0.08²/10) = 0.168
    assert verdict([4.75], 4.61, 0.08, 10) == WITHIN_NOISE
    assert verdict([4.80], 4.61, 0.08, 10) == MISSES


def test_summary_rows_print_counts_as_integers() -> None:
    from kubedra.sim.engine import RunResult
    from kubedra.sim.report import COUNT_COLUMNS, summary_rows

    summary = {"failed": 2559.0, "alloc_at_130": 95.5, "max_pending": 1234.0, "never_placed": 3.0,
               "mean_pending": 12.345, "mean_idle_gpus": 1500.25}
    saturate, replay = (summary_rows([RunResult("p", mode, "w", 1, [], summary, 1.0)])[0]  # type: ignore[arg-type]
                        for mode in ("saturate", "replay"))
    assert saturate["failed pods"] == "2,559" and saturate["alloc@130%"] == "95.50"
    assert replay["max pending"] == "1,234" and replay["never placed"] == "3"
    assert replay["mean pending"] == "12.35" and replay["mean idle GPUs"] == "1,500.2"
    # the class: every column that counts pods is in COUNT_COLUMNS
    assert {"failed", "max_pending", "never_placed"} <= COUNT_COLUMNS


def test_replay_plot_spans_the_arrival_window_not_the_drain() -> None:
    from kubedra.sim.report import replay_axis

    w = Workload((task("a", 1, 1000, t0=0, t1=40 * 86400), task("b", 1, 1000, t0=3 * 3600, t1=4 * 3600)), "w")
    r = run_replay(NODES, w, "first-fit")
    assert r.rows[-1]["time_s"] == 40 * 86400  # the run goes on until the last pod leaves
    assert replay_axis([r]) == ("hours", 3600.0, (0.0, 3.0))
    long = Workload((task("a", 1, 1000, t0=0, t1=10), task("b", 1, 1000, t0=5 * 86400, t1=6 * 86400)), "w")
    assert replay_axis([run_replay(NODES, long, "first-fit")]) == ("days", 86400.0, (0.0, 5.0))


def test_sim_report_max_pods_bounds_the_replay_and_figures_go_beside_out(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from kubedra.sim.cli import sim_report

    data = trace_folder(tmp_path, "".join(f"p{i},1000,1024,1,500,,LS,Running,{i},{i + 50},{i}\n" for i in range(6)))
    out = sim_report(tmp_path / "doc" / "results.md", data_dir=data, seed=1, seeds=(1,), max_pods=2,
                     variants=(("openb_pod_list_default", "default", ("first-fit",)),),
                     replay_policies=("first-fit",), replay_share=1.0, replay_horizon_h=0.01,
                     jobs=1, progress=False, echo=lambda _: None)
    md = out.read_text()
    replay = md.split("## Replay with departures")[1]
    assert "first 2 arrivals (PREFIX)" in replay and "the trace's distribution: 2 pods" in replay
    assert "2 arrivals (first 2 arrivals (PREFIX)" in md
    assert (tmp_path / "doc" / "figures" / "openb_pod_list_default-replay.png").is_file()


def test_runs_show_progress_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("KUBEDRA_PROGRESS_DELAY", "0")
    w = Workload(tuple(task(f"t{i}", 1, 500) for i in range(3)), "w")
    shown, piped = Terminal(), io.StringIO()
    run_saturate(NODES, w, "first-fit", progress=shown)
    run_saturate(NODES, w, "first-fit", progress=piped)
    assert "first-fit, GPU allocated" in shown.getvalue() and shown.getvalue().endswith("\r\x1b[K")
    assert piped.getvalue() == ""


@pytest.mark.parametrize(("policy", "left"), [("fragmentation-lookahead", [120, 530]), ("fragmentation-priced", [350, 300])])
def test_priced_shares_take_the_gap_their_size_completes(policy: str, left: list[int]) -> None:
    # The mix packs best as 650 + 320, 470 + 470 and 230s four to a GPU. With a 650 on one
    # GPU and a 470 on the other, a 230 scores alike on both under FGD's measure (each gap
    # still fits a type) and the look-ahead takes the fuller one; the priced policy leaves
    # the 350 to a 320 and puts the 230 beside the 470 (the 300 left still holds a 230).
    one = Cluster((NodeSpec("n", 64000, 262144, 2, "T4"),))
    mix = [task("a", 1, 650), task("b", 1, 320), task("c", 1, 470), task("d", 1, 470), task("e", 1, 230)]
    with simulation(one, policy, target=mix) as sim:
        for t in (mix[0], mix[2], mix[4]):
            sim.submit(t)
            assert [o.node for o in sim.step()] == ["n"]
        assert sim.state.nodes["n"].gpu_free == left


def half_gpu_trace(tmp_path: Path) -> tuple[Path, Path]:
    """Four T4 GPUs on two nodes and pods asking for half a GPU each: DRA shares a GPU
    between two of them, the device plugin gives each a whole GPU (8 placed against 4)."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nnode-a,8000,32768,2,T4\nnode-b,8000,32768,2,T4\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
                    + "".join(f"p{i},500,1024,1,500,,LS,Running,{i},1000,{i}\n" for i in range(1, 7)))
    return nodes, pods


def test_compare_leads_with_what_dra_gains_over_the_device_plugin(tmp_path: Path) -> None:
    """The first lines answer "what does DRA gain": GPU allocation and pods placed per model
    and the difference; the lead plot is allocation and pods not placed, fragmentation
    (where the device plugin looks close: what it holds is not free) after the table."""
    pytest.importorskip("matplotlib")
    from kubedra.sim.cli import sim_compare

    nodes, pods = half_gpu_trace(tmp_path)
    out = tmp_path / "cmp"
    lines: list[str] = []
    sim_compare(nodes, pods, ["fragmentation", "device-plugin"], out, seed=1, progress=False, echo=lines.append)
    assert lines[:4] == [
        "GPU allocation once all 11 pods have arrived (138 % of the cluster's GPUs asked for), pods placed and not placed:",
        "  fragmentation  100.00 %        8 placed        3 not placed  (100.00 % of the GPUs held)",
        "  device-plugin   50.00 %        4 placed        7 not placed  (100.00 % of the GPUs held)",
        "DRA (fragmentation) over the device plugin (device-plugin): +50.00 points of GPU allocation, +4 pods placed",
    ]
    assert lines[4] == f"plots: {out / 'allocation.png'}, {out / 'fragmentation.png'}"
    assert lines[5].startswith("policy ")  # then the whole table
    md = (out / "summary.md").read_text()
    assert md.startswith("```text\nGPU allocation once all 11 pods") and "+50.00 points" in md.split("```")[1]
    assert md.index("![allocation](allocation.png)") < md.index("| policy |") < md.index("![fragmentation]")
    assert "neither free nor fragmented" in md
    replay: list[str] = []
    sim_compare(nodes, pods, ["first-fit", "device-plugin"], tmp_path / "rep", mode="replay", seed=1, progress=False,
                echo=replay.append)
    assert replay[0].startswith("Mean GPU allocation over the arrival window")
    assert replay[3].startswith("DRA (first-fit) over the device plugin (device-plugin): +") and "pods waiting on average" in replay[3]


def test_lead_lines_without_the_baseline_compare_nothing() -> None:
    from kubedra.sim.engine import RunResult
    from kubedra.sim.report import lead_lines

    summary = {"pods": 10.0, "arrived_pct": 130.0, "alloc_pct": 90.0, "reserved_pct": 90.0, "placed": 9.0, "failed": 1.0}
    lines = lead_lines([RunResult(p, "saturate", "w", 1, [], summary, 1.0) for p in ("first-fit", "binpack")])
    assert lines == [
        "GPU allocation once all 10 pods have arrived (130 % of the cluster's GPUs asked for), pods placed and not placed:",
        "  first-fit   90.00 %        9 placed        1 not placed",
        "  binpack     90.00 %        9 placed        1 not placed",
    ]
    assert lead_lines([]) == []


@pytest.mark.parametrize("jobs", [1, 2], ids=["in-process", "worker-processes"])
def test_compare_shows_one_progress_line_over_its_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    """`sim compare` used to be silent for its whole run (6 minutes on the full trace): on a
    terminal it has `sim report`'s line now, counting every run's arrivals, workers' too;
    piped, nothing."""
    pytest.importorskip("matplotlib")
    import io
    import sys

    from kubedra.sim.cli import sim_compare

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("KUBEDRA_PROGRESS_DELAY", "0")
    nodes, pods = half_gpu_trace(tmp_path)
    for stream, columns in ((Terminal(), 160), (Terminal(), 80), (io.StringIO(), 160)):
        monkeypatch.setattr(sys, "stderr", stream)
        monkeypatch.setenv("COLUMNS", str(columns))
        lines: list[str] = []
        sim_compare(nodes, pods, ["fragmentation", "device-plugin"], tmp_path / "cmp", seed=1, jobs=jobs, echo=lines.append)
        got = stream.getvalue()
        if not isinstance(stream, Terminal):
            assert got == ""
        elif columns == 160:  # what the latest run says, when it fits
            assert "sim compare: 0/2 runs done · " in got and ", GPU allocated " in got and "/22" in got
        else:  # else the counts (2 runs of 11 arrivals) and the ETA first
            assert "sim compare: 0/2 runs done  [" in got and "/22" in got and "GPU allocated" not in got
        assert not isinstance(stream, Terminal) or got.endswith("\r\x1b[K")  # erased before the results
        assert lines[0].startswith("GPU allocation once all 11 pods")
