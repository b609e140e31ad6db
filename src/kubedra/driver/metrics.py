"""Prometheus metrics of the node agent, in a registry of its own (several agents per process
in tests and simulations must not collide in the global one), served over HTTP with the
agent's health checks (`/healthz`, `/readyz`: the DaemonSet's probes)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubedra.probes import Check, ProbeServer

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
        self._probes = ProbeServer(self.registry)

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
        problem) on `port` (0 = any free port); returns the port."""
        return self._probes.serve(port, addr, checks)

    def shutdown(self) -> None:
        self._probes.shutdown()
