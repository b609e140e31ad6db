"""The scheduler's decisions on fixed workloads, recorded so that two versions can be compared.

A decision is what a scheduling attempt returned (the pod, its node, the devices allocated
for it, the claims it joined, the result and the PodScheduled message) and every Event the
scheduler recorded (FailedScheduling carries kubedra's explanation), in the order they
happened. Workloads:

- `saturate`: the simulator's FGD experiment on the Alibaba openb traces (a sample of the
  cluster, the first N arrivals), with DRA claims or the device-plugin baseline;
- `replay`: the simulator's arrivals and departures (pods queue and retry on releases);
- `mixed`: a synthetic cluster built here (H100 nodes with NICs, L4 nodes, a tainted, a
  cordoned and a CPU-only node) and rounds of varied pods: templates of 1 to 8 GPUs,
  selectors on model and memory, a GPU and a NIC under one PCIe root, firstAvailable,
  shared claims, claims created late, extended resources served by a DeviceClass and by a
  node, CPU and memory requests, node selectors, tolerations, priorities; pods end between
  rounds and the scheduler restarts halfway. It goes through the paths the traces do not.

Claim names and uids are made deterministic (the store draws them at random), so a run's
record is a pure function of the code. `python -m tests.scheduler.decisions record DIR`
writes one file per run; `compare A B` compares two such folders line by line; `digest
[FILE]` writes the digests of the small set the equivalence test checks
(`tests/scheduler/decisions.json`, recorded from the scheduler before it became a framework).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod, PodStatus
from kubedra.cluster import SqliteStore
from kubedra.cluster.events import Event
from kubedra.scheduler import scheduler as scheduler_module
from kubedra.scheduler.policies import POLICIES

Lines = list[str]


class Sink:
    """Collects outcomes and events as JSON lines, in order."""

    def __init__(self) -> None:
        self.lines: Lines = []

    def record(self, event: Event) -> None:
        obj = event.regarding
        self.lines.append(
            json.dumps(["E", event.type, event.reason, f"{obj.namespace}/{obj.name}", event.note])
        )

    def close(self) -> None:
        pass

    def outcome(self, o: Any) -> None:
        self.lines.append(
            json.dumps(["O", o.pod, o.node, list(o.devices), list(o.joined), o.result, o.message])
        )


def recording_scheduler(sink: Sink) -> type:
    """A Scheduler whose events and outcomes go to `sink` (public API only)."""
    base: type = scheduler_module.Scheduler

    class Recording(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("recorder", sink)
            super().__init__(*args, **kwargs)

        def schedule(self, pod: Pod) -> Any:
            outcome = super().schedule(pod)
            sink.outcome(outcome)
            return outcome

    return Recording


@contextmanager
def deterministic() -> Iterator[None]:
    """Generated names and uids as a function of the run (the store draws them at random)."""
    state = random.getstate()
    original = uuid.uuid4
    counter = itertools.count()
    random.seed(1234)
    uuid.uuid4 = lambda: uuid.UUID(int=next(counter))  # type: ignore[assignment]
    try:
        yield
    finally:
        uuid.uuid4 = original  # type: ignore[assignment]
        random.setstate(state)


# --- the simulator's workloads --------------------------------------------------------------


def saturate(trace: str, policy: str, pods: int, share: float, seed: int = 42) -> Lines:
    """FGD's experiment on a `share` of the openb cluster, the first `pods` arrivals."""
    from kubedra.sim import engine
    from kubedra.sim.trace import (
        OPENB_DIR,
        Workload,
        fgd_arrivals,
        load_cluster,
        load_workload,
        sample_cluster,
    )

    cluster = load_cluster(OPENB_DIR / "openb_node_list_gpu_node.csv")
    workload = load_workload(OPENB_DIR / f"openb_pod_list_{trace}.csv")
    small = sample_cluster(cluster, share, seed=seed) if share < 1 else cluster
    arrivals = fgd_arrivals(workload, small.gpu_milli, seed=seed)
    part = Workload(arrivals.tasks[:pods], trace)
    sink = Sink()
    with deterministic(), _patched(engine, "Scheduler", recording_scheduler(sink)):
        result = engine.run_saturate(small, part, policy, target=workload.tasks, seed=seed)
    sink.lines.append(json.dumps(["S", {k: result.summary[k] for k in sorted(result.summary)}]))
    return sink.lines


