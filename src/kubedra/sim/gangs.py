"""Gang jobs in the simulator: kubedra's gang placement against pod-by-pod placement and
the device-plugin model, on the same arrivals.

The workload (`gang_jobs`), a documented synthetic mix over the Alibaba openb trace:

* The trace's multi-GPU pods (75 in `openb_pod_list_default.csv`: 2, 4 or 8 whole GPUs)
  are the job templates. A job draws one template (seeded) and a member count from
  `PODS_PER_JOB`, keeping jobs of at most `max_gpus` GPUs (64: one rack). Its members are
  copies of the template (its GPUs, CPU, memory); its run time is the template's
  (deletion - creation in the trace). Sizes come out between 2 and 64 GPUs.
* The trace's own arrival times cannot be replayed (75 pods over 149 days never contend,
  see `trace.poisson_stream`), so jobs arrive as a Poisson process (seeded) at the rate
  that offers `load` x the cluster's GPUs in GPU-seconds: rate = load x GPUs / mean(GPUs x
  run time) of the drawn jobs. All members of a job arrive at once, at its arrival time.
* A job runs only once all its members run; its run time starts then, and its members
  depart together at the end of it. Members that run while the job is incomplete hold
  their GPUs idle.

The cluster (`gang_cluster`): `nodes` of the trace's 8-GPU G2 nodes, drawn by the seed,
then in name order grouped into racks of `rack_size` consecutive nodes, each node labelled
`RACK_LABEL: rack-NN` (8 nodes of 8 GPUs: 64 GPUs a rack). openb publishes no topology;
the racks only give the gangs a topology key to honour.

Three modes (`MODES`), each a fresh store and the real scheduler:

* `gang`: kubedra's GangScheduling. Each job is a PodGroup (scheduling.k8s.io/v1beta1)
  with `gang.minCount` = its member count and `schedulingConstraints.topology[0].key` =
  the rack label; members name it in `spec.schedulingGroup`. DRA claims, `policy`.
* `gang-anywhere`: the same PodGroups without the topology constraint (all or nothing
  only), to tell the two apart.
* `pod-by-pod`: the same pods with no PodGroup (DRA claims, `policy`): each is placed
  when it fits, anywhere; a partial job holds its GPUs until it completes. The rack
  constraint has no pod-level equivalent here; `cross_rack` counts the jobs that spanned
  racks.
* `device-plugin`: the simulator's device-plugin model (whole exclusive GPUs, the
  baseline's `spread` scoring), pod by pod as above.

Measures per mode: job wait (arrival to all members running) p50/p99 over the jobs that
started; GPU-hours held idle by incomplete jobs (GPUs of running members, while their job
is incomplete, integrated over the run); the mean unallocated GPU % over the arrival
window; the time-weighted mean of the GPUs held idle; jobs started and finished.

Entry point: `python -m kubedra.sim.gangs [--quick] [--seeds 42 43 44] [--plot PATH]`.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubedra.sim import convert
from kubedra.sim.engine import BASELINE, Simulation, _time_weighted, simulation
from kubedra.sim.metrics import percentile
from kubedra.sim.trace import (
    MILLI,
    OPENB_DIR,
    Cluster,
    NodeSpec,
    TaskSpec,
    Workload,
    load_cluster,
    load_workload,
)

RACK_LABEL = "topology.kubedra.io/rack"
PODS_PER_JOB = (1, 2, 4, 8)  # members a job draws from (uniformly), within `max_gpus`
MODES = ("gang", "gang-anywhere", "pod-by-pod", "device-plugin")
DEFAULT_POLICY = "binpack"  # of the DRA modes; the device-plugin model uses its own
NODE_LIST = "openb_node_list_gpu_node.csv"
POD_LIST = "openb_pod_list_default.csv"
DEFAULT_SEEDS = (42, 43, 44)
# Run times are capped: the 3 longest templates run 10-15 days and would hold the mean
# work (hence the arrival rate) of a few hundred jobs on their own.
MAX_DURATION_S = 4 * 3600.0
PLOT = Path(__file__).resolve().parents[3] / "docs" / "images" / "sim-gangs.png"


@dataclass(frozen=True, slots=True)
class Job:
    """A multi-pod job: `members` pods (same shape), arriving together, running `duration`
    seconds once all of them run."""

    name: str
    members: tuple[TaskSpec, ...]
    arrival: float
    duration: float

    @property
    def gpus(self) -> int:
        return sum(t.num_gpu for t in self.members)


# --- inputs ------------------------------------------------------------------------------


def gang_cluster(
    cluster: Cluster,
    nodes: int,
    *,
    rack_size: int = 8,
    seed: int = 0,
    model: str = "G2",
    gpus: int = 8,
) -> Cluster:
    """`nodes` nodes of the (model, gpus) kind drawn by `seed`, in name order, labelled
    with racks of `rack_size` consecutive nodes."""
    pool = [n for n in cluster.nodes if n.model == model and n.gpus == gpus]
    if nodes > len(pool):
        raise ValueError(f"only {len(pool)} {model} nodes with {gpus} GPUs, not {nodes}")
    chosen = sorted(random.Random(seed).sample(pool, nodes), key=lambda n: n.name)
    return Cluster(tuple(rack(n, i // rack_size) for i, n in enumerate(chosen)))


def rack(node: NodeSpec, index: int) -> NodeSpec:
    labels = dict(node.labels)
    labels[RACK_LABEL] = f"rack-{index:02d}"
    return replace(node, labels=tuple(sorted(labels.items())))


def job_templates(workload: Workload, node: NodeSpec | None = None) -> list[TaskSpec]:
    """The trace's multi-GPU whole-GPU pods with a known run time (that fit on `node`)."""
    return [
        t
        for t in workload.tasks
        if t.num_gpu > 1 and t.gpu_milli == MILLI and t.deletion is not None
        and t.deletion > t.creation
        and (node is None or (
            t.num_gpu <= node.gpus and t.cpu_milli <= node.cpu_milli
            and t.memory_mib <= node.memory_mib))
    ]


