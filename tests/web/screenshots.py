"""The dashboard's screenshots in docs/images, taken as anyone would: plain headless
Chromium (`chromium --headless --screenshot URL`), no script run by the test, no wait for
one. The pages are rendered by the server, so the first paint is the page.

    .venv/bin/python -m tests.web.screenshots [DIR]     # default: docs/images

The stores: `kubedra demo` with the extended-resource and MIG examples applied and
scheduled (every page but the heat map), and 300 H100 nodes whose GPUs are held 0 to 8
per node (the heat map, the fleet's default above 200 nodes). For docs/images the demo has
one GPU with a critical Xid (its driver's health taint), and each GPU and TPU node a driver
metrics endpoint serving the simulated backend's figures (`--device-metrics`). The browser tests use the
same stores and the same Chromium calls (`tests/web/test_pages.py`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, start_http_server

from kubedra.api.codec import decode_object
from kubedra.api.resource import Device, DeviceTaint, ResourceClaim, ResourceSlice
from kubedra.cli.cluster import create_nodes
from kubedra.cluster import SqliteStore
from kubedra.cluster.store import atomic
from tests.conftest import REPO
from tests.web.browser import CHROMIUM, chromium_args
from tests.web.conftest import UiProcess

WINDOW = (1280, 860)
HEATMAP_NODES = 300
# page file -> the path on the demo store's `kubedra ui`
DEMO_PAGES = {
    "ui-fleet.png": "/fleet",
    "ui-workloads.png": "/workloads",
    "ui-claim.png": "/claims/default/vllm-gpu-claim",
    "ui-pending.png": "/pending",
    "ui-fragmentation.png": "/fragmentation",
}
HEATMAP_PAGE = ("ui-fleet-heatmap.png", "/fleet")


def kubedra(store: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kubedra", "--store", str(store), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"kubedra {' '.join(args)}: {done.stderr}")
    return done.stdout


def demo_store(store: Path) -> Path:
    """`kubedra demo` (6 nodes: H100, L4, A100 with MIG, TPU; the vLLM pod placed, the
    16-GPU trainer pending), then a legacy `nvidia.com/gpu: 1` pod (a claim made for its
    extended resource) and a MIG notebook, scheduled."""
    kubedra(store, "demo")
    for example in ("extended-resource", "mig-1g10gb"):
        kubedra(store, "apply", "-f", str(REPO / "examples" / example / "manifests.yaml"))
    kubedra(store, "schedule")
    return store


def heatmap_store(store: Path, nodes: int = HEATMAP_NODES) -> Path:
    """`nodes` H100 nodes, node i with (7·i mod 9) of its 8 GPUs held by claims."""
    db = SqliteStore(store)
    create_nodes(db, [("h100x8", nodes)])
    slices = db.list(ResourceSlice, field_selector="spec.driver=gpu.nvidia.com")
    with atomic(db):
        for i, s in enumerate(sorted(slices, key=lambda s: int(s.spec.pool.name.rsplit("-", 1)[1]))):
            for device in s.spec.devices[: 7 * i % 9]:
                hold(db, f"n{i}-{device.name}", s.spec.pool.name, device.name)
    db.close()
    return store


def break_gpu(store: Path, pool: str = "h100x8-1", device: str = "gpu-3") -> None:
    """The taint the driver's health monitor puts on a GPU with a critical Xid."""
    db = SqliteStore(store)
    for rs in db.list(ResourceSlice, field_selector="spec.driver=gpu.nvidia.com"):
        if rs.spec.pool.name != pool or all(d.name != device for d in rs.spec.devices):
            continue
        xid = DeviceTaint(key="gpu.nvidia.com/xid", value="74", effect="NoExecute")
        devices = tuple(
            msgspec.structs.replace(d, taints=(*d.taints, xid)) if d.name == device else d
            for d in rs.spec.devices
        )
        db.update(msgspec.structs.replace(rs, spec=msgspec.structs.replace(rs.spec, devices=devices)))
    db.close()


class _NoClaims:
    prepared: dict[str, Any] = {}  # noqa: RUF012 (read only)
    consumers: dict[str, tuple[str, ...]] = {}  # noqa: RUF012


