"""Prometheus metrics of `kubedra scheduler run`, and its health endpoints.

kube-scheduler's series under its own names, labels and buckets, so its dashboards and
alerts read kubedra too: `scheduler_schedule_attempts_total{result,profile}`,
`scheduler_scheduling_attempt_duration_seconds{result,profile}`, and the DRA plugin's
share of the work, `scheduler_plugin_execution_duration_seconds{plugin="DynamicResources",
extension_point="Filter",status}` (one observation per allocator run on a node: upstream
allocates in the plugin's Filter; it samples 10 % of scheduling cycles for this series,
kubedra observes every run). Then kubedra's own: pending pods by queue, API errors, the
lease, and what the scheduler sees of the cluster's devices (idle devices, FGD
fragmentation, per driver; `cluster_figures`). The `kubedra_scheduler_schedule_attempts`
and `..._scheduling_attempt_duration_seconds` series of kubedra 0.1 are kept (deprecated)
with their own `waiting` result, which upstream's names count as `unschedulable`.
One HTTP server answers `/metrics`, `/healthz` (the scheduling loop is alive) and
`/readyz` (its caches are filled: a standby is ready too, it can take over at once).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubedra.allocator import AllocatedState, NodeInfo
from kubedra.allocator.inventory import DeviceEntry, Pool
from kubedra.allocator.search import taint_blocks
from kubedra.cluster.rest import Request
from kubedra.probes import ProbeServer
from kubedra.scheduler.policies.fragmentation import (
    MILLI,
    MILLI_CAPACITY,
    Fragmentation,
    Mix,
    TaskShape,
    node_fragmentation,
)

if TYPE_CHECKING:
    from kubedra.scheduler.scheduler import Scheduler

# A scheduling attempt: a millisecond for a small cluster to seconds when the API is slow.
_ATTEMPT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ExponentialBuckets, multiplied out the same way (the same floats,
    so the same `le` labels as kube-scheduler's)."""
    out, bound = [], start
    for _ in range(count):
        out.append(bound)
        bound *= factor
    return tuple(out)


# kube-scheduler's buckets for the same series (pkg/scheduler/metrics/metrics.go).
UPSTREAM_ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)
UPSTREAM_PLUGIN_BUCKETS = exponential_buckets(0.00001, 1.5, 20)
# kubedra's results -> upstream's (scheduled, unschedulable, error): a pod waiting for its
# claim is one upstream's DRA plugin finds unschedulable (PreFilter: claim not found).
UPSTREAM_RESULTS = {"waiting": "unschedulable"}
DRA_PLUGIN = "DynamicResources"  # upstream's plugin name
CLUSTER_SECONDS = 10.0  # the cluster figures are computed at most this often
DEFAULT_MIX: Mix = ((TaskShape(1), 1.0),)  # a policy that observes no mix: one whole device