def gang_jobs(
    templates: Sequence[TaskSpec],
    capacity_gpus: int,
    *,
    jobs: int,
    load: float,
    seed: int,
    max_gpus: int = 64,
    max_duration: float | None = MAX_DURATION_S,
) -> list[Job]:
    """`jobs` jobs drawn from `templates` (see the module notes), Poisson arrivals offering
    `load` x `capacity_gpus` in GPU-seconds. `max_duration`: run times capped (seconds)."""
    if not templates or jobs <= 0 or load <= 0 or capacity_gpus <= 0:
        raise ValueError("gang jobs need templates, a job count, a load and a capacity")
    rng = random.Random(seed)
    drawn: list[tuple[TaskSpec, int, float]] = []
    for _ in range(jobs):
        t = rng.choice(templates)
        counts = [n for n in PODS_PER_JOB if n * t.num_gpu <= max_gpus] or [1]
        n = rng.choice(counts)
        run = (t.deletion or t.creation) - t.creation
        if max_duration is not None:
            run = min(run, max_duration)
        drawn.append((t, n, run))
    mean_work = statistics.fmean(t.num_gpu * n * run for t, n, run in drawn)
    rate = load * capacity_gpus / mean_work  # jobs per second
    out = []
    now = 0.0
    for k, (t, n, run) in enumerate(drawn):
        now += rng.expovariate(rate)
        name = f"j{k:04d}"
        members = tuple(
            replace(t, name=f"{name}-{i}", creation=now, deletion=None) for i in range(n)
        )
        out.append(Job(name, members, now, run))
    return out


# --- a run -------------------------------------------------------------------------------


@dataclass
class GangResult:
    mode: str
    seed: int
    summary: dict[str, float]
    rows: list[dict[str, float]] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    never_started: list[str] = field(default_factory=list)  # jobs, as `name (GPUs)`


def _submit(sim: Simulation, job: Job, gang: bool, key: str) -> None:
    with sim.store.transaction():
        if gang:
            spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": len(job.members)}}}
            if key:
                spec["schedulingConstraints"] = {"topology": [{"key": key}]}
            sim.store.create(convert.obj({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": job.name, "namespace": convert.NAMESPACE}, "spec": spec,
            }))
        for task in job.members:
            claim = convert.claim_doc(task, sim.mode, f"{task.name}-gpus")
            if claim is not None:
                sim.store.create(convert.obj(claim))
            pod = convert.pod_doc(
                task, sim.mode, claim=claim["metadata"]["name"] if claim else None
            )
            if gang:
                pod["spec"]["schedulingGroup"] = {"podGroupName": job.name}
            sim.store.create(convert.obj(pod))
            sim.tasks[task.name] = task


