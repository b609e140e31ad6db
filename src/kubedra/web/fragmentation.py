"""The fragmentation view: FGD's fragmentation and the allocation ratio, now and over time.

The measure is the one the `fragmentation` policy descends on (`node_fragmentation`, FGD,
Weng et al. ATC'23): per node, the free accelerator capacity that the workload's task types
cannot use, weighted by each type's share. Accelerators are counted in milli: a device held
whole has 0 free, a shared one what its consumed capacity leaves, a partitionable GPU (MIG)
what its used counters leave. The workload is the pods in the store (each pod's device
count, milli per device and CPU, as the policy shapes a pod); with no pods, one whole-device
task. `History` samples both ratios as the cluster changes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kubedra.api.core import ENDED_PHASES, Pod
from kubedra.api.resource import ResourceClaim
from kubedra.errors import KubedraError
from kubedra.scheduler.explain import pod_claims
from kubedra.scheduler.policies.fragmentation import (
    MILLI,
    TaskShape,
    node_fragmentation,
    task_shape,
)
from kubedra.scheduler.scheduler import Unschedulable
from kubedra.web.devices import NodeFacts
from kubedra.web.facts import Facts
from kubedra.web.fleet import accelerators

DEFAULT_MIX = ((TaskShape(1), 1.0),)


def pod_shape(pod: Pod, claims: Sequence[ResourceClaim]) -> TaskShape:
    """FGD's task type of a pod, from all its claims (the policy shapes a pending pod from
    its unallocated claims only)."""
    return task_shape(pod, claims)[0]


def workload_mix(facts: Facts) -> list[tuple[TaskShape, float]]:
    """The task types of the pods that have not ended, with their shares."""
    shapes: Counter[TaskShape] = Counter()
    for pod in facts.scheduler.store.list(Pod):
        if pod.status is not None and pod.status.phase in ENDED_PHASES:
            continue
        try:
            claims = pod_claims(facts.scheduler, pod)
        except (KubedraError, Unschedulable):
            claims = []  # a claim not there (yet): the pod counts by its CPU alone
        shapes[pod_shape(pod, claims)] += 1
    total = sum(shapes.values())
    return [(s, n / total) for s, n in shapes.items()] if total else list(DEFAULT_MIX)


def free_milli(node: NodeFacts) -> list[int]:
    """Free milli of each accelerator of a node; a partitionable GPU counts once (the
    fleet's count of accelerators)."""
    return [round((1 - unit.fill) * MILLI) for unit in accelerators(node)]


def measure(facts: Facts) -> dict[str, Any]:
    """The cluster's fragmentation and allocation ratio (0..1 of accelerator capacity)."""
    mix = workload_mix(facts)
    capacity = fragmented = free_total = 0.0
    nodes: list[tuple[float, str]] = []
    for node in facts.nodes:
        free = free_milli(node)
        if not free:
            continue
        models = frozenset(d.product for d in node.devices if d.product)
        cpu = facts.scheduler.cpu_free(node.name)
        f = node_fragmentation(free, mix, cpu, models)
        capacity += len(free) * MILLI
        fragmented += f
        free_total += sum(free)
        nodes.append((f / (len(free) * MILLI), node.name))
    return {
        "version": facts.version,
        "accelerators": int(capacity // MILLI),
        "fragmentation": fragmented / capacity if capacity else 0.0,
        "allocation": (capacity - free_total) / capacity if capacity else 0.0,
        "mix": [
            {"devices": s.devices, "milli": s.milli, "cpuMilli": s.cpu_milli, "share": round(p, 4)}
            for s, p in mix
        ],
        "mostFragmented": [
            {"name": name, "fragmentation": round(f, 4)}
            for f, name in sorted(nodes, key=lambda n: (-n[0], n[1]))[:20]
        ],
    }


class History:
    """Samples of (time, fragmentation, allocation), one per change at most every
    `interval` seconds, the last `size` kept."""

    def __init__(
        self,
        sample: Callable[[], dict[str, Any]],
        interval: float = 2.0,
        size: int = 1800,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sample = sample
        self.interval = interval
        self._clock = clock
        self._points: deque[dict[str, Any]] = deque(maxlen=size)
        self._lock = threading.Lock()
        self._last_version = -1

    def record(self) -> None:
        """Take a sample unless the cluster has not changed since the last one."""
        now = self._sample()
        if now["version"] == self._last_version:
            return
        self._last_version = now["version"]
        point = {
            "time": self._clock(),
            "version": now["version"],
            "fragmentation": round(now["fragmentation"], 5),
            "allocation": round(now["allocation"], 5),
        }
        with self._lock:
            self._points.append(point)

    def points(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._points)


def figures(folder: Path | None) -> list[dict[str, str]]:
    """The simulator's plots (docs/figures/*.png), when the folder is there."""
    if folder is None or not folder.is_dir():
        return []
    return [
        {"name": p.name, "title": p.stem.replace("_", " ").replace("-", " · ")}
        for p in sorted(folder.glob("*.png"))
    ]