def replay(policy: str, pods: int, share: float, seed: int = 42, load: float = 6.0) -> Lines:
    """Arrivals (a Poisson stream offering `load` times the GPUs) and departures on a
    `share` of the cluster: pods queue, and retry on every release."""
    from kubedra.sim import engine
    from kubedra.sim.trace import (
        OPENB_DIR,
        load_cluster,
        load_workload,
        poisson_stream,
        prefix,
        sample_cluster,
    )

    cluster = load_cluster(OPENB_DIR / "openb_node_list_gpu_node.csv")
    workload = load_workload(OPENB_DIR / "openb_pod_list_default.csv")
    small = sample_cluster(cluster, share, seed=seed)
    stream = prefix(
        poisson_stream(workload, small.gpu_milli, load, horizon_s=10 * 3600, seed=seed), pods
    )
    sink = Sink()
    with deterministic(), _patched(engine, "Scheduler", recording_scheduler(sink)):
        result = engine.run_replay(small, stream, policy, seed=seed)
    summary = {k: result.summary[k] for k in sorted(result.summary)}
    sink.lines.append(json.dumps(["S", summary]))
    return sink.lines


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


# --- the synthetic cluster ------------------------------------------------------------------

GPU, NIC = "gpu.nvidia.com", "rdma.example.com"
H100, L4 = "NVIDIA H100 80GB HBM3", "NVIDIA L4"


def _node_kind(i: int, nodes: int) -> str:
    if i == nodes - 1:
        return "cpu"
    return "l4" if i % 4 == 0 else "h100"


def _cluster(store: SqliteStore, nodes: int) -> None:
    for i in range(nodes):
        name, kind = f"node-{i:02d}", _node_kind(i, nodes)
        allocatable = {"cpu": "32" if kind == "l4" else "64", "memory": "256Gi"}
        if i == 7:
            allocatable["example.com/fpga"] = "2"
        spec: dict[str, Any] = {}
        if i == 3:
            spec["taints"] = [{"key": "dedicated", "value": "train", "effect": "NoSchedule"}]
        if i == 5:
            spec["unschedulable"] = True
        labels = {
            "kubernetes.io/hostname": name,
            "zone": "zone-a" if i % 2 else "zone-b",
            "model": kind,
        }
        _create(
            store,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
                "status": {"allocatable": allocatable},
            },
        )
        if kind == "cpu":
            continue
        gpus = 4 if kind == "l4" else 8
        devices = [
            {
                "name": f"gpu-{g}",
                "attributes": {
                    "index": {"int": g},
                    "type": {"string": "gpu"},
                    "productName": {"string": L4 if kind == "l4" else H100},
                    **({"nvlinkDomain": {"int": g // 4}} if kind == "h100" else {}),
                    "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{g // 2:02x}"},
                },
                "capacity": {"memory": {"value": "24Gi" if kind == "l4" else "80Gi"}},
            }
            for g in range(gpus)
        ]
        _slice(store, name, GPU, devices)
        if kind == "h100":
            nics = [
                {
                    "name": f"nic-{n}",
                    "attributes": {
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{n:02x}"}
                    },
                }
                for n in range(4)
            ]
            _slice(store, name, NIC, nics)


def _slice(store: SqliteStore, node: str, driver: str, devices: list[dict[str, Any]]) -> None:
    _create(
        store,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        },
    )


def _class(name: str, expression: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def _exact(name: str, count: int = 1, cls: str = "gpu", cel: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    return {"name": name, "exactly": exactly}


TEMPLATES: dict[str, dict[str, Any]] = {
    **{f"gpu-{n}": {"requests": [_exact("gpus", n)]} for n in (1, 2, 4, 8)},
    "h100-2": {
        "requests": [_exact("gpus", 2, cel=f'device.attributes["{GPU}"].productName == "{H100}"')]
    },
    "mem-40": {
        "requests": [
            _exact(
                "gpu", 1, cel=f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'
            )
        ]
    },
    "gpu-nic": {
        "requests": [_exact("gpu"), _exact("nic", cls="nic")],
        "constraints": [
            {"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}
        ],
    },
    "first": {
        "requests": [
            {
                "name": "gpu",
                "firstAvailable": [
                    {
                        "name": "h100",
                        "deviceClassName": "gpu",
                        "selectors": [
                            {
                                "cel": {
                                    "expression": f'device.attributes["{GPU}"].productName == "{H100}"'
                                }
                            }
                        ],
                    },
                    {
                        "name": "l4",
                        "deviceClassName": "gpu",
                        "count": 2,
                        "selectors": [
                            {
                                "cel": {
                                    "expression": f'device.attributes["{GPU}"].productName == "{L4}"'
                                }
                            }
                        ],
                    },
                ],
            }
        ]
    },
}


def _setup(store: SqliteStore, nodes: int) -> None:
    with store.transaction():
        _cluster(store, nodes)
        _create(store, _class("gpu", f'device.driver == "{GPU}"'))
        _create(store, _class("nic", f'device.driver == "{NIC}"'))
        _create(store, _class("gpu-ext", f'device.driver == "{GPU}"', "nvidia.com/gpu"))
        for name, devices in TEMPLATES.items():
            _create(
                store,
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"spec": {"devices": devices}},
                },
            )
        for i in range(2):
            _claim(store, f"shared-{i}")


def _claim(store: SqliteStore, name: str, count: int = 1) -> None:
    _create(
        store,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [_exact("gpus", count)]}},
        },
    )