def _step(sim: Simulation) -> list[str]:
    """One pass over the due pods, gangs settled as the scheduler's `run_once` does;
    returns the pods bound."""
    sched = sim.scheduler
    sched.refresh()
    outcomes = []
    while (pod := sched.queue.pop()) is not None:
        outcomes.append(sched.schedule(pod))
        if sched.waiting:
            outcomes += sched.settle_waiting()
    outcomes += sched.settle_waiting()
    bound = []
    for o in outcomes:
        if o.node is not None and o.result == "scheduled":
            sim.record(o)
            bound.append(o.pod.split("/", 1)[1])
    return bound


def run_gangs(
    cluster: Cluster,
    jobs: Sequence[Job],
    mode: str,
    *,
    seed: int = 0,
    policy: str = DEFAULT_POLICY,
    topology_key: str = RACK_LABEL,
) -> GangResult:
    """Replay `jobs` on `cluster` in `mode` (one of `MODES`)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    start = time.perf_counter()
    gang = mode.startswith("gang")
    if mode == "gang-anywhere":
        topology_key = ""
    sim_policy = BASELINE if mode == "device-plugin" else policy
    racks = {n.name: dict(n.labels).get(RACK_LABEL, n.name) for n in cluster.nodes}
    by_name = {j.name: j for j in jobs}
    job_of = {t.name: j.name for j in jobs for t in j.members}
    arrivals = sorted(jobs, key=lambda j: (j.arrival, j.name))
    running: dict[str, dict[str, int]] = {j.name: {} for j in jobs}  # member -> GPUs
    started: dict[str, float] = {}
    nodes_of: dict[str, set[str]] = {j.name: set() for j in jobs}
    ends: list[tuple[float, str]] = []
    partial: set[str] = set()  # jobs with members running, not all of them
    finished: set[str] = set()
    rows: list[dict[str, float]] = []
    idle_gpu_s = 0.0
    capacity = cluster.gpus
    last_t, held = 0.0, 0
    with simulation(cluster, sim_policy, seed=seed) as sim:
        i = 0
        sched = sim.scheduler
        while True:
            t_next = arrivals[i].arrival if i < len(arrivals) else math.inf
            t_end = ends[0][0] if ends else math.inf
            # Members held at Permit wait for their backed-off siblings, which a running
            # scheduler retries within seconds: step at their due time (the engine would
            # otherwise jump past the gang timeout to the next event, and the gang never
            # comes together).
            due = sched.queue.next_due() if sched.waiting else None
            t_retry = due if due is not None else math.inf
            now = min(t_next, t_end, t_retry)
            if now == math.inf:
                break  # all done, or nothing will free room for the rest
            idle_gpu_s += held * (now - last_t)
            sim.now, last_t = now, now
            if t_end == now:
                done: list[str] = []
                while ends and ends[0][0] <= now:
                    done.append(heapq.heappop(ends)[1])
                for name in done:  # its members depart together
                    running[name] = {}
                    finished.add(name)
                sim.end([t.name for name in done for t in by_name[name].members])
            elif t_next == now:
                while i < len(arrivals) and arrivals[i].arrival == now:
                    _submit(sim, arrivals[i], gang, topology_key)
                    i += 1
            for pod in _step(sim):
                name = job_of[pod]
                placed = sim.placements[pod]
                running[name][pod] = len(placed.gpus)
                nodes_of[name].add(racks[placed.node])
                job = by_name[name]
                if len(running[name]) == len(job.members):
                    started[name] = now
                    partial.discard(name)
                    heapq.heappush(ends, (now + job.duration, name))
                else:
                    partial.add(name)
            held = sum(sum(running[name].values()) for name in partial)
            rows.append({
                "time_s": now,
                "alloc_pct": 100.0 * sim.state.allocation_ratio,
                "unalloc_pct": 100.0 - 100.0 * sim.state.allocation_ratio,
                "idle_held_gpus": float(held),
                "idle_held_pct": 100.0 * held / capacity if capacity else 0.0,
                "pending_pods": float(sim.pending()),
            })
    waits = [started[j.name] - j.arrival for j in jobs if j.name in started]
    window = (arrivals[0].arrival, arrivals[-1].arrival) if arrivals else (0.0, 0.0)
    summary = {
        "jobs": float(len(jobs)),
        "gpus_asked": float(sum(j.gpus for j in jobs)),
        "started": float(len(started)),
        "finished": float(len(finished)),
        "partial_at_end": float(len(partial)),
        "wait_p50_s": percentile(waits, 50),
        "wait_p99_s": percentile(waits, 99),
        "idle_held_gpu_h": idle_gpu_s / 3600.0,
        "mean_idle_held_pct": _time_weighted(rows, "idle_held_pct", *window),
        "mean_unalloc_pct": _time_weighted(rows, "unalloc_pct", *window),
        "cross_rack": float(sum(1 for j in jobs if len(nodes_of[j.name]) > 1)),
        "end_s": last_t,
    }
    never = [f"{j.name} ({j.gpus})" for j in jobs if j.name not in started]
    return GangResult(mode, seed, summary, rows, waits, time.perf_counter() - start, never)


# --- the comparison ----------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    nodes: int = 64
    rack_size: int = 8
    jobs: int = 300
    load: float = 0.9
    policy: str = DEFAULT_POLICY
    max_duration: float = MAX_DURATION_S


QUICK = Setup(nodes=16, jobs=40)


def inputs(setup: Setup, seed: int, data_dir: Path = OPENB_DIR) -> tuple[Cluster, list[Job]]:
    """The seed's cluster sample and job mix, from the openb CSVs in `data_dir`."""
    cluster = gang_cluster(
        load_cluster(data_dir / NODE_LIST), setup.nodes, rack_size=setup.rack_size, seed=seed
    )
    templates = job_templates(load_workload(data_dir / POD_LIST), cluster.nodes[0])
    jobs = gang_jobs(
        templates, cluster.gpus, jobs=setup.jobs, load=setup.load, seed=seed,
        max_gpus=setup.rack_size * cluster.nodes[0].gpus, max_duration=setup.max_duration,
    )
    return cluster, jobs


