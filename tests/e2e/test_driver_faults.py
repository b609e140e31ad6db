"""The driver on upstream's control plane when things go wrong: kill -9 in the middle of a
prepare, the API server away at start or lost for a minute, the API server restarted."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.errors import NotFound
from tests.driver.driverproc import GPU, DriverProcess, disk_problems, status_problems
from tests.e2e.driver_env import (
    Switch,
    allocated_claim,
    cluster_driver,
    gpu_node,
    short_dir,
    wait_for,
)
from tests.e2e.upstream_kubelet import KubeletRefused, UpstreamKubelet, devices

OUTAGE_SECONDS = 60  # "lost for a minute"


@dataclass
class Env:
    cluster: DevCluster
    kube: KubeStore
    root: Path


@pytest.fixture
def env(cluster: DevCluster) -> Iterator[Env]:
    kube = cluster.store()
    with short_dir() as root:
        yield Env(cluster, kube, root)
    kube.close()


def _status_devices(kube: KubeStore, claim: ResourceClaim) -> list[str]:
    status = kube.get(ResourceClaim, claim.name).status
    return [d.device for d in (status.devices if status else ()) if d.driver == GPU]


def test_kill_9_mid_prepare_leaves_checkpoint_cdi_and_claim_status_in_agreement(
    env: Env,
) -> None:
    node = "kill-0"
    gpu_node(env.kube, node)
    driver = cluster_driver(env.root, node, env.cluster.kubeconfig).start()
    kubelet = UpstreamKubelet(driver.paths.registration_socket, driver.cdi)
    rng = random.Random(19)
    committed: list[int] = []  # claims of the 8 that each kill left prepared
    try:
        calibration = _claims(env.kube, node, "calibration")
        started = time.monotonic()
        assert kubelet.prepare(*calibration)["problems"] == []
        call_seconds = time.monotonic() - started  # kills fall anywhere in such a call
        assert kubelet.unprepare(*calibration)["problems"] == []
        for round_ in range(8):
            claims = _claims(env.kube, node, f"k{round_}")
            answers: list[dict[str, Any]] = []
            call = threading.Thread(target=_prepare_quietly, args=(kubelet, claims, answers))
            call.start()
            time.sleep(rng.uniform(0.0, call_seconds))
            driver.kill()
            call.join(60)
            driver.start()
            prepared, problems = disk_problems(driver.paths.plugin_dir, driver.cdi, node)
            assert problems == [], f"round {round_}: {problems}"
            committed.append(len(prepared))
            assert status_problems(env.kube, prepared) == []
            for claim in claims:  # never committed: no status claims it is ready
                if claim.metadata.uid not in prepared:
                    assert _status_devices(env.kube, claim) == []
            again = kubelet.prepare(*claims)  # a second prepare: the same devices
            assert again["problems"] == []
            for claim in claims:
                if claim.metadata.uid in prepared:
                    kept = prepared[claim.metadata.uid].devices
                    assert [d for _, d, _ in devices(again, claim)] == [d.device_name for d in kept]
            assert kubelet.unprepare(*claims)["problems"] == []
            for claim in claims:
                env.kube.delete(ResourceClaim, claim.name)
        print("claims prepared when killed, per round:", committed)
        assert any(0 < n < 8 for n in committed), "no kill fell in the middle of a prepare"
        assert "Traceback" not in driver.log_text()
    finally:
        driver.stop()


def _claims(kube: KubeStore, node: str, prefix: str) -> list[ResourceClaim]:
    """Eight claims of one GPU each, allocated on `node`."""
    return [allocated_claim(kube, f"{prefix}-{i}", node, [f"gpu-{i}"]) for i in range(8)]


def _prepare_quietly(
    kubelet: UpstreamKubelet, claims: list[ResourceClaim], answers: list[dict[str, Any]]
) -> None:
    with contextlib.suppress(KubeletRefused):  # killed mid-call: the kubelet retries later
        answers.append(kubelet.prepare(*claims))


def test_api_server_away_at_start_and_lost_for_a_minute(env: Env) -> None:
    node = "outage-0"
    gpu_node(env.kube, node)
    assert env.cluster.state is not None
    switch = Switch(("127.0.0.1", env.cluster.state.ports["apiserver"]))
    kubeconfig = _via(env.cluster, switch, env.root / "via-switch.kubeconfig")
    driver = cluster_driver(env.root, node, kubeconfig)
    kubelet = UpstreamKubelet(driver.paths.registration_socket, driver.cdi)
    earlier = allocated_claim(env.kube, "before-outage", node, ["gpu-0"])
    later = allocated_claim(env.kube, "during-outage", node, ["gpu-1"])
    try:
        switch.on()
        driver.start()
        first = kubelet.prepare(earlier)
        assert first["problems"] == []
        driver.stop()

        switch.off()  # the driver starts without its API server ...
        driver.start()
        answer = kubelet.prepare(earlier, later)  # ... and answers what it can
        assert devices(answer, earlier) == devices(first, earlier)
        assert answer["claims"][later.metadata.uid]["error"].startswith(
            "cannot read ResourceClaim default/during-outage: cannot reach the API server"
        )
        slice_name = f"{node}-{GPU}-0"
        env.kube.delete(ResourceSlice, slice_name)  # someone removes the slice meanwhile
        time.sleep(OUTAGE_SECONDS)
        assert driver.healthz() == 200  # alive the whole minute: no restart by its probe
        assert _count(driver, "publishing ResourceSlices failing") == 1
        assert _count(driver, "writing claim status failing") <= 1

        switch.on()
        wait_for(
            "publishing to work again",
            lambda: _count(driver, "publishing ResourceSlices working again") == 1,
            45,
        )
        assert _exists(env.kube, slice_name)  # published again
        retried = kubelet.prepare(later)
        assert retried["problems"] == []
        wait_for("the claim's status", lambda: _status_devices(env.kube, later) == ["gpu-1"])
        assert _status_devices(env.kube, earlier) == ["gpu-0"]
        assert "Traceback" not in driver.log_text()
    finally:
        driver.stop()
        switch.close()


def test_api_server_restart_while_the_driver_runs(env: Env) -> None:
    node = "restart-0"
    gpu_node(env.kube, node)
    driver = cluster_driver(env.root, node, env.cluster.kubeconfig).start()
    kubelet = UpstreamKubelet(driver.paths.registration_socket, driver.cdi)
    try:
        slice_name = f"{node}-{GPU}-0"
        wait_for("the slice", lambda: _exists(env.kube, slice_name))
        before = env.kube.get(ResourceSlice, slice_name)
        env.cluster.restart_apiserver()
        claim = allocated_claim(env.kube, "after-restart", node, ["gpu-3"])
        answer = kubelet.prepare(claim)
        assert answer["problems"] == [] and [d for _, d, _ in devices(answer, claim)] == ["gpu-3"]
        wait_for("the claim's status", lambda: _status_devices(env.kube, claim) == ["gpu-3"])
        after = env.kube.get(ResourceSlice, slice_name)
        assert after.spec.pool.generation == before.spec.pool.generation  # nothing changed
    finally:
        driver.stop()


def _via(cluster: DevCluster, switch: Switch, path: Path) -> Path:
    """The admin kubeconfig, pointed at the switch."""
    text = cluster.kubeconfig.read_text()
    assert cluster.state is not None
    path.write_text(text.replace(cluster.state.server, switch.server))
    return path


def _count(driver: DriverProcess, message: str) -> int:
    return driver.log_text().count(message)


def _exists(kube: KubeStore, name: str) -> bool:
    try:
        kube.get(ResourceSlice, name)
    except NotFound:
        return False
    return True
