"""The dashboard's screenshots in docs/images, taken as anyone would: plain headless
Chromium (`chromium --headless --screenshot URL`), no script run by the test, no wait for
one. The pages are rendered by the server, so the first paint is the page.

    .venv/bin/python -m tests.web.screenshots [DIR]     # default: docs/images

The stores: `kubedra demo` with the extended-resource and MIG examples applied and
scheduled (every page but the heat map), and 300 H100 nodes whose GPUs are held 0 to 8
per node (the heat map, the fleet's default above 200 nodes). The browser tests use the
same stores and the same Chromium calls (`tests/web/test_pages.py`).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

from kubedra.api.codec import decode_object
from kubedra.api.resource import ResourceClaim, ResourceSlice
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


def take(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    shots = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)  # the stores named relative to it: the footer shows `demo.db`
        demo_store(home / "demo.db")
        ui = UiProcess("--store", "demo.db", cwd=home)  # figures: the checkout's docs/figures
        try:
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