def _one(args: tuple[Setup, int, str, Path]) -> GangResult:
    setup, seed, mode, data_dir = args
    cluster, jobs = inputs(setup, seed, data_dir)
    return run_gangs(cluster, jobs, mode, seed=seed, policy=setup.policy)


def compare(
    setup: Setup,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    modes: Sequence[str] = MODES,
    *,
    data_dir: Path = OPENB_DIR,
    workers: int = 1,
    echo: Any = None,
) -> list[GangResult]:
    """Every mode on every seed's arrivals (`workers` processes)."""
    tasks = [(setup, seed, mode, data_dir) for seed in seeds for mode in modes]
    if workers <= 1:
        results = []
        for t in tasks:
            results.append(_one(t))
            if echo is not None:
                r = results[-1]
                echo(f"  {r.mode} seed {r.seed}: {r.wall_s:.1f} s")
        return results
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(_one, tasks))


COLUMNS = (
    ("started", "jobs started", "{:.0f}"),
    ("finished", "finished", "{:.0f}"),
    ("wait_p50_s", "wait p50 (min)", "{:.1f}"),
    ("wait_p99_s", "wait p99 (min)", "{:.0f}"),
    ("idle_held_gpu_h", "GPU-h held idle", "{:.0f}"),
    ("mean_idle_held_pct", "held idle %", "{:.2f}"),
    ("mean_unalloc_pct", "unallocated %", "{:.1f}"),
    ("cross_rack", "jobs across racks", "{:.0f}"),
)
_MINUTES = {"wait_p50_s", "wait_p99_s"}


def _cell(values: Sequence[float], fmt: str) -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.fmean(values))} ± {fmt.format(statistics.stdev(values))}"


def table(results: Sequence[GangResult], *, markdown: bool = True) -> str:
    """One row per mode, mean ± sd over the seeds."""
    modes = list(dict.fromkeys(r.mode for r in results))
    header = ["mode", *(label for _, label, _ in COLUMNS)]
    lines = []
    for mode in modes:
        mine = [r for r in results if r.mode == mode]
        cells = [mode]
        for key, _, fmt in COLUMNS:
            vals = [r.summary[key] / (60.0 if key in _MINUTES else 1.0) for r in mine]
            cells.append(_cell(vals, fmt))
        lines.append(cells)
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(c) + " |" for c in lines]
        return "\n".join(out)
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
        for row in [header, *lines]
    )