def _create(store: SqliteStore, doc: dict[str, Any]) -> None:
    store.create(decode_object(doc).obj)


KINDS = (
    ("gpu-1", 6), ("gpu-2", 4), ("gpu-4", 2), ("gpu-8", 1), ("h100-2", 2), ("mem-40", 2),
    ("gpu-nic", 2), ("first", 2), ("shared", 2), ("two", 1), ("ext", 2), ("fpga", 1),
    ("cpu", 2), ("late", 1), ("no-template", 1), ("big-cpu", 1),
)  # fmt: skip


def _pod(rng: random.Random, name: str, late: str) -> dict[str, Any]:
    kinds, weights = zip(*KINDS, strict=True)
    kind = rng.choices(kinds, weights)[0]
    claims: list[dict[str, Any]] = []
    resources: dict[str, Any] = {}
    if kind in TEMPLATES:
        claims = [{"name": "c0", "resourceClaimTemplateName": kind}]
    elif kind == "two":
        claims = [
            {"name": "c0", "resourceClaimTemplateName": "gpu-1"},
            {"name": "c1", "resourceClaimTemplateName": "gpu-nic"},
        ]
    elif kind == "shared":
        claims = [{"name": "c0", "resourceClaimName": f"shared-{rng.randrange(2)}"}]
    elif kind == "late":
        claims = [{"name": "c0", "resourceClaimName": late}]
    elif kind == "no-template":
        claims = [{"name": "c0", "resourceClaimTemplateName": "missing"}]
    elif kind == "ext":
        resources["limits"] = {"nvidia.com/gpu": str(rng.choice((1, 1, 2, 4)))}
    elif kind == "fpga":
        resources["limits"] = {"example.com/fpga": "1"}
    requests: dict[str, str] = {}
    if kind == "big-cpu":
        requests["cpu"] = "48"
    elif rng.random() < 0.6:
        requests["cpu"] = rng.choice(("1", "4", "8", "16", "30"))
        if rng.random() < 0.5:
            requests["memory"] = rng.choice(("8Gi", "64Gi", "200Gi"))
    if requests:
        resources["requests"] = requests
    container: dict[str, Any] = {"name": "main", "resources": resources}
    if claims:
        container["resources"] = {**resources, "claims": [{"name": c["name"]} for c in claims]}
    spec: dict[str, Any] = {
        "priority": rng.choice((0, 0, 0, 10)),
        "resourceClaims": claims,
        "containers": [container],
    }
    if rng.random() < 0.15:
        spec["nodeSelector"] = {"zone": rng.choice(("zone-a", "zone-b"))}
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def mixed(policy: str, seed: int, nodes: int = 16, rounds: int = 8, per_round: int = 24) -> Lines:
    """Rounds of varied pods on the synthetic cluster; pods end between rounds."""
    sink = Sink()
    rng = random.Random(seed)
    Recording = recording_scheduler(sink)
    now = [datetime(2024, 1, 1, tzinfo=UTC)]
    clock = [0.0]
    with deterministic(), tempfile.TemporaryDirectory(prefix="kubedra-decisions-") as tmp:
        store = SqliteStore(Path(tmp) / "state.db", clock=lambda: now[0])
        try:
            _setup(store, nodes)
            scheduler = Recording(store, policy, clock=lambda: clock[0])
            for r in range(rounds):
                if r == rounds // 2:  # a restart: a new scheduler knows only the store
                    scheduler = Recording(store, policy, clock=lambda: clock[0])
                with store.transaction():
                    if r:
                        _claim(store, f"late-{r - 1}", count=rng.choice((1, 2)))
                    for j in range(per_round):
                        _create(store, _pod(rng, f"p{r:02d}-{j:03d}", f"late-{r}"))
                sink.lines.append(json.dumps(["R", r]))
                scheduler.run_once()
                _end_some(store, rng)
                now[0] += timedelta(seconds=60)
                clock[0] += 11.0  # every backoff expires
            scheduler.run_once()
        finally:
            store.close()
    return sink.lines


