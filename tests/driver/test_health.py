"""A sick GPU is tainted, its pods are told: faults injected into a running driver (the
simulated backend, `kubedra driver fault`) become taints on its published ResourceSlice
within a second, NoExecute ones make the eviction controller evict the pods on the device,
and recovery removes the taint."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cli.cluster import create_nodes
from kubedra.cluster import SqliteStore
from kubedra.controllers.taint_eviction import DeviceTaintEvictionController
from kubedra.driver import faults
from kubedra.driver.health import Fault, FaultKind, HealthState, parse_effects
from kubedra.errors import NotFound
from kubedra.scheduler.scheduler import Scheduler
from tests.driver.driverproc import GPU, DriverProcess, short_tempdir
from tests.scheduler.cluster import GPU_CLASS, gpu_pod, gpu_template


def test_faults_become_taints_with_their_severitys_effect() -> None:
    health = HealthState(GPU, parse_effects("degraded=NoSchedule"))
    lost = Fault(FaultKind.LOST, "", "gone")
    hot = Fault(FaultKind.THERMAL, "slowdown", "hot")
    assert health.update(["gpu-0", "gpu-1"], {"gpu-0": [lost, hot]}) == ["gpu-0", "gpu-1"]
    taints = {t.key: t for t in health.taints("gpu-0")}
    assert taints[f"{GPU}/gpu-lost"].effect == "NoExecute"  # failed: the default
    assert taints[f"{GPU}/thermal"].effect == "NoSchedule" and taints[f"{GPU}/thermal"].value == "slowdown"
    first = taints[f"{GPU}/gpu-lost"].time_added
    assert first is not None and health.taints("gpu-1") == ()
    time.sleep(1.1)
    assert health.update(["gpu-0", "gpu-1"], {"gpu-0": [lost]}) == ["gpu-0"]  # cooled down
    (still,) = health.taints("gpu-0")
    assert still.time_added == first  # the same fault keeps the time it was first seen
    assert health.update(["gpu-0", "gpu-1"], {}) == ["gpu-0"] and health.taints("gpu-0") == ()
    assert health.update(["gpu-0", "gpu-1"], {}) == []  # nothing changed: nothing to publish


def test_effects_are_checked() -> None:
    assert parse_effects("failed=None") == {"degraded": "NoSchedule", "failed": "None"}
    with pytest.raises(ValueError, match="expected degraded=EFFECT or failed=EFFECT"):
        parse_effects("failed=Evict")


@pytest.fixture
def driver() -> Iterator[DriverProcess]:
    with short_tempdir() as folder:
        process = DriverProcess(folder / "state.db", folder / "kubelet", folder / "cdi")
        yield process.start()
        process.stop()


def inject(driver: DriverProcess, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubedra", "driver", "fault", "--driver", GPU, "--node",
         driver.node, "--plugin-root", str(driver.root), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def taints(store: SqliteStore, device: str) -> dict[str, str]:
    for rs in store.list(ResourceSlice):
        for d in rs.spec.devices:
            if d.name == device:
                return {t.key: t.effect or "" for t in d.taints}
    raise AssertionError(f"{device} is not published")


def wait_for(check: object, timeout: float = 5.0) -> float:
    started = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - started < timeout, "timed out"
        time.sleep(0.02)
    return time.monotonic() - started


def test_an_injected_fault_taints_within_a_second_evicts_and_recovers(driver: DriverProcess) -> None:
    store = SqliteStore(driver.store)
    gpu_template(store, "one", 1, constraint=None)
    _gpu_class(store)
    gpu_pod(store, "trainer", template="one")
    (placed,) = Scheduler(store).run_once()
    device = placed.devices[0].rsplit("/", 1)[1]
    inject(driver, "--device", device, "--kind", "lost")
    took = wait_for(lambda: taints(store, device) == {f"{GPU}/gpu-lost": "NoExecute"})
    assert took < 1.0, took
    assert "device unhealthy" in driver.log_text()
    # The eviction controller evicts the pod on the dead GPU; the scheduler keeps new ones off.
    DeviceTaintEvictionController(store).sync()
    wait_for(lambda: _gone(store, "trainer"))
    gpu_pod(store, "next", template="one")
    Scheduler(store).run_once()
    assert device not in str(_devices_of(store, "next"))
    # Mended: the taint goes.
    inject(driver, "--device", device, "--clear")
    assert wait_for(lambda: taints(store, device) == {}) < 1.0
    inject(driver, "--device", "gpu-1", "--kind", "thermal")
    wait_for(lambda: taints(store, "gpu-1") == {f"{GPU}/thermal": "NoSchedule"})


def _gpu_class(store: SqliteStore) -> None:
    store.create(decode_object(GPU_CLASS).obj)


def _gone(store: SqliteStore, name: str) -> bool:
    try:
        pod = store.get(Pod, name)
    except NotFound:
        return True
    return pod.metadata.deletion_timestamp is not None


def _devices_of(store: SqliteStore, pod: str) -> list[str]:
    out = []
    for claim in store.list(ResourceClaim):
        if claim.name.startswith(f"{pod}-") and claim.status and claim.status.allocation:
            out += [r.device for r in claim.status.allocation.devices.results]
    return out


def test_fault_reaches_only_the_named_nodes_driver(tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    folder.mkdir()
    faults.inject(folder, "n1", "gpu-0", FaultKind.ECC)
    assert faults.read(folder, "n1")["gpu-0"][0].kind is FaultKind.ECC
    assert faults.read(folder, "n2") == {}
    with pytest.raises(ValueError, match="holds the faults of node n1, not n2"):
        faults.inject(folder, "n2", "gpu-0", FaultKind.ECC)
    with pytest.raises(ValueError, match="does not exist"):
        faults.inject(tmp_path / "nope", "n1", "gpu-0", FaultKind.ECC)


def test_explain_names_the_unhealthy_devices_a_pod_waits_for(tmp_path: Path) -> None:
    """A pod that waits because every device it could use is tainted unhealthy is told so,
    and which devices carry which taint."""
    store = SqliteStore(tmp_path / "state.db")
    create_nodes(store, [("h100x8", 1)])
    rule = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
            "metadata": {"name": "lost"},
            "spec": {"deviceSelector": {"driver": GPU, "device": "gpu-0"},
                     "taint": {"key": f"{GPU}/gpu-lost", "effect": "NoExecute"}}}  # fmt: skip
    store.create(decode_object(rule).obj)
    store.create(decode_object(GPU_CLASS).obj)
    gpu_template(store, "all8", 8)
    gpu_pod(store, "big", template="all8")
    Scheduler(store).run_once()
    run = subprocess.run([sys.executable, "-m", "kubedra", "--store", str(tmp_path / "state.db"),
                          "explain", "pod", "big"], capture_output=True, text=True, check=False)  # fmt: skip
    assert "7 of 8 matching devices untainted" in run.stdout or "have a taint" in run.stdout, run.stdout
    assert f"gpu-0 ({GPU}/gpu-lost:NoExecute)" in run.stdout