BIN_S = 3600.0  # the plot's time series: means over bins of an hour


def binned(rows: Sequence[dict[str, float]], key: str, width: float) -> tuple[
    list[float], list[float]
]:
    """The step function `key` as its means over consecutive bins of `width` seconds (the
    bins' starts in hours, the means) up to the last row."""
    if not rows:
        return [], []
    end = rows[-1]["time_s"]
    xs, ys = [], []
    t = 0.0
    while t < end:
        xs.append(t / 3600.0)
        ys.append(_time_weighted(rows, key, t, min(t + width, end)))
        t += width
    return xs, ys


def plot(results: Sequence[GangResult], path: Path, *, title: str = "") -> Path:
    """Job wait CDF (all seeds), unallocated GPU % and GPUs held idle over time (first seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(dict.fromkeys(r.mode for r in results))
    first = results[0].seed
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for mode in modes:
        waits = sorted(w / 3600.0 for r in results if r.mode == mode for w in r.waits)
        if waits:
            ys = [100.0 * (k + 1) / len(waits) for k in range(len(waits))]
            axes[0].step(waits, ys, where="post", label=mode, linewidth=1.4)
        (run,) = [r for r in results if r.mode == mode and r.seed == first]
        for ax, key in ((axes[1], "unalloc_pct"), (axes[2], "idle_held_pct")):
            xs, ys = binned(run.rows, key, BIN_S)
            ax.step(xs, ys, where="post", label=mode, linewidth=1.1)
    axes[0].set_xscale("symlog", linthresh=0.1)
    axes[0].set_xlabel("job wait: arrival to all members running (h, symlog)")
    axes[0].set_ylabel("jobs started (%)")
    axes[0].set_title("job wait, all seeds")
    axes[1].set_ylabel("unallocated GPUs (% of cluster)")
    axes[1].set_title(f"unallocated GPUs, seed {first} (hourly means)")
    axes[2].set_ylabel("GPUs held idle by incomplete jobs (%)")
    axes[2].set_title(f"GPUs held idle, seed {first} (hourly means)")
    for a in axes[1:]:
        a.set_xlabel("simulated time (h)")
    for a in axes:
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubedra.sim.gangs",
        description="Gang jobs over the openb trace: gang vs pod-by-pod vs device-plugin.",
    )
    parser.add_argument("--quick", action="store_true", help="16 nodes, 40 jobs, one seed")
    parser.add_argument("--seeds", type=int, nargs="+")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--load", type=float)
    parser.add_argument("--policy", default=DEFAULT_POLICY)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--data", type=Path, default=OPENB_DIR)
    parser.add_argument("--json", type=Path, help="write each run's summary here")
    parser.add_argument("--plot", type=Path, help=f"PNG to write (default: {PLOT} unless "
                        "--quick)")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else Setup()
    setup = replace(
        base,
        nodes=args.nodes or base.nodes,
        jobs=args.jobs or base.jobs,
        load=args.load or base.load,
        policy=args.policy,
    )
    seeds = args.seeds or (DEFAULT_SEEDS[:1] if args.quick else DEFAULT_SEEDS)
    start = time.perf_counter()
    results = compare(setup, seeds, args.modes, data_dir=args.data, workers=args.workers,
                      echo=lambda s: print(s, file=sys.stderr))
    print(f"{setup.nodes} nodes ({setup.nodes // setup.rack_size} racks), {setup.jobs} jobs, "
          f"load {setup.load:g}, policy {setup.policy}, seeds {' '.join(map(str, seeds))}: "
          f"{time.perf_counter() - start:.0f} s")
    print(table(results, markdown=False))
    if args.json is not None:
        runs = [{"mode": r.mode, "seed": r.seed, "wall_s": r.wall_s, **r.summary,
                 "never_started": r.never_started} for r in results]
        args.json.write_text(json.dumps(runs, indent=1) + "\n")
    out = args.plot or (None if args.quick else PLOT)
    if out is not None:
        title = (f"{setup.nodes} G2 nodes in racks of {setup.rack_size}, {setup.jobs} gang jobs "
                 f"(openb multi-GPU pods), load {setup.load:g}")
        print(f"plot: {plot(results, out, title=title)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
