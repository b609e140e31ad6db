"""Prometheus metrics of `kubedra scheduler run`, and its health endpoints.

Named after kube-scheduler's where there is one (schedule_attempts_total by result,
scheduling_attempt_duration_seconds, pending_pods by queue), in a registry of its own.
One HTTP server answers `/metrics`, `/healthz` (the scheduling loop is alive) and
`/readyz` (its caches are filled: a standby is ready too, it can take over at once).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubedra.cluster.rest import Request
from kubedra.probes import ProbeServer

# A scheduling attempt: a millisecond for a small cluster to seconds when the API is slow.
_ATTEMPT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30)


class SchedulerMetrics:
    def __init__(self, profile: str, registry: CollectorRegistry | None = None) -> None:
        self.profile = profile
        self.registry = registry if registry is not None else CollectorRegistry()
        self.attempts = Counter(
            "kubedra_scheduler_schedule_attempts",
            "Scheduling attempts by result (scheduled, unschedulable, waiting for a claim, "
            "error: a write failed or raced).",
            ("result", "profile"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "kubedra_scheduler_scheduling_attempt_duration_seconds",
            "From the start of a pod's scheduling cycle to the end of its binding cycle.",
            ("result", "profile"),
            buckets=_ATTEMPT_BUCKETS,
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

    def attempt(self, result: str, seconds: float) -> None:
        self.attempts.labels(result, self.profile).inc()
        self.latency.labels(result, self.profile).observe(seconds)

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
