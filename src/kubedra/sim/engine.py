"""The simulation engine: simulated time, a real store, the real kubedra Scheduler.

Each run gets a fresh `SqliteStore` in a temporary directory holding the cluster (Nodes,
ResourceSlices, one DeviceClass) and, as tasks arrive, their ResourceClaimTemplates and Pods.
The scheduler runs in-process with a simulated clock; the engine only creates and ends pods
(the role of users and kubelets) and watches the outcomes. Two experiments:

* `saturate` (the FGD methodology): tasks arrive one by one in (seeded, shuffled, tuned)
  order, never depart; a task that does not fit fails and is removed. Metrics are read each
  time the arrived GPU demand passes another 1 % of the cluster's GPU capacity.
* `replay`: tasks arrive at their creation time and end at their deletion time; pending
  pods wait in the scheduler's queue. Metrics over simulated time.

Saturate runs use one ResourceClaimTemplate per task shape; replay runs give each pod its
own ResourceClaim, because a pod that is retried after a failed cycle would otherwise hit a
scheduler bug: the claim generated from a template in a cycle that ends Unschedulable is
rolled back with the store transaction but stays in the scheduler's cache, so the next
cycle's claim update fails with NotFound.
"""

from __future__ import annotations

import itertools
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Literal, TextIO

import msgspec

from kubedra.api.core import Pod, PodStatus
from kubedra.api.resource import ResourceClaim
from kubedra.cli.progress import Progress
from kubedra.cluster.sqlite import SqliteStore
from kubedra.errors import NotFound
from kubedra.scheduler.policies import Policy, make_policy
from kubedra.scheduler.policies.fragmentation import Fragmentation
from kubedra.scheduler.scheduler import Outcome, Scheduler
from kubedra.sim import convert
from kubedra.sim.metrics import ClusterState, FragMeter, Placement, percentile, typical_types
from kubedra.sim.trace import Cluster, TaskSpec, Workload

BASELINE = "device-plugin"
SIM_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)  # simulated time 0
DEFAULT_BASELINE_POLICY = "spread"  # kube-scheduler's default scoring is LeastAllocated
# FGD's typical pods: the most popular task types that cover this share of the pods
# (its simulator's podPopularityThreshold, 95), the mix a fragmentation policy is primed with.
TYPICAL_SHARE = 0.95
ExperimentMode = Literal["saturate", "replay"]


def parse_policy(name: str) -> tuple[convert.Mode, str]:
    """`P` (DRA with policy P), `device-plugin` or `device-plugin+P` (the baseline)."""
    if name == BASELINE:
        return "device-plugin", DEFAULT_BASELINE_POLICY
    if name.startswith(BASELINE + "+"):
        return "device-plugin", name.split("+", 1)[1]
    return "dra", name


# A run's progress for someone else to show: (arrivals done, arrivals in all, what it says
# now, as `policy, GPU allocated 41.2 %`). `sim compare` shows its runs on one line.
OnProgress = Callable[[int, int, str], None]


class _Relay(Progress):
    """A progress line that is not drawn: each update goes to `send` instead."""

    def __init__(self, label: str, total: int, send: OnProgress) -> None:
        super().__init__(label, total, stream=sys.stderr)
        self.enabled = False
        self._send = send

    def update(self, done: int, total: int | None = None, label: str | None = None) -> None:
        super().update(done, total, label)
        self._send(done, self.total, self.label)


def _progress(
    progress: TextIO | None, policy: str, total: int, on_progress: OnProgress | None = None
) -> Progress:
    """The run's progress line (the CLI's: on a terminal only, erased at the end); none
    without a stream; `on_progress`: each update given to it instead."""
    if on_progress is not None:
        return _Relay(policy, total, on_progress)
    bar = Progress(policy, total, stream=progress or sys.stderr)
    bar.enabled &= progress is not None
    return bar


@dataclass
class RunResult:
    """One run: per-step rows (saturate: per 1 % of arrived demand; replay: over time)."""

    policy: str
    mode: ExperimentMode
    workload: str
    seed: int
    rows: list[dict[str, float]]
    summary: dict[str, float]
    wall_s: float


class Simulation:
    """One cluster, one policy, one store; feed it tasks with `submit` and `step`."""

    def __init__(
        self,
        cluster: Cluster,
        policy: str,
        *,
        workdir: Path,
        target: Sequence[TaskSpec] = (),
        typical_threshold: float = 1.0,
        prime_policy: bool = True,
        seed: int = 0,
    ) -> None:
        self.cluster = cluster
        self.policy_name = policy
        self.mode, base = parse_policy(policy)
        self.now = 0.0
        self.store = SqliteStore(workdir / "state.db", clock=self.wall_time)
        self.store.create(convert.obj(convert.device_class()))
        with self.store.transaction():
            for node in cluster.nodes:
                self.store.create(convert.obj(convert.node_doc(node)))
                sl = convert.slice_doc(node, self.mode)
                if sl is not None:
                    self.store.create(convert.obj(sl))
        self.policy: Policy = make_policy(base)
        self.policy.reseed(seed)
        self.scheduler = Scheduler(self.store, self.policy, clock=lambda: self.now)
        if prime_policy and target and isinstance(self.policy, Fragmentation):
            # FGD's typical pods, as this mode's claims ask (whole GPUs under device-plugin)
            shape = partial(convert.task_shape, mode=self.mode)
            self.policy.prime(dict(typical_types(target, TYPICAL_SHARE, shape=shape)))
        self.state = ClusterState(cluster.nodes)
        self.types = typical_types(target, typical_threshold)
        self.frag = FragMeter(self.state, self.types)
        self._templates: set[str] = set()
        self.tasks: dict[str, TaskSpec] = {}
        self.placements: dict[str, Placement] = {}
        self.scheduler.refresh()

    def close(self) -> None:
        self.store.close()

    def wall_time(self) -> datetime:
        """The simulated clock as a date, for the store's timestamps."""
        return SIM_EPOCH + timedelta(seconds=self.now)

    # --- feeding ------------------------------------------------------------------------

    def submit(self, task: TaskSpec) -> None:
        """Create the task's pod and its own ResourceClaim (named after the pod).

        Per-pod claims rather than templates here: a pod that is retried must not depend on
        a claim the scheduler generated in a cycle that failed (see the module notes)."""
        claim = convert.claim_doc(task, self.mode, f"{task.name}-gpus")
        if claim is not None:
            self.store.create(convert.obj(claim))
        pod = convert.pod_doc(task, self.mode, claim=claim["metadata"]["name"] if claim else None)
        self.store.create(convert.obj(pod))
        self.tasks[task.name] = task

    def submit_all(self, tasks: Sequence[TaskSpec]) -> list[str]:
        """Create every task's pod at once, named so that the scheduling queue (creation
        time, then name) pops them in this order; returns the pod names. With the clock
        frozen, a pod that fails stays in backoff for good: it never retries."""
        names = []
        with self.store.transaction():
            for i, task in enumerate(tasks):
                name = f"a{i:06d}-{task.name}"[:63].rstrip("-")
                template = convert.template_doc(task, self.mode)
                if template is not None and template["metadata"]["name"] not in self._templates:
                    self.store.create(convert.obj(template))
                    self._templates.add(template["metadata"]["name"])
                self.store.create(convert.obj(convert.pod_doc(task, self.mode, name)))
                self.tasks[name] = task
                names.append(name)
        return names

    def step(self) -> list[Outcome]:
        """One scheduling pass over the due pending pods (no claim release: see `end`)."""
        sched = self.scheduler
        sched.refresh()
        outcomes = []
        while (pod := sched.queue.pop()) is not None:
            outcome = sched.schedule(pod)
            outcomes.append(outcome)
            if outcome.node is not None:
                self.record(outcome)
        return outcomes

    def record(self, outcome: Outcome) -> None:
        """Mirror a successful placement in `state` (our own accounting)."""
        name = outcome.pod.split("/", 1)[1]
        task = self.tasks[name]
        gpus = tuple(int(d.rsplit("/", 1)[1].split("-")[1]) for d in outcome.devices)
        p = Placement(task, outcome.node or "", gpus, convert.milli_per_gpu(task, self.mode))
        self.state.place(p)
        self.placements[name] = p

    def fail(self, name: str) -> None:
        """Drop a task that could not be placed (saturate mode: it never retries)."""
        self.scheduler.queue.remove((convert.NAMESPACE, name))
        with suppress(NotFound):
            self.store.delete(Pod, name, convert.NAMESPACE)
        self.tasks.pop(name, None)

    def end(self, names: Sequence[str]) -> None:
        """Tasks finish: pods turn Succeeded, the scheduler frees their claims."""
        for name in names:
            try:
                pod = self.store.get(Pod, name, convert.NAMESPACE)
            except NotFound:
                continue
            st = pod.status or PodStatus()
            self.store.update_status(
                msgspec.structs.replace(pod, status=msgspec.structs.replace(st, phase="Succeeded"))
            )
            placed = self.placements.pop(name, None)
            if placed is not None:
                self.state.remove(placed)
        self.scheduler.refresh()
        self.scheduler.release_ended()
        for name in names:  # the pods are done with: delete them (keeps the store small)
            with suppress(NotFound):
                self.store.delete(Pod, name, convert.NAMESPACE)
            with suppress(NotFound):
                self.store.delete(ResourceClaim, f"{name}-gpus", convert.NAMESPACE)
            self.tasks.pop(name, None)

    def pending(self) -> int:
        return len(self.tasks) - len(self.placements)

    # --- measuring ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, float]:
        s = self.state
        return {
            "alloc_pct": 100.0 * s.allocation_ratio,
            "reserved_pct": 100.0 * s.reserved_milli / s.capacity_milli if s.capacity_milli else 0,
            "frag_pct": 100.0 * self.frag.ratio(),
            "idle_gpus": float(s.idle_gpus()),
        }