@contextlib.contextmanager
def driver_metrics(store: Path) -> Iterator[list[str]]:
    """A /metrics endpoint per GPU and TPU node of the store, as `kubedra driver run
    --backend simulated --metrics-port` serves it: the driver's own collector over the
    simulated backend's figures, a device busy while a claim holds it. Yields the URLs."""
    from kubedra.driver.backends.simulated import simulated_samples
    from kubedra.driver.devicemetrics import DeviceMetrics, DeviceSample

    db = SqliteStore(store)
    pools: dict[tuple[str, str, str], list[Device]] = {}  # (driver, pool, node) -> devices
    for rs in db.list(ResourceSlice):
        if rs.spec.driver in ("gpu.nvidia.com", "tpu.google.com") and rs.spec.node_name:
            key = (rs.spec.driver, rs.spec.pool.name, rs.spec.node_name)
            pools.setdefault(key, []).extend(rs.spec.devices)
    held = {(r.driver, r.pool, r.device) for c in db.list(ResourceClaim)
            for r in (c.status.allocation.devices.results if c.status and c.status.allocation else ())}  # fmt: skip
    db.close()
    servers = []
    try:
        for (driver, pool, node), devices in sorted(pools.items()):
            busy = {d.name for d in devices if (driver, pool, d.name) in held}

            def sample(
                in_use: Collection[str], devices: Sequence[Device] = devices, busy: set[str] = busy
            ) -> Sequence[DeviceSample]:
                return simulated_samples(devices, busy, {})

            registry = CollectorRegistry()
            DeviceMetrics(driver, node, sample, _NoClaims(), pool=pool).register(registry).sample()
            server, _ = start_http_server(0, "127.0.0.1", registry)
            servers.append(server)
        yield [f"http://127.0.0.1:{s.server_port}/metrics" for s in servers]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def hold(db: SqliteStore, name: str, pool: str, device: str) -> None:
    result = {"request": "r", "driver": "gpu.nvidia.com", "pool": pool, "device": device}
    claim = decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }).obj  # fmt: skip
    assert isinstance(claim, ResourceClaim)
    created = db.create(claim)
    db.update_status(msgspec.structs.replace(created, status=claim.status))


def chromium(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Plain headless Chromium, a fresh profile, the command line's own flags only."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, *chromium_args(), f"--user-data-dir={profile}", "--hide-scrollbars", *args],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip


def screenshot(
    url: str, out: Path, window: tuple[int, int] = WINDOW, flags: tuple[str, ...] = ()
) -> Path:
    """`chromium --headless --screenshot=OUT URL`: what the first load shows."""
    done = chromium(*flags, f"--window-size={window[0]},{window[1]}", f"--screenshot={out}", url)
    if not out.is_file():
        raise RuntimeError(f"no screenshot of {url}: {done.stderr[-2000:]}")
    return out


def wait_for_figures(ui: UiProcess, timeout: float = 30) -> None:
    """Until the first scrape of every endpoint is in."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(ui.url + "api/fleet", timeout=10) as answer:
            endpoints = json.load(answer)["deviceMetrics"]["endpoints"]
        if all(e["ok"] for e in endpoints):
            return
        time.sleep(0.2)
    raise RuntimeError(f"device metrics not scraped: {endpoints}")


def take(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    shots = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)  # the stores named relative to it: the footer shows `demo.db`
        demo_store(home / "demo.db")
        break_gpu(home / "demo.db")
        with driver_metrics(home / "demo.db") as urls:
            options = tuple(o for url in urls for o in ("--device-metrics", url))
            # figures: the checkout's docs/figures
            ui = UiProcess("--store", "demo.db", cwd=home, options=options)
            try:
                wait_for_figures(ui)
                for name, page in DEMO_PAGES.items():
                    shots.append(screenshot(ui.url + page.lstrip("/"), folder / name))
            finally:
                ui.stop()
        heatmap_store(home / "fleet-300.db")
        ui = UiProcess("--store", "fleet-300.db", cwd=home)
        try:
            name, page = HEATMAP_PAGE
            shots.append(screenshot(ui.url + page.lstrip("/"), folder / name))
        finally:
            ui.stop()
    return shots


if __name__ == "__main__":
    for shot in take(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "images"):
        print(shot)
