"""Prometheus metrics of `kubedra scheduler run`, and its health endpoints.

Named after kube-scheduler's where there is one (schedule_attempts_total by result,
scheduling_attempt_duration_seconds, pending_pods by queue), in a registry of its own.
One HTTP server answers `/metrics`, `/healthz` (the scheduling loop is alive) and
`/readyz` (its caches are filled: a standby is ready too, it can take over at once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from kubedra.cluster.rest import Request

# A scheduling attempt: a millisecond for a small cluster to seconds when the API is slow.
_ATTEMPT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


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
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

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
        """Answer /metrics, /healthz and /readyz on `port` (0: any free one); the port."""
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path in ("/healthz", "/livez"):
                return _probe(start, healthy())
            if path == "/readyz":
                return _probe(start, ready())
            if path == "/metrics":
                result: Iterable[bytes] = metrics(environ, start)
                return result
            start("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]

        server = make_server(addr, port, app, _ThreadingServer, handler_class=_Quiet)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True, name="metrics")
        self._thread.start()
        return int(server.server_port)

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _probe(start: StartResponse, ok: bool) -> list[bytes]:
    start("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
    return [b"ok\n" if ok else b"not ready\n"]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass
