"""Fixtures of the node-agent tests: a real SqliteStore, short socket dirs, claims, devices."""

from __future__ import annotations

import json
import shutil
import tempfile
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
from kubedra.cluster.sqlite import SqliteStore

DATA = Path(__file__).parent / "data"
GPU = "gpu.nvidia.com"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "state.db")
    yield s
    s.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory for unix sockets (sun_path is 108 bytes; pytest's tmp_path can be long)."""
    path = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


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
