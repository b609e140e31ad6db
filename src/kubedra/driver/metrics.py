"""Prometheus metrics of the node agent, in a registry of its own (several agents per process
in tests and simulations must not collide in the global one), served over HTTP with the
agent's health checks (`/healthz`, `/readyz`: the DaemonSet's probes)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

Check = Callable[[], "str | None"]  # a problem, or None when all is well

# Preparing is a store read plus a few small files: sub-millisecond to a few seconds.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class DriverMetrics:
    def __init__(self, driver: str, node: str, registry: CollectorRegistry | None = None) -> None:
        self.driver, self.node = driver, node
        self.registry = registry if registry is not None else CollectorRegistry()
        labels = ("driver", "node")
        self._claim_seconds = Histogram(
            "kubedra_driver_claim_operation_duration_seconds",
            "Time to prepare or unprepare one ResourceClaim (NodePrepareResources and "
            "NodeUnprepareResources entries), including failures.",
            (*labels, "operation"),
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._claim_errors = Counter(
            "kubedra_driver_claim_errors",
            "Claims whose prepare or unprepare failed (reported in the per-claim error).",
            (*labels, "operation"),
            registry=self.registry,
        )
        self._prepared = Gauge(
            "kubedra_driver_prepared_claims",
            "ResourceClaims currently prepared on this node (checkpointed).",
            labels,
            registry=self.registry,
        )
        self._devices = Gauge(
            "kubedra_driver_published_devices",
            "Devices in the ResourceSlices this driver publishes for this node.",
            labels,
            registry=self.registry,
        )
        self._slices = Gauge(
            "kubedra_driver_published_slices",
            "ResourceSlices of this driver's pool on this node.",
            labels,
            registry=self.registry,
        )
        self._generation = Gauge(
            "kubedra_driver_pool_generation",
            "spec.pool.generation of the published pool.",
            labels,
            registry=self.registry,
        )
        self._recoveries = Counter(
            "kubedra_driver_checkpoint_recoveries",
            "Starts that found the checkpoint unusable (reason: unreadable, checksum, version, "
            "foreign, invalid, missing, stale) and rebuilt the prepared claims from disk.",
            (*labels, "reason"),
            registry=self.registry,
        )
        self._reconciled = Counter(
            "kubedra_driver_reconcile_actions",
            "Files changed at start so that the checkpoint and the CDI directory agree "
            "(action: temporaries_removed, orphan_specs_removed, specs_written, "
            "host_dirs_removed).",
            (*labels, "action"),
            registry=self.registry,
        )
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def observe_claim(self, operation: str, seconds: float, failed: bool) -> None:
        self._claim_seconds.labels(self.driver, self.node, operation).observe(seconds)
        if failed:
            self._claim_errors.labels(self.driver, self.node, operation).inc()

    def checkpoint_recovered(self, reason: str) -> None:
        self._recoveries.labels(self.driver, self.node, reason).inc()

    def reconciled(self, action: str, count: int) -> None:
        self._reconciled.labels(self.driver, self.node, action).inc(count)

    def set_prepared(self, count: int) -> None:
        self._prepared.labels(self.driver, self.node).set(count)

    def set_published(self, devices: int, slices: int, generation: int) -> None:
        self._devices.labels(self.driver, self.node).set(devices)
        self._slices.labels(self.driver, self.node).set(slices)
        self._generation.labels(self.driver, self.node).set(generation)

    def value(self, name: str, **labels: str) -> float | None:
        """One sample's current value (tests and status output)."""
        return self.registry.get_sample_value(
            name, {"driver": self.driver, "node": self.node, **labels}
        )

    def serve(self, port: int, addr: str = "0.0.0.0", checks: Mapping[str, Check] = {}) -> int:
        """Serve /metrics and one path per check (`/healthz`: 200 `ok`, or 503 and the
        problem) over HTTP on `port` (0 = any free port); returns the port."""
        server = ThreadingHTTPServer((addr, port), _handler(self.registry, dict(checks)))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
        self._thread.start()
        return int(server.server_port)

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _handler(registry: CollectorRegistry, checks: dict[str, Check]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path in checks:
                problem = checks[path]()
                body = f"{problem}\n" if problem else "ok\n"
                self._answer(503 if problem else 200, body.encode(), "text/plain")
            else:
                self._answer(404, b"not found\n", "text/plain")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds: not worth a log line each

    return Handler
