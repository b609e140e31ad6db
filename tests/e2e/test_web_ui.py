"""`kubedra ui` on upstream's control plane: the same views over KubeStore's watch.

The slices come from `kubedra cluster create`, the seed through kubectl, kube-scheduler
allocates; the dashboard (pointed at the cluster by KUBECONFIG) shows the allocated GPU and
follows a node added afterwards without a restart.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from kubedra.devcluster.harness import DevCluster
from tests.conftest import REPO
from tests.e2e.conftest import run_kubedra
from tests.web.conftest import UiProcess

SEED = REPO / "examples" / "seed"


@pytest.fixture(scope="module")
def ui(cluster: DevCluster) -> Iterator[UiProcess]:
    created = run_kubedra(cluster, "cluster", "create", "--node-profile", "h100x8=1")
    assert created.returncode == 0, created.stderr
    converted = run_kubedra(cluster, "convert", "-f", str(SEED))
    assert converted.returncode == 0, converted.stderr
    cluster.kubectl("apply", "-f", "-", input=converted.stdout)
    running = UiProcess("--kubeconfig", str(cluster.kubeconfig))
    yield running
    running.stop()


def get(ui: UiProcess, path: str) -> Any:
    with urllib.request.urlopen(ui.url + path.lstrip("/"), timeout=30) as answer:
        return json.load(answer)


def wait_for(what: str, check: Any, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_the_fleet_shows_what_kube_scheduler_allocated(ui: UiProcess) -> None:
    assert get(ui, "/api/status")["backend"].startswith("cluster https://")
    wait_for("the seed claim's allocation", lambda: get(ui, "/api/fleet")["summary"]["allocated"] == 1)
    fleet = get(ui, "/api/fleet?class=high-memory-gpu")
    assert fleet["summary"]["nodes"] == 1 and fleet["summary"]["devices"] == 12
    assert fleet["summary"]["admitted"] == 8
    claims = get(ui, "/api/claims")["claims"]
    assert [(c["name"], c["status"]) for c in claims] == [("vllm-gpu-claim", "reserved")]
    assert get(ui, "/api/claims/default/vllm-gpu-claim")["devices"][0]["node"] == "h100x8-0"


def test_a_node_added_later_reaches_the_views(ui: UiProcess, cluster: DevCluster) -> None:
    before = get(ui, "/api/status")["version"]
    created = run_kubedra(cluster, "cluster", "create", "--node-profile", "l4x4=1")
    assert created.returncode == 0, created.stderr
    wait_for("the new node in the fleet", lambda: get(ui, "/api/fleet")["summary"]["nodes"] == 2)
    assert get(ui, "/api/status")["version"] > before
    assert get(ui, "/api/fragmentation")["now"]["accelerators"] == 12