@contextmanager
def simulation(cluster: Cluster, policy: str, **kwargs: Any) -> Iterator[Simulation]:
    with tempfile.TemporaryDirectory(prefix="kubedra-sim-") as tmp:
        sim = Simulation(cluster, policy, workdir=Path(tmp), **kwargs)
        try:
            yield sim
        finally:
            sim.close()


def run_saturate(
    cluster: Cluster,
    arrivals: Workload,
    policy: str,
    *,
    seed: int = 0,
    max_pct: int = 130,
    progress: TextIO | None = None,
    target: Sequence[TaskSpec] | None = None,
    typical_threshold: float = 1.0,
    on_progress: OnProgress | None = None,
) -> RunResult:
    """FGD's experiment: arrivals in order, no departures; metrics at each 1 % arrived.
    Progress: a line on `progress` (a terminal), or each step given to `on_progress`."""
    start = time.perf_counter()
    tasks = arrivals.tasks
    rows: list[dict[str, float]] = []
    with _progress(progress, policy, len(tasks), on_progress) as bar, simulation(
        cluster, policy, target=target or tasks, typical_threshold=typical_threshold, seed=seed
    ) as sim:
        cap = sim.state.capacity_milli
        arrived, failed, next_pct = 0, 0, 0

        def record_upto(pct_now: float) -> None:
            nonlocal next_pct
            if next_pct > max_pct or pct_now < next_pct:
                return
            snap = sim.snapshot()
            while next_pct <= min(pct_now, max_pct):
                rows.append({"arrived_pct": float(next_pct), **snap, "failed": float(failed)})
                next_pct += 1

        record_upto(0.0)
        names = sim.submit_all(tasks)
        sched = sim.scheduler
        sched.refresh()
        for i, name in enumerate(names):
            pod = sched.queue.pop()
            if pod is None or pod.name != name:
                raise AssertionError(f"queue order: expected {name}, got {pod and pod.name}")
            outcome = sched.schedule(pod)
            if outcome.node is None:
                failed += 1
            else:
                sim.record(outcome)
            arrived += sim.tasks[name].demand_milli
            record_upto(100.0 * arrived / cap if cap else 0.0)
            alloc = f"{policy}, GPU allocated {100 * sim.state.allocation_ratio:.1f} %"
            bar.update(i + 1, label=alloc)
        final = sim.snapshot()
        placed = len(sim.placements)
    summary = {
        **final,
        "arrived_pct": 100.0 * arrived / cap if cap else 0.0,
        "pods": float(len(tasks)),
        "placed": float(placed),
        "failed": float(failed),
        **{f"alloc_at_{k}": _at(rows, k, "alloc_pct") for k in (90, 100, 130)},
        **{f"frag_at_{k}": _at(rows, k, "frag_pct") for k in (50, 90, 100)},
    }
    return RunResult(
        policy, "saturate", arrivals.name, seed, rows, summary, time.perf_counter() - start
    )