class SchedulerMetrics:
    def __init__(self, profile: str, registry: CollectorRegistry | None = None) -> None:
        self.profile = profile
        self.registry = registry if registry is not None else CollectorRegistry()
        self.attempts = Counter(
            "kubedra_scheduler_schedule_attempts",
            "Scheduling attempts by result (scheduled, unschedulable, waiting for a claim, "
            "error: a write failed or raced). Deprecated: use scheduler_schedule_attempts_total.",
            ("result", "profile"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "kubedra_scheduler_scheduling_attempt_duration_seconds",
            "From the start of a pod's scheduling cycle to the end of its binding cycle. "
            "Deprecated: use scheduler_scheduling_attempt_duration_seconds.",
            ("result", "profile"),
            buckets=_ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled (kubedra: also a pod waiting for its claim), while "
            "'error' means an internal scheduler problem (kubedra: a write failed or raced).",
            ("result", "profile"),
            registry=self.registry,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ("result", "profile"),
            buckets=UPSTREAM_ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point (kubedra: the "
            "DynamicResources plugin's allocator, once per node it tries, at Filter).",
            ("plugin", "extension_point", "status"),
            buckets=UPSTREAM_PLUGIN_BUCKETS,
            registry=self.registry,
        )
        self.devices = Gauge(
            "kubedra_scheduler_devices",
            "Devices the scheduler sees on the nodes it owns, by driver (a partitionable "
            "device counts once: a MIG-capable GPU with all its partitions is one).",
            ("driver",),
            registry=self.registry,
        )
        self.idle_devices = Gauge(
            "kubedra_scheduler_idle_devices",
            "Of those, the devices no claim holds any part of and no NoSchedule/NoExecute "
            "taint keeps from being allocated.",
            ("driver",),
            registry=self.registry,
        )
        self.fragmented_devices = Gauge(
            "kubedra_scheduler_fragmented_devices",
            "FGD fragmentation (Weng et al., ATC'23) summed over nodes, in devices: free "
            "capacity the workload's task types cannot use where it is.",
            ("driver",),
            registry=self.registry,
        )
        self.fragmentation = Gauge(
            "kubedra_scheduler_fragmentation_ratio",
            "kubedra_scheduler_fragmented_devices / kubedra_scheduler_devices (0..1).",
            ("driver",),
            registry=self.registry,
        )
        self.pending = Gauge(
            "kubedra_scheduler_pending_pods",
            "Pending pods by queue: active (to try now), backoff (did not fit, retried later), "
            "gated (waiting for a claim to exist), binding (writes in flight).",
            ("queue",),
            registry=self.registry,
        )
        self.api_errors = Counter(
            "kubedra_scheduler_api_errors",
            "Failed API requests by verb, resource and HTTP status (unreachable: no answer).",
            ("verb", "resource", "code"),
            registry=self.registry,
        )
        self.leader = Gauge(
            "kubedra_scheduler_leader",
            "1 while this replica holds the lease.",
            registry=self.registry,
        )
        self.shared_nodes = Gauge(
            "kubedra_scheduler_shared_nodes",
            "Owned nodes where another scheduler's pods hold devices (a race is possible).",
            registry=self.registry,
        )
        self.relists = Gauge(
            "kubedra_scheduler_relists",
            "Watches that expired (410) and were listed again.",
            registry=self.registry,
        )
        self._probes = ProbeServer(self.registry)
        self._drivers: set[str] = set()
        self._next_cluster = 0.0
        self._seen: tuple[object, int] | None = None  # the view and its change-log mark

    def attempt(self, result: str, seconds: float) -> None:
        self.attempts.labels(result, self.profile).inc()
        self.latency.labels(result, self.profile).observe(seconds)
        upstream = UPSTREAM_RESULTS.get(result, result)
        self.schedule_attempts.labels(upstream, self.profile).inc()
        self.attempt_duration.labels(upstream, self.profile).observe(seconds)

    def allocated(self, status: str, seconds: float) -> None:
        """One allocator run on one node (Success, Unschedulable or Error)."""
        self.plugin_duration.labels(DRA_PLUGIN, "Filter", status).observe(seconds)

    def watch(self, scheduler: Scheduler) -> None:
        """Observe `scheduler`'s allocator runs."""
        scheduler.on_allocate = self.allocated

    def observe_cluster(
        self, scheduler: Scheduler, now: float | None = None, interval: float = CLUSTER_SECONDS
    ) -> bool:
        """Update the device figures from `scheduler`'s view, at most every `interval`
        seconds and only when devices were reserved, freed or republished since; called
        on the scheduling thread (the view is not shared). True when updated."""
        now = time.monotonic() if now is None else now
        if now < self._next_cluster:
            return False
        view = scheduler.view()
        mark = self._seen[1] if self._seen is not None and self._seen[0] is view else 0
        changed, end = view.changed_since(mark)
        self._next_cluster = now + interval
        if self._seen is not None and self._seen[0] is view and changed is not None and not changed:
            return False
        self._seen = (view, end)
        figures = cluster_figures(scheduler)
        for driver, f in figures.items():
            self.devices.labels(driver).set(f.devices)
            self.idle_devices.labels(driver).set(f.idle)
            self.fragmented_devices.labels(driver).set(f.fragmented)
            self.fragmentation.labels(driver).set(f.fragmented / f.devices if f.devices else 0.0)
        for driver in self._drivers - set(figures):
            for gauge in (self.devices, self.idle_devices, self.fragmented_devices):
                gauge.remove(driver)
            self.fragmentation.remove(driver)
        self._drivers = set(figures)
        return True

    def api_error(self, about: Request, status: int | None) -> None:
        code = str(status) if status is not None else "unreachable"
        self.api_errors.labels(about.verb, about.resource, code).inc()

    def set_pending(self, active: int, backoff: int, gated: int, binding: int) -> None:
        for queue, count in (
            ("active", active),
            ("backoff", backoff),
            ("gated", gated),
            ("binding", binding),
        ):
            self.pending.labels(queue).set(count)

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    # --- serving ------------------------------------------------------------------------

    def serve(
        self, port: int, healthy: Callable[[], bool], ready: Callable[[], bool], addr: str = ""
    ) -> int:
        """Answer /metrics, /healthz (and /livez) and /readyz on `port` (0: any free one)."""

        def alive() -> str | None:
            return None if healthy() else "the scheduling loop has stopped"

        def synced() -> str | None:
            return None if ready() else "not ready: caches not filled yet"

        checks = {"/healthz": alive, "/livez": alive, "/readyz": synced}
        return self._probes.serve(port, addr, checks)

    def shutdown(self) -> None:
        self._probes.shutdown()


# --- what the scheduler sees of the cluster's devices ----------------------------------------


@dataclass
class DriverFigures:
    devices: int = 0
    idle: int = 0
    fragmented: float = 0.0  # in devices


@dataclass
class _Unit:
    """One device as the figures count it: a device, or a counter set (a partitionable
    GPU) with the devices that draw on it."""

    driver: str
    free: int  # milli
    idle: bool
    model: str


def cluster_figures(scheduler: Scheduler) -> dict[str, DriverFigures]:
    """Per driver: the devices on the nodes `scheduler` owns, the idle ones, and FGD's
    fragmentation of them (`node_fragmentation` per node, in milli, summed, in devices),
    under the workload mix of the scheduler's policy (an FGD policy's primed or observed
    mix; one whole-device task for the others). A device counts 1,000 milli free when no
    claim holds it, 0 when one holds it whole, what its consumed `milli` capacity leaves
    when shared; a partitionable device (counter set) counts once, with what its allocated
    partitions leave of its counters (the mean over counters). The web UI's fragmentation
    page measures the same way."""
    policy = scheduler.policy
    mix = policy.mix() if isinstance(policy, Fragmentation) else []
    mix = mix or list(DEFAULT_MIX)
    inventory, allocated = scheduler.inventory(), scheduler.allocated()
    out: dict[str, DriverFigures] = {}
    for node in scheduler.nodes():
        info = NodeInfo(node.name, node.metadata.labels)
        units: list[_Unit] = []
        for pool in inventory.pools_for(info, scheduler.features):
            units += _units(pool, allocated)
        if not units:
            continue
        cpu = scheduler.cpu_free(node.name)
        for driver in sorted({u.driver for u in units}):
            mine = [u for u in units if u.driver == driver]
            free = [u.free for u in mine]
            models = frozenset(u.model for u in mine if u.model)
            figures = out.setdefault(driver, DriverFigures())
            figures.devices += len(mine)
            figures.idle += sum(u.idle for u in mine)
            figures.fragmented += node_fragmentation(free, mix, cpu, models) / MILLI
    return out


def _units(pool: Pool, allocated: AllocatedState) -> list[_Unit]:
    units: list[_Unit] = []
    sets: dict[str, list[DeviceEntry]] = {}
    for entry, usable in pool.devices:
        if not usable or not entry.node_local:
            continue
        if entry.consumes:
            sets.setdefault(entry.consumes[0][0], []).append(entry)
            continue
        ref = entry.ref
        if ref in allocated.devices:
            free = 0
        elif ref in allocated.shared:
            used = allocated.consumed(ref).get(f"{ref.driver}/{MILLI_CAPACITY}")
            free = max(MILLI - used // 10**9, 0) if used is not None else 0
        else:
            free = MILLI
        idle = free == MILLI and not taint_blocks(entry, ())
        units.append(_Unit(ref.driver, free, idle, _model(entry)))
    for set_name, entries in sorted(sets.items()):
        total = pool.counter_sets.get(set_name, {})
        left = dict(total)
        every = [*(e for e, _ in pool.devices), *pool.other_devices]
        held = False
        for entry in every:
            if not allocated.is_allocated(entry.ref):
                continue
            for name, counters in entry.consumes:
                if name == set_name:
                    held = True
                    for counter, amount in counters:
                        left[counter] = left.get(counter, 0) - amount
        ratios = [1 - left.get(c, 0) / t for c, t in total.items() if t > 0]
        fill = min(max(sum(ratios) / len(ratios), 0.0), 1.0) if ratios else float(held)
        idle = not held and not any(taint_blocks(e, ()) for e in entries)
        units.append(
            _Unit(entries[0].ref.driver, round((1 - fill) * MILLI), idle, _model(entries[0]))
        )
    return units


def _model(entry: DeviceEntry) -> str:
    tagged = entry.attribute(f"{entry.ref.driver}/productName")
    return str(tagged[1]) if isinstance(tagged, tuple) else ""
