"""Fixtures of the node-agent tests: a real SqliteStore, short socket dirs, claims, devices."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.core import Node
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import (
    AllocationResult,
    Device,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceAttribute,
    DeviceClaim,
    DeviceRequest,
    DeviceRequestAllocationResult,
    ExactDeviceRequest,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimStatus,
)
from kubedra.catalog.inventory import DriverInventory
from kubedra.cluster.rest import Unreachable
from kubedra.cluster.sqlite import SqliteStore
from kubedra.driver.kubelet import PluginPaths
from kubedra.driver.logs import LOGGER_NAME
from kubedra.driver.metrics import DriverMetrics
from kubedra.driver.prepare import DeviceState
from kubedra.driver.publisher import publish
from kubedra.driver.server import PluginServer
from kubedra.driver.status import StatusWriter

from .driverproc import short_tempdir

DATA = Path(__file__).parent / "data"
GPU = "gpu.nvidia.com"
NODE = "node-1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "state.db")
    yield s
    s.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with short_tempdir() as path:
        yield path


def make_node(store: SqliteStore, name: str) -> Node:
    return store.create(Node(metadata=ObjectMeta(name=name)))


def gpu_devices(count: int, node: str = "node-1") -> tuple[Device, ...]:
    return tuple(
        Device(
            name=f"gpu-{i}",
            attributes={
                "type": DeviceAttribute(string="gpu"),
                "uuid": DeviceAttribute(string=f"GPU-{node}-{i:04d}"),
                "minor": DeviceAttribute(int_=i),
            },
        )
        for i in range(count)
    )


def gpu_inventory(count: int, node: str = "node-1") -> DriverInventory:
    return DriverInventory(GPU, gpu_devices(count, node))


def make_claim(
    store: SqliteStore,
    name: str,
    devices: list[tuple[str, str, str]] | None,
    *,
    driver: str = GPU,
    config: Sequence[tuple[tuple[str, ...], dict[str, Any]]] = (),
    namespace: str = "default",
) -> ResourceClaim:
    """A claim with status.allocation of `devices` = (request, pool, device) (None: unallocated)."""
    requests = sorted({r for r, _, _ in devices or []}) or ["gpu"]
    claim = store.create(
        ResourceClaim(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=ResourceClaimSpec(
                devices=DeviceClaim(
                    requests=tuple(
                        DeviceRequest(name=r, exactly=ExactDeviceRequest(device_class_name=driver))
                        for r in requests
                    )
                )
            ),
        )
    )
    if devices is None:
        return claim
    allocation = AllocationResult(
        devices=DeviceAllocationResult(
            results=tuple(
                DeviceRequestAllocationResult(request=r, driver=driver, pool=p, device=d)
                for r, p, d in devices
            ),
            config=tuple(
                DeviceAllocationConfiguration(
                    source="FromClaim",
                    requests=reqs,
                    opaque=OpaqueDeviceConfiguration(driver=driver, parameters=params),
                )
                for reqs, params in config
            ),
        )
    )
    from msgspec.structs import replace

    return store.update_status(replace(claim, status=ResourceClaimStatus(allocation=allocation)))


def checkpoint_claims(plugin_dir: Path) -> dict[str, Any]:
    """The prepared claims in a checkpoint file, read as plain JSON (what an operator sees)."""
    envelope = json.loads((plugin_dir / "checkpoint.json").read_text())
    assert envelope["kind"] == "KubedraDriverCheckpoint" and envelope["version"] == 2
    return dict(envelope["data"]["preparedClaims"])


class FlakyStore(SqliteStore):
    """The embedded store behind an API server that can go away: while `down` is set, every
    call fails as KubeStore's do when the server cannot be reached (`refused` counts them)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.down = threading.Event()
        self.refused = 0

    def _gate(self, verb: str) -> None:
        if self.down.is_set():
            self.refused += 1
            raise Unreachable(
                f"cannot reach the API server https://127.0.0.1:1 ({verb}): connection refused"
            )

    def get(self, cls: Any, name: str, namespace: str = "default") -> Any:
        self._gate(f"get {cls.KIND}")
        return super().get(cls, name, namespace)

    def list(self, cls: Any, *args: Any, **kwargs: Any) -> Any:
        self._gate(f"list {cls.KIND}")
        return super().list(cls, *args, **kwargs)

    def create(self, obj: Any) -> Any:
        self._gate("create")
        return super().create(obj)

    def update(self, obj: Any) -> Any:
        self._gate("update")
        return super().update(obj)

    def update_status(self, obj: Any) -> Any:
        self._gate("update status")
        return super().update_status(obj)

    def delete(self, cls: Any, name: str, namespace: str = "default") -> Any:
        self._gate("delete")
        return super().delete(cls, name, namespace)


class Agent:
    """A driver process: DeviceState + PluginServer + StatusWriter on <root>/plugins...
    (restartable)."""

    def __init__(self, store: SqliteStore, root: Path, cdi: Path) -> None:
        self.store, self.root, self.cdi = store, root, cdi
        self.paths = PluginPaths.for_driver(GPU, root)
        self.server: PluginServer | None = None

    def start(self) -> Agent:
        self.metrics = DriverMetrics(GPU, NODE)
        self.statuses = StatusWriter(self.store, GPU, initial=0.01, cap=0.05)
        self.state = DeviceState(
            self.store, GPU, NODE, self.paths.plugin_dir, self.cdi, self.metrics,
            statuses=self.statuses, lock_timeout=5,
        )  # fmt: skip
        self.statuses.start().enqueue_all(self.state.prepared)
        self.state.set_devices(gpu_inventory(8).devices)
        self.server = PluginServer(self.state, self.paths)
        self.server.start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.stop()
            self.server = None
            self.statuses.stop()
            self.state.close()


@pytest.fixture
def agent(store: SqliteStore, short_dir: Path) -> Iterator[Agent]:
    """A started agent on node-1 with 8 published GPUs (not yet registered)."""
    make_node(store, NODE)
    publish(store, gpu_inventory(8), NODE)
    agent = Agent(store, short_dir / "kubelet", short_dir / "cdi").start()
    yield agent
    agent.stop()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def driver_log() -> Iterator[list[logging.LogRecord]]:
    """The driver's log records (whatever handlers and propagation are configured)."""
    handler, logger = _Records(), logging.getLogger(LOGGER_NAME)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler.records
    logger.removeHandler(handler)
    logger.setLevel(level)