def _at(rows: Sequence[dict[str, float]], pct: int, key: str) -> float:
    for row in rows:
        if row["arrived_pct"] == pct:
            return row[key]
    return math.nan


def run_replay(
    cluster: Cluster,
    workload: Workload,
    policy: str,
    *,
    seed: int = 0,
    progress: TextIO | None = None,
    max_rows: int = 2000,
    typical_threshold: float = 1.0,
    on_progress: OnProgress | None = None,
) -> RunResult:
    """Arrivals at creation time, departures at deletion time; pods queue when full.
    Progress: as `run_saturate`'s."""
    start = time.perf_counter()
    tasks = sorted(workload.tasks, key=lambda t: (t.creation, t.name))
    events: list[tuple[float, int, str]] = []  # (time, 0 end / 1 arrive, name)
    by_name = {t.name: t for t in tasks}
    for t in tasks:
        events.append((t.creation, 1, t.name))
    events.sort()
    rows: list[dict[str, float]] = []
    delays: list[float] = []
    bound_at: dict[str, float] = {}
    import heapq

    ends: list[tuple[float, str]] = []
    with _progress(progress, policy, len(tasks), on_progress) as bar, simulation(
        cluster, policy, target=tasks, typical_threshold=typical_threshold, seed=seed
    ) as sim:
        arrived = 0
        i = 0
        n_events = len(events)
        while i < n_events or ends:
            t_next = events[i][0] if i < n_events else math.inf
            if ends and ends[0][0] <= t_next:
                now = ends[0][0]
                done = []
                while ends and ends[0][0] <= now:
                    done.append(heapq.heappop(ends)[1])
                sim.now = now
                sim.end(done)
            else:
                now = t_next
                sim.now = now
                while i < n_events and events[i][0] == now:
                    sim.submit(by_name[events[i][2]])
                    arrived += 1
                    i += 1
            for outcome in sim.step():
                if outcome.node is None:
                    continue
                name = outcome.pod.split("/", 1)[1]
                task = by_name[name]
                bound_at[name] = now
                delays.append(now - task.creation)
                end = task.deletion if task.deletion is not None else math.inf
                if end < math.inf:
                    heapq.heappush(ends, (max(end, now), name))
            rows.append(
                {
                    "time_s": now,
                    **sim.snapshot(),
                    "pending": float(sim.pending()),
                    "running": float(len(sim.placements)),
                }
            )
            bar.update(arrived, label=f"{policy}, {now / 3600:.1f} h, {sim.pending()} pending")
            if i >= n_events and sim.pending() and not ends:
                break  # nothing will ever free room for the rest
        unplaced = sim.pending()
    # Utilization is averaged over the arrival window: after the last arrival the cluster
    # only drains, and long runners would stretch the mean over an empty cluster.
    window = (tasks[0].creation, tasks[-1].creation) if tasks else (0.0, 0.0)
    summary = {
        "pods": float(len(tasks)),
        "placed": float(len(bound_at)),
        "never_placed": float(unplaced),
        "mean_alloc_pct": _time_weighted(rows, "alloc_pct", *window),
        "max_pending": max((r["pending"] for r in rows), default=0.0),
        "mean_pending": _time_weighted(rows, "pending", *window),
        "delay_p50_s": percentile(delays, 50),
        "delay_p99_s": percentile(delays, 99),
        "mean_idle_gpus": _time_weighted(rows, "idle_gpus", *window),
        "arrivals_from_s": window[0],
        "arrivals_to_s": window[1],
    }
    if len(rows) > max_rows:
        stride = math.ceil(len(rows) / max_rows)
        rows = [*rows[::stride], rows[-1]]
    return RunResult(
        policy, "replay", workload.name, seed, rows, summary, time.perf_counter() - start
    )


def _time_weighted(rows: Sequence[dict[str, float]], key: str, start: float, end: float) -> float:
    """Mean of the step function `key` (each row holds until the next) over [start, end]."""
    if end <= start:
        before = [r for r in rows if r["time_s"] <= start]
        return before[-1][key] if before else 0.0
    total = 0.0
    for a, b in itertools.pairwise([*rows, {**rows[-1], "time_s": math.inf}] if rows else []):
        overlap = min(b["time_s"], end) - max(a["time_s"], start)
        if overlap > 0:
            total += a[key] * overlap
    return total / (end - start)


Runner = Callable[..., RunResult]