def _end_some(store: SqliteStore, rng: random.Random) -> None:
    bound = sorted(
        (p for p in store.list(Pod, "default") if p.spec.node_name), key=lambda p: p.name
    )
    for pod in bound:
        if rng.random() < 0.3:
            status = msgspec.structs.replace(pod.status or PodStatus(), phase="Succeeded")
            store.update_status(msgspec.structs.replace(pod, status=status))


# --- the sets of runs -----------------------------------------------------------------------

Run = tuple[str, Callable[[], Lines]]
TRACES = ("default", "multigpu50", "gpushare100", "gpuspec33", "cpu250")


def full_runs(pods: int = 2000) -> list[Run]:
    """Every policy, DRA and device-plugin, on every trace family; replay; mixed."""
    runs: list[Run] = []
    policies = sorted(POLICIES)
    for trace in TRACES:
        for policy in [*policies, *(f"device-plugin+{p}" for p in policies)]:
            runs.append(
                (
                    f"saturate-{trace}-{policy}",
                    _bind(saturate, trace, policy, pods, 0.2),
                )
            )
    for policy in [*policies, "device-plugin", "device-plugin+fragmentation"]:
        runs.append((f"replay-{policy}", _bind(replay, policy, pods, 1 / 16, 42, 2.0)))
    for policy in policies:
        for seed in (1, 2, 3):
            runs.append((f"mixed-{policy}-{seed}", _bind(mixed, policy, seed, 48, 12, 60)))
    return runs


def small_runs() -> list[Run]:
    """What the equivalence test checks: seconds per policy."""
    runs: list[Run] = []
    for policy in sorted(POLICIES):
        runs.append((f"mixed-{policy}", _bind(mixed, policy, 7)))
        runs.append((f"saturate-{policy}", _bind(saturate, "default", policy, 180, 1 / 64)))
    runs.append(
        ("saturate-device-plugin", _bind(saturate, "gpuspec33", "device-plugin", 180, 1 / 64))
    )
    runs.append(("replay-fragmentation", _bind(replay, "fragmentation", 200, 1 / 64)))
    return runs


def _bind(fn: Callable[..., Lines], *args: Any) -> Callable[[], Lines]:
    return lambda: fn(*args)


def digest(lines: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def digests(lines: Sequence[str]) -> dict[str, str]:
    """Two digests of a run: `placements` (each attempt's pod, node, devices, joined
    claims, result, in order; the summary) and `messages` (the PodScheduled messages and
    the events' notes, kubedra's explanations). Placements change with a scheduling
    decision; messages also with the wording of the allocator's diagnosis."""
    placements, messages = [], []
    for line in lines:
        row = json.loads(line)
        if row[0] == "O":
            placements.append(json.dumps(row[:6]))
            messages.append(json.dumps(row[6]))
        elif row[0] == "E":
            messages.append(line)
        else:
            placements.append(line)
    return {"placements": digest(placements)[:32], "messages": digest(messages)[:32]}


def main(argv: list[str]) -> int:
    command, rest = argv[0], argv[1:]
    if command == "record":  # record DIR [--small] [--shard=I/N] [NAME-SUBSTRING ...]
        out = Path(rest[0])
        out.mkdir(parents=True, exist_ok=True)
        small = "--small" in rest
        shard = next((a.split("=", 1)[1] for a in rest if a.startswith("--shard=")), "0/1")
        index, shards = (int(x) for x in shard.split("/"))
        wanted = [a for a in rest[1:] if not a.startswith("--")]
        for i, (name, run) in enumerate(small_runs() if small else full_runs()):
            if i % shards != index or (wanted and not any(w in name for w in wanted)):
                continue
            lines = run()
            (out / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
            print(name, len(lines), flush=True)
        return 0
    if command == "digest":  # the small set's digests, as the test's data file holds them
        table = {name: digests(run()) for name, run in small_runs()}
        text = json.dumps(table, indent=1, sort_keys=True) + "\n"
        if rest:
            Path(rest[0]).write_text(text)
        else:
            print(text, end="")
        return 0
    if command == "compare":  # compare A B: every file of A against B's
        a, b = Path(rest[0]), Path(rest[1])
        files = sorted(p.name for p in a.glob("*.jsonl"))
        decisions = differences = 0
        for name in files:
            left = (a / name).read_text().splitlines()
            right = (b / name).read_text().splitlines() if (b / name).exists() else []
            decisions += sum(1 for line in left if line.startswith('["O"'))
            for i, (x, y) in enumerate(itertools.zip_longest(left, right)):
                if x != y:
                    differences += 1
                    print(f"{name}:{i + 1}:\n  - {x}\n  + {y}")
                    break
        print(f"{len(files)} runs, {decisions} decisions compared, {differences} runs differ")
        return 1 if differences else 0
    raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
