"""Simulator inputs: clusters (node lists) and workloads (task lists), as plain records.

Two sources each: the Alibaba GPU trace v2023 ("openb") CSVs used by the FGD paper, and
small YAML files (a cluster of catalog profiles, a workload of claim-template shapes with
arrival rates and durations). Everything downstream works on `NodeSpec` and `TaskSpec`.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from kubedra.api.quantity import Quantity

MILLI = 1000  # GPU-milli per whole GPU
_MIB = 2**20
# GPU memory (GiB) of the trace's disclosed models; G1/G2/G3 are undisclosed codes.
GPU_MEMORY_GIB = {"P100": 16, "T4": 16, "V100M16": 16, "V100M32": 32, "A10": 24}
# Where the shared trace data lives, relative to the repository root.
DATA_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "data"
OPENB_DIR = DATA_DIR / "alibaba-gpu-2023"
FGD_RESULTS_DIR = DATA_DIR / "fgd-atc23-results"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node: allocatable CPU (milli) and memory (MiB), and `gpus` GPUs of `model`."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    model: str = ""
    gpu_memory_mib: int | None = None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task (pod): `num_gpu` GPUs of `gpu_milli` each (< 1000: a shared GPU)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_spec: tuple[str, ...] = ()  # allowed GPU models; empty: any
    creation: float = 0.0
    deletion: float | None = None  # None: runs for ever

    @property
    def demand_milli(self) -> int:
        """GPU demand in GPU-milli (num_gpu x gpu_milli)."""
        return self.num_gpu * self.gpu_milli

    @property
    def shape(self) -> tuple[int, int, tuple[str, ...]]:
        """What the claim depends on: (GPU count, milli per GPU, allowed models)."""
        return (self.num_gpu, self.gpu_milli, self.gpu_spec)

    @property
    def sharing(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI


@dataclass(frozen=True, slots=True)
class Cluster:
    nodes: tuple[NodeSpec, ...]

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpu_milli(self) -> int:
        return self.gpus * MILLI


@dataclass(frozen=True, slots=True)
class Workload:
    tasks: tuple[TaskSpec, ...]
    name: str = ""

    @property
    def demand_milli(self) -> int:
        return sum(t.demand_milli for t in self.tasks)


# --- clusters ----------------------------------------------------------------------------


def load_cluster(path: str | Path) -> Cluster:
    """A node-list CSV (openb format) or a YAML `{nodes: [{profile: NAME, count: N}]}`."""
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        return cluster_from_yaml(yaml.safe_load(path.read_text()))
    with path.open(newline="") as fh:
        return cluster_from_rows(csv.DictReader(fh))


def cluster_from_rows(rows: Iterable[dict[str, str]]) -> Cluster:
    nodes = []
    for row in rows:
        gpus = int(row.get("gpu") or 0)
        model = (row.get("model") or "").strip() if gpus else ""
        mem = GPU_MEMORY_GIB.get(model)
        nodes.append(
            NodeSpec(
                name=row["sn"],
                cpu_milli=int(row["cpu_milli"]),
                memory_mib=int(row["memory_mib"]),
                gpus=gpus,
                model=model,
                gpu_memory_mib=mem * 1024 if mem else None,
            )
        )
    return Cluster(tuple(nodes))


def cluster_from_yaml(doc: dict[str, Any]) -> Cluster:
    """Catalog profiles (`kubedra.catalog`): each entry `{profile, count, prefix?}`."""
    from kubedra.catalog.profiles import profile

    nodes = []
    for i, entry in enumerate(doc.get("nodes") or []):
        prof = profile(str(entry["profile"]))
        prefix = str(entry.get("prefix") or f"{prof.name}-{i}")
        for k in range(int(entry.get("count", 1))):
            name = f"{prefix}-{k}"
            node = prof.node(name)
            alloc = node.status.allocatable if node.status else {}
            gpu_mem = (
                Quantity.parse(prof.gpu.memory).value() // _MIB if prof.gpu is not None else None
            )
            nodes.append(
                NodeSpec(
                    name=name,
                    cpu_milli=int(alloc["cpu"].milli_value())
                    if "cpu" in alloc
                    else prof.cpu * 1000,
                    memory_mib=int(alloc["memory"].value() // _MIB)
                    if "memory" in alloc
                    else prof.memory_gib * 1024,
                    gpus=prof.gpu_count,
                    model=prof.gpu_model or "",
                    gpu_memory_mib=int(gpu_mem) if gpu_mem is not None else None,
                    labels=tuple(sorted(node.metadata.labels.items())),
                )
            )
    return Cluster(tuple(nodes))


# --- workloads ---------------------------------------------------------------------------


def load_workload(path: str | Path, *, seed: int = 0) -> Workload:
    """A pod-list CSV (openb format) or a YAML workload (see `workload_from_yaml`)."""
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        return workload_from_yaml(yaml.safe_load(path.read_text()), seed=seed, name=path.stem)
    with path.open(newline="") as fh:
        return Workload(tuple(tasks_from_rows(csv.DictReader(fh))), name=path.stem)


def _num(row: dict[str, str], key: str, default: float = 0.0) -> float:
    raw = (row.get(key) or "").strip()
    return float(raw) if raw else default


def tasks_from_rows(rows: Iterable[dict[str, str]]) -> list[TaskSpec]:
    tasks = []
    for i, row in enumerate(rows):
        num_gpu = int(_num(row, "num_gpu"))
        milli = int(_num(row, "gpu_milli")) if num_gpu else 0
        spec = tuple(s for s in (row.get("gpu_spec") or "").strip().split("|") if s)
        deletion = (row.get("deletion_time") or "").strip()
        tasks.append(
            TaskSpec(
                name=row.get("name") or f"pod-{i:05d}",
                cpu_milli=int(_num(row, "cpu_milli")),
                memory_mib=int(_num(row, "memory_mib")),
                num_gpu=num_gpu,
                gpu_milli=milli,
                gpu_spec=spec,
                creation=_num(row, "creation_time"),
                deletion=float(deletion) if deletion else None,
            )
        )
    return tasks


def workload_from_yaml(doc: dict[str, Any], *, seed: int = 0, name: str = "") -> Workload:
    """`{duration: S, tasks: [{name, gpus, milli?, cpu?, memory_mib?, models?, rate, runtime}]}`:
    Poisson arrivals (`rate` per second) over `duration` seconds, exponential runtimes
    (`runtime` seconds mean; omitted: run for ever)."""
    rng = random.Random(seed)
    horizon = float(doc.get("duration", 3600))
    tasks: list[TaskSpec] = []
    for entry in doc.get("tasks") or []:
        gpus = int(entry.get("gpus", 1))
        milli = int(entry.get("milli", MILLI if gpus else 0))
        models = entry.get("models") or ()
        base = TaskSpec(
            name=str(entry.get("name", f"task{len(tasks)}")),
            cpu_milli=int(entry.get("cpu", 1000)),
            memory_mib=int(entry.get("memory_mib", 1024)),
            num_gpu=gpus,
            gpu_milli=milli,
            gpu_spec=tuple(str(m) for m in ([models] if isinstance(models, str) else models)),
        )
        rate, runtime = float(entry.get("rate", 0.01)), entry.get("runtime")
        t, k = 0.0, 0
        while True:
            t += rng.expovariate(rate)
            if t > horizon:
                break
            end = t + rng.expovariate(1.0 / float(runtime)) if runtime else None
            tasks.append(replace(base, name=f"{base.name}-{k:05d}", creation=t, deletion=end))
            k += 1
    tasks.sort(key=lambda x: (x.creation, x.name))
    return Workload(tuple(tasks), name=name)


def fgd_arrivals(
    workload: Workload, capacity_milli: int, *, seed: int, tune: float = 1.3
) -> Workload:
    """The FGD paper's arrival list: tasks shuffled by `seed`, then resampled (with
    replacement) until their GPU demand reaches `tune` x the cluster's GPU capacity, or cut
    there when the trace holds more (upstream's `-tune 1.3`)."""
    rng = random.Random(seed)
    tasks = list(workload.tasks)
    rng.shuffle(tasks)
    target = tune * capacity_milli
    out: list[TaskSpec] = []
    total = 0
    for task in tasks:
        if total >= target:
            break
        out.append(task)
        total += task.demand_milli
    k = 0
    gpu_tasks = [t for t in tasks if t.demand_milli > 0]
    while total < target and gpu_tasks:
        task = rng.choice(tasks)
        out.append(replace(task, name=f"{task.name}-r{k}"))
        total += task.demand_milli
        k += 1
    return Workload(tuple(out), name=workload.name)


def sample_cluster(cluster: Cluster, share: float, *, seed: int) -> Cluster:
    """About `share` of the nodes, drawn by `seed` from each (GPU model, GPU count) kind in
    proportion, so a scaled-down replay keeps the cluster's mix."""
    if not 0 < share <= 1:
        raise ValueError(f"cluster share must be in (0, 1], got {share:g}")
    if share == 1:
        return cluster
    rng = random.Random(seed)
    kinds: dict[tuple[str, int], list[NodeSpec]] = {}
    for node in cluster.nodes:
        kinds.setdefault((node.model, node.gpus), []).append(node)
    chosen = {
        node.name
        for nodes in kinds.values()
        for node in rng.sample(nodes, int(share * len(nodes) + 0.5))
    }
    return Cluster(tuple(n for n in cluster.nodes if n.name in chosen))


def _work_in_window(task: TaskSpec, horizon: float) -> float:
    """GPU-milli x seconds that `task` does inside [0, horizon], integrated over an arrival
    time uniform on that window (times `horizon`): a task outliving the window counts only
    up to its end."""
    run = math.inf if task.deletion is None else task.deletion - task.creation
    if run >= horizon:
        return task.demand_milli * horizon * horizon / 2
    return task.demand_milli * (run * horizon - run * run / 2)


def poisson_stream(
    workload: Workload, capacity_milli: int, load: float, *, horizon_s: float, seed: int
) -> Workload:
    """An open-loop replay stream: tasks drawn (with replacement) from the trace, keeping
    their shape and runtime, arriving as a Poisson process over `horizon_s` at the rate that
    offers `load` x the capacity in GPU work inside the window.

    The openb lists cannot be replayed at their own times: 8,152 pods over 149 days hold at
    most about 1 % of the cluster at once. Compressing the times does not help either, as
    84 % of the GPU work is in pods running over a week, and the whole list asks for 0.98 x
    the capacity at once. A stationary stream from the same distribution does contend."""
    if load <= 0 or horizon_s <= 0:
        raise ValueError(f"replay load and horizon must be positive, got {load:g}, {horizon_s:g}")
    tasks = workload.tasks
    mean_work = sum(_work_in_window(t, horizon_s) for t in tasks) / max(len(tasks), 1)
    if mean_work <= 0 or capacity_milli <= 0:
        raise ValueError(f"workload {workload.name}: no GPU work to offer a load with")
    rate = load * capacity_milli * horizon_s / mean_work  # arrivals per second
    rng = random.Random(seed)
    out: list[TaskSpec] = []
    now = rng.expovariate(rate)
    while now < horizon_s:
        task = rng.choice(tasks)
        end = None if task.deletion is None else now + (task.deletion - task.creation)
        # named in arrival order: the queue breaks creation-time ties by name
        name = f"a{len(out):06d}-{task.name}"[:63].rstrip("-")
        out.append(replace(task, name=name, creation=now, deletion=end))
        now += rng.expovariate(rate)
    return Workload(tuple(out), name=workload.name)


def prefix(workload: Workload, n: int | None) -> Workload:
    return workload if n is None else Workload(workload.tasks[:n], name=workload.name)


__all__ = [
    "FGD_RESULTS_DIR",
    "GPU_MEMORY_GIB",
    "MILLI",
    "OPENB_DIR",
    "Cluster",
    "NodeSpec",
    "TaskSpec",
    "Workload",
]
