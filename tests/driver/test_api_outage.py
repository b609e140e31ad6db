"""The node agent without its API server: at start and for a while (the embedded store behind
a switch, `FlakyStore`; tests/e2e/test_driver_faults.py does it to a real API server)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.driver import run_driver
from kubedra.driver.kubelet import KubeletClient, PluginPaths
from kubedra.driver.publisher import list_slices

from .conftest import GPU, FlakyStore, make_claim
from .driverproc import free_port

NODE = "sim-1"


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class Driver:
    """`run_driver` on a thread, as `kubedra driver run` runs it."""

    def __init__(self, store: FlakyStore, root: Path) -> None:
        self.store, self.root = store, root
        self.paths = PluginPaths.for_driver(GPU, root / "kubelet")
        self.port = free_port()

    def __enter__(self) -> Driver:
        self.stop, self.ready = threading.Event(), threading.Event()
        self.thread = threading.Thread(
            target=run_driver,
            args=(self.store, GPU, NODE, "simulated", "h100x8", self.root / "kubelet",
                  self.root / "cdi", self.port, self.stop),
            kwargs={"resync_seconds": 0.2, "ready": self.ready},
            daemon=True,
        )  # fmt: skip
        self.thread.start()
        assert self.ready.wait(30), "the driver did not start serving"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def prepare(self, *claims: ResourceClaim) -> dict[str, tuple[list[str], str]]:
        with KubeletClient(self.paths.registration_socket, timeout=10) as kubelet:
            kubelet.register()
            answer = kubelet.prepare([("default", c.metadata.uid, c.name) for c in claims])
        return {
            uid: ([d.device_name for d in entry.devices], entry.error)
            for uid, entry in answer.claims.items()
        }


@pytest.fixture
def flaky(short_dir: Path) -> Iterator[FlakyStore]:
    store = FlakyStore(short_dir / "state.db")
    yield store
    store.close()


def _lines(records, message: str) -> int:
    return sum(r.getMessage() == message for r in records)


def test_driver_starts_without_its_api_server_and_catches_up(flaky, short_dir, driver_log):
    earlier = make_claim(flaky, "earlier", [("gpu", NODE, "gpu-2")])
    with Driver(flaky, short_dir) as driver:  # the API answers: one claim gets prepared
        assert driver.prepare(earlier)[earlier.metadata.uid] == (["gpu-2"], "")
    later = make_claim(flaky, "later", [("gpu", NODE, "gpu-5")])
    flaky.down.set()
    driver_log.clear()
    with Driver(flaky, short_dir) as driver:  # starts, serves, while the API is away
        answers = driver.prepare(earlier, later)
        assert answers[earlier.metadata.uid] == (["gpu-2"], "")  # from the checkpoint
        devices, error = answers[later.metadata.uid]
        assert devices == [] and error.startswith(
            "cannot read ResourceClaim default/later: cannot reach the API server"
        )
        while flaky.refused < 20:  # publishing and the status writer keep retrying
            threading.Event().wait(0.05)
        assert _get(driver.port, "/healthz") == (200, "ok\n")
        assert _get(driver.port, "/readyz") == (503, "ResourceSlices not published yet\n")
        assert _lines(driver_log, "publishing ResourceSlices failing, retrying with backoff") == 1
        assert not any(r.exc_info for r in driver_log)  # an outage is no bug: no tracebacks

        flaky.down.clear()
        deadline = threading.Event()
        for _ in range(100):
            if _get(driver.port, "/readyz")[0] == 200:
                break
            deadline.wait(0.1)
        assert _get(driver.port, "/readyz") == (200, "ok\n")
        assert driver.prepare(later)[later.metadata.uid] == (["gpu-5"], "")
    assert _lines(driver_log, "publishing ResourceSlices failing, retrying with backoff") == 1
    assert _lines(driver_log, "publishing ResourceSlices working again") == 1
    assert [s.name for s in list_slices(flaky, GPU, NODE)] == [f"{NODE}-{GPU}-0"]
    assert flaky.get(ResourceSlice, f"{NODE}-{GPU}-0").spec.pool.resource_slice_count == 1
    for name in ("earlier", "later"):
        status = flaky.get(ResourceClaim, name).status
        assert status is not None and [d.driver for d in status.devices] == [GPU]


def test_health_fails_when_the_plugin_sockets_do_not_answer(flaky, short_dir):
    with Driver(flaky, short_dir) as driver:
        assert _get(driver.port, "/healthz") == (200, "ok\n")
        assert _get(driver.port, "/metrics")[1].count("kubedra_driver_published_devices{") == 1
        driver.paths.dra_socket.unlink()  # the kubelet could no longer reach the plugin
        code, body = _get(driver.port, "/healthz")
        assert code == 503 and body.startswith(f"{driver.paths.dra_socket}: UNAVAILABLE")
        assert _get(driver.port, "/nothing")[0] == 404
