"""Gang placement cost: a 64-pod gang on 1,000 H100 nodes, with and without topology.

The store holds 1,000 `h100x8` catalog nodes (8,000 GPUs, each node's slices as the
simulated driver publishes them), labelled into racks of 32 nodes (`RACK`) and blocks of 4
racks (`BLOCK`). A background load, bound before any measurement, makes the racks differ:
in each rack a share of the nodes is free (0 to 28 of 32 nodes, by rack), half the rest
fully used, half partly (2 to 7 of 8 GPUs), so the free GPUs differ from rack to rack and
from block to block.

Each case then creates 64 pods (each its claim from a template: one GPU, or eight) and
times the scheduler from the pods queued to all 64 bound (wall and CPU time of one
`run_once`, the scheduler's view already loaded): as a gang (a PodGroup of minCount 64)
without a topology constraint, as a gang kept in one domain (topology key `RACK` for the
64 x 1 GPU gang; `BLOCK` for the 64 x 8 GPU one, since a rack has only 256 GPUs), and for
reference the same 64 pods without a PodGroup, pod by pod. Medians of `REPEATS` runs, each
on a fresh copy of the prepared SQLite file. Policy first-fit. No target is set by the
issue; the ratio to pod by pod is the gang's overhead.
"""

from __future__ import annotations

import gc
import shutil
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench.harness import Row, sized
from kubedra.api.codec import decode_object
from kubedra.api.core import Node, Pod
from kubedra.api.loader import load
from kubedra.catalog import profile
from kubedra.cluster import SqliteStore
from kubedra.scheduler.scheduler import Scheduler

NODES = sized(1000, 256)
GANG = 64
REPEATS = sized(5, 1)
RACK_NODES = 32
BLOCK_RACKS = 4
RACK = "topology.kubernetes.io/rack"
BLOCK = "topology.kubernetes.io/block"
POLICY = "first-fit"
PROFILE = "h100x8"
SEED_CLASS = (
    Path(__file__).resolve().parents[1] / "examples/seed/01-deviceclass-high-memory-gpu.yaml"
)
# (GPUs per pod, topology key of the "one domain" gang)
SHAPES = ((1, RACK), (8, BLOCK))
MODES = ("pod by pod", "gang", "gang, one domain")


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float
    bound: int
    domains: int  # distinct values of the case's topology key among the bound pods' nodes


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def rack_of(i: int) -> int:
    return i // RACK_NODES


def busy_gpus(i: int) -> int:
    """GPUs the background load takes on node `i`: the first `free` nodes of a rack are
    free (a number that changes from rack to rack), of the rest every other one is full,
    the others partly used. The nodes of a rack short of 32 (the last, at 1,000 nodes) are
    full: the topology plugin picks a domain by its free devices (an estimate), and a block
    with 512 free GPUs but fewer than 64 whole free nodes would be chosen for the 64 x 8
    gang that it cannot take (the gang is then refused, and not measured)."""
    rack, j = rack_of(i), i % RACK_NODES
    if i >= NODES - NODES % RACK_NODES:
        return 8
    free = 4 * ((rack * 3) % 8)  # 0, 12, 24, 4, 16, 28, 8, 20, then again
    if j < free:
        return 0
    return 8 if (j - free) % 2 == 0 else 2 + (i % 6)


def _template(name: str, gpus: int) -> dict[str, Any]:
    request = {"deviceClassName": "high-memory-gpu", "count": gpus}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}},
    }


def _pod(name: str, template: str, **spec: Any) -> Any:
    return decode_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
                **spec,
            },
        }
    ).obj


def prepare(saved: Path) -> None:
    """The nodes, their slices, the classes and templates, and the background load bound
    (pods pinned to their nodes by hostname), saved to `saved`."""
    from kubedra.driver.publisher import publish

    prof = profile(PROFILE)
    store = SqliteStore(Path(tempfile.mkdtemp(prefix="kubedra-bench-gang-")) / "state.db")
    with store.transaction():
        for i in range(NODES):
            name, rack = node_name(i), rack_of(i)
            node = prof.node(name)
            labels = {
                **node.metadata.labels,
                RACK: f"rack-{rack:03d}",
                BLOCK: f"block-{rack // BLOCK_RACKS:03d}",
            }
            meta = msgspec.structs.replace(node.metadata, labels=labels)
            store.create(msgspec.structs.replace(node, metadata=meta))
            for inventory in prof.inventories(name):
                publish(store, inventory, name)
        for loaded in load([str(SEED_CLASS)]):
            store.create(loaded.obj)
        for gpus in range(1, 9):
            store.create(decode_object(_template(f"gpus-{gpus}", gpus)).obj)
        for i in range(NODES):
            if busy := busy_gpus(i):
                hostname = {"kubernetes.io/hostname": node_name(i)}
                store.create(_pod(f"load-{i:05d}", f"gpus-{busy}", nodeSelector=hostname))
    Scheduler(store, POLICY).run_once()
    unbound = [p.name for p in store.list(Pod) if not p.spec.node_name]
    if unbound:
        raise RuntimeError(f"background load not placed: {len(unbound)} pods, {unbound[:3]}")
    store.backup_to(saved)
    store.close()


def measure(saved: Path, gpus: int, mode: str, key: str) -> Timing:
    """One case on a fresh copy of `saved`: the scheduler's view loaded first, then the
    gang's pods created and one `run_once` timed."""
    path = Path(tempfile.mkdtemp(prefix="kubedra-bench-gang-")) / "state.db"
    shutil.copyfile(saved, path)
    store = SqliteStore(path)
    try:
        scheduler = Scheduler(store, POLICY)
        scheduler.run_once()  # loads the view: nothing is pending
        group: dict[str, Any] = {}
        if mode != "pod by pod":
            spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": GANG}}}
            if mode == "gang, one domain":
                spec["schedulingConstraints"] = {"topology": [{"key": key}]}
            store.create(
                decode_object(
                    {
                        "apiVersion": "scheduling.k8s.io/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": "gang", "namespace": "default"},
                        "spec": spec,
                    }
                ).obj
            )
            group = {"schedulingGroup": {"podGroupName": "gang"}}
        with store.transaction():
            for i in range(GANG):
                store.create(_pod(f"worker-{i:03d}", f"gpus-{gpus}", **group))
        gc.collect()
        gc.disable()
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            scheduler.run_once()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            gc.enable()
        labels = {n.name: n.metadata.labels.get(key, "") for n in store.list(Node)}
        nodes = [
            p.spec.node_name
            for p in store.list(Pod)
            if p.name.startswith("worker-") and p.spec.node_name
        ]
        return Timing(wall, cpu, len(nodes), len({labels[n] for n in nodes}))
    finally:
        store.close()
        shutil.rmtree(path.parent, ignore_errors=True)


def domains() -> dict[str, tuple[int, int]]:
    """Free GPUs and wholly free nodes per rack and per block after the background load
    (for the notes, and for checking the layout)."""
    free: Counter[str] = Counter()
    whole: Counter[str] = Counter()
    for i in range(NODES):
        for label in (f"rack-{rack_of(i):03d}", f"block-{rack_of(i) // BLOCK_RACKS:03d}"):
            free[label] += 8 - busy_gpus(i)
            whole[label] += busy_gpus(i) == 0
    return {label: (free[label], whole[label]) for label in free}


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="kubedra-bench-gang-") as tmp:
        saved = Path(tmp) / "prepared.db"
        prepare(saved)
        results: dict[tuple[int, str], list[Timing]] = {}
        for _ in range(REPEATS):  # cases interleaved: drift on a shared machine spreads
            for gpus, key in SHAPES:
                for mode in MODES:
                    results.setdefault((gpus, mode), []).append(measure(saved, gpus, mode, key))
    return _rows(results)


def _rows(results: dict[tuple[int, str], list[Timing]]) -> list[Row]:
    rows = []
    load = sum(busy_gpus(i) for i in range(NODES))
    free = domains()
    layout = f"{NODES:,} {PROFILE} nodes, {load:,}/{NODES * 8:,} GPUs busy beforehand"
    for kind in ("rack", "block"):
        counts = [f for label, (f, _) in free.items() if label.startswith(kind) and f]
        layout += f"; free GPUs per {kind} {min(counts)}-{max(counts)}"
    for gpus, key in SHAPES:
        base = statistics.median(t.wall_s for t in results[gpus, "pod by pod"])
        base_cpu = statistics.median(t.cpu_s for t in results[gpus, "pod by pod"])
        for mode in MODES:
            timings = results[gpus, mode]
            wall = statistics.median(t.wall_s for t in timings)
            cpu = statistics.median(t.cpu_s for t in timings)
            bound = min(t.bound for t in timings)
            spread = max(t.domains for t in timings)
            where = key.rsplit("/", 1)[-1]
            label = mode if mode != "gang, one domain" else f"gang, one {where}"
            name = f"{GANG} pods x {gpus} GPU, {NODES:,} nodes: {label}"
            runs = "1 run" if len(timings) == 1 else f"median of {len(timings)}"
            rows.append(
                Row(
                    "gang",
                    name,
                    wall * 1e3,
                    "ms",
                    note=(
                        f"{wall * 1e3 / GANG:.2f} ms/pod; CPU {cpu * 1e3:.0f} ms "
                        f"({cpu * 1e3 / GANG:.2f} ms/pod); {bound}/{GANG} bound, "
                        f"in {spread} {where}(s); {runs}"
                        + (f"; {layout}" if mode == "pod by pod" else "")
                    ),
                )
            )
            if mode != "pod by pod":
                rows.append(
                    Row(
                        "gang",
                        f"{name}, vs pod by pod",
                        wall / base,
                        "x",
                        note=f"CPU {cpu / base_cpu:.2f}x",
                    )
                )
    return rows
