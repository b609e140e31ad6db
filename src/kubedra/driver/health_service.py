"""The kubelet's device health stream (KEP-4680, `v1.DRAResourceHealth`), served beside the
DRA service on the plugin's socket.

The kubelet opens `NodeWatchResources` once per registered plugin and keeps it: the first
message has every device's health, then each message the devices whose health changed. The
kubelet marks a device Unknown when it hears nothing of it for `health_check_timeout_seconds`,
so quiet devices are repeated every `HEARTBEAT_S` (well inside the kubelet's default). A pod
using an unhealthy device shows it in `status.containerStatuses[].allocatedResourcesStatus`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kubedra.driver.grpc_api import health_v1
from kubedra.driver.health import HealthState

SERVICE = "v1.DRAResourceHealth"  # what the plugin advertises at registration
HEARTBEAT_S = 30.0
TIMEOUT_S = 90  # health_check_timeout_seconds: three heartbeats missed


class HealthStream:
    """`NodeWatchResources` over the driver's `HealthState` (its pool is the node)."""

    def __init__(self, state: HealthState, pool: str, devices: Callable[[], Sequence[str]]) -> None:
        self.state, self.pool, self.devices = state, pool, devices

    def NodeWatchResources(self, request: Any, context: Any) -> Iterator[Any]:
        version = self.state.version
        yield self._message(self.devices())
        sent = time.monotonic()
        while context.is_active():
            newer = self.state.wait_for_change(version, timeout=1.0)
            due = time.monotonic() - sent >= HEARTBEAT_S
            if newer == version and not due:
                continue
            version = newer
            yield self._message(self.devices())  # every device: the kubelet keeps the latest
            sent = time.monotonic()

    def _message(self, names: Sequence[str]) -> Any:
        snapshot = self.state.snapshot()
        devices = []
        for name in names:
            health = snapshot.get(name)
            healthy = health is None or health.healthy
            devices.append(
                health_v1.DeviceHealth(
                    device=health_v1.DeviceIdentifier(pool_name=self.pool, device_name=name),
                    health=health_v1.HEALTHY if healthy else health_v1.UNHEALTHY,
                    last_updated_time=int(health.changed if health else time.time()),
                    health_check_timeout_seconds=TIMEOUT_S,
                    message="" if healthy or health is None else health.message()[:1024],
                )
            )
        return health_v1.NodeWatchResourcesResponse(devices=devices)
