"""The device taint eviction controller on the embedded store, with a clock of the test's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.codec import decode_object, to_dict
from kubedra.api.core import Pod
from kubedra.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice
from kubedra.cluster import SqliteStore
from kubedra.cluster.store import EventType
from kubedra.controllers.taint_eviction import DeviceTaintEvictionController
from kubedra.errors import NotFound
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, new_store
from tests.scheduler.test_cluster_mode import Events

ADDED = "2026-01-01T00:00:00Z"
T0 = datetime.fromisoformat(ADDED).timestamp()


def notes(events: Events, pod: str) -> list[str]:
    return [f"{e.reason}: {e.note}" for e in events.events if e.regarding.name == pod]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def claim(store: SqliteStore, name: str, tolerations: list[dict[str, Any]] | None = None,
          count: int = 1) -> None:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": count}
    if tolerations:
        exactly["tolerations"] = tolerations
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}).obj)


def rule(store: SqliteStore, name: str, device: str | None = "gpu-0", effect: str = "NoExecute",
         key: str = "example.com/broken") -> None:
    selector: dict[str, Any] = {"driver": "gpu.nvidia.com", "pool": "n1"}
    if device:
        selector["device"] = device
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector,
                 "taint": {"key": key, "effect": effect, "timeAdded": ADDED}}}).obj)


def running(store: SqliteStore, *pods: tuple[str, str]) -> None:
    """Pods (name, claim) bound by the scheduler, their claims allocated and reserved."""
    for name, claim_name in pods:
        gpu_pod(store, name, claim=claim_name)
    Scheduler(store).run_once()
    for name, _ in pods:
        assert store.get(Pod, name).spec.node_name == "n1"


def exists(store: SqliteStore, pod: str) -> bool:
    try:
        store.get(Pod, pod)
    except NotFound:
        return False
    return True


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = new_store(tmp_path)
    gpu_node(s, "n1", gpus=2)
    return s


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def controller(store: SqliteStore, events: Events) -> Callable[[float], DeviceTaintEvictionController]:
    def make(now: float = T0 + 1) -> DeviceTaintEvictionController:
        return DeviceTaintEvictionController(store, clock=Clock(now), recorder=events)
    return make


def test_untolerated_rule_taint_deletes_the_pod_with_condition_and_event(
    store: SqliteStore, events: Events, controller: Callable[..., DeviceTaintEvictionController]
) -> None:
    claim(store, "c0")
    claim(store, "c1")
    running(store, ("p0", "c0"), ("p1", "c1"))
    on_gpu0 = next(p for p in ("p0", "p1") if _device_of(store, p) == "gpu-0")
    other = "p1" if on_gpu0 == "p0" else "p0"
    rule(store, "broken-gpu-0")
    since = store.resource_version()
    result = controller().sync()
    assert result.evicted == [f"default/{on_gpu0}"]
    assert not exists(store, on_gpu0) and exists(store, other)
    written = [e.obj for e in store.changes(since, [Pod]) if e.type is EventType.MODIFIED]
    assert isinstance(written[0], Pod) and written[0].status is not None
    (condition,) = [c for c in written[0].status.conditions if c.type == "DisruptionTarget"]
    assert (condition.status, condition.reason) == ("True", "DeletionByDeviceTaintManager")
    assert condition.message == "Device Taint manager: deleting due to NoExecute taint"
    assert notes(events, on_gpu0) == ["DeviceTaintManagerEviction: Marking for deletion"]
    assert notes(events, other) == []


@pytest.mark.parametrize(("toleration", "evicted_at"), [
    ({"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute",
      "tolerationSeconds": 60}, 60),
    ({"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}, 0),
    ({"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5}, 0),
    ({"operator": "Exists", "effect": "NoExecute"}, None),  # tolerated for good
    ({"key": "other", "operator": "Exists", "effect": "NoExecute"}, 0),  # another taint
    # Only tolerations that name NoExecute count for eviction (upstream's rule).
    ({"operator": "Exists"}, 0),
    ({"key": "example.com/broken", "operator": "Equal", "value": "x", "effect": "NoExecute",
      "tolerationSeconds": 30}, 0),
])
def test_tolerations_decide_if_and_when(
    store: SqliteStore, controller: Callable[..., DeviceTaintEvictionController],
    toleration: dict[str, Any], evicted_at: int | None,
) -> None:
    claim(store, "c0", [toleration], count=2)
    running(store, ("p0", "c0"))
    rule(store, "broken")
    clock = Clock(T0)
    ctl = DeviceTaintEvictionController(store, clock=clock, recorder=Events())
    for offset in (0, 29, 59, 60, 3600):
        clock.now = T0 + offset
        ctl.sync()
        gone = evicted_at is not None and offset >= evicted_at
        assert exists(store, "p0") is not gone, offset


def pending_eviction(
    store: SqliteStore, events: Events, now: float
) -> tuple[DeviceTaintEvictionController, Clock]:
    """p0 on both GPUs, tolerating the rule's taint for 60 s: after a first round at `now`,
    its eviction waits for T0 + 60."""
    claim(store, "c0", [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
          count=2)
    running(store, ("p0", "c0"))
    rule(store, "broken")
    clock = Clock(now)
    ctl = DeviceTaintEvictionController(store, clock=clock, recorder=events)
    assert ctl.sync().pending == {"default/p0": T0 + 60}
    return ctl, clock


def test_eviction_is_cancelled_when_the_taint_goes(
    store: SqliteStore, events: Events
) -> None:
    ctl, clock = pending_eviction(store, events, T0 + 10)
    assert ctl.next_due() == T0 + 60
    store.delete(DeviceTaintRule, "broken")
    assert ctl.sync().cancelled == ["default/p0"]
    clock.now = T0 + 120
    assert ctl.sync().evicted == []
    assert exists(store, "p0")
    assert notes(events, "p0") == ["DeviceTaintManagerEviction: Cancelling deletion"]


def test_a_pod_recreated_under_the_name_is_not_evicted(
    store: SqliteStore, events: Events
) -> None:
    """The claim is reserved for the pod's uid: the pod that takes its name is another."""
    ctl, clock = pending_eviction(store, events, T0)
    store.delete(Pod, "p0")
    gpu_pod(store, "p0", claim="c0", nodeName="n1")
    clock.now = T0 + 61
    result = ctl.sync()
    assert (result.evicted, result.cancelled) == ([], [])
    assert exists(store, "p0") and notes(events, "p0") == []


@pytest.mark.parametrize(("effect", "evicted"), [
    ("NoExecute", True), ("NoSchedule", False), ("None", False)])
def test_slice_taints_published_by_the_driver(
    store: SqliteStore, controller: Callable[..., DeviceTaintEvictionController],
    effect: str, evicted: bool,
) -> None:
    claim(store, "c0", count=2)
    running(store, ("p0", "c0"))
    _taint_slice(store, {"key": "k", "effect": effect, "timeAdded": ADDED})
    controller().sync()
    assert exists(store, "p0") is not evicted


def test_taints_of_an_outdated_pool_generation_are_ignored(
    store: SqliteStore, controller: Callable[..., DeviceTaintEvictionController]
) -> None:
    claim(store, "c0", count=2)
    running(store, ("p0", "c0"))
    _taint_slice(store, {"key": "k", "effect": "NoExecute", "timeAdded": ADDED})
    newer = decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpu-newer"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 2, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}).obj
    store.create(newer)
    assert controller().sync().evicted == []
    assert exists(store, "p0")


def test_only_scheduled_pods_holding_the_claim_are_evicted(
    store: SqliteStore, controller: Callable[..., DeviceTaintEvictionController]
) -> None:
    claim(store, "c0", count=2)
    running(store, ("p0", "c0"))
    gpu_pod(store, "waiting", claim="c0", nodeName="n1")  # names the claim, not reserved
    rule(store, "broken", device=None)
    assert controller().sync().evicted == ["default/p0"]
    assert exists(store, "waiting")


def test_rule_status_reports_eviction_progress(
    store: SqliteStore, events: Events
) -> None:
    claim(store, "c0", [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}])
    claim(store, "c1", [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}])
    running(store, ("p0", "c0"), ("p1", "c1"))
    rule(store, "broken", device=None)
    rule(store, "dry-run", device=None, effect="None")
    rule(store, "no-schedule", device="gpu-1", effect="NoSchedule")
    clock = Clock(T0)
    ctl = DeviceTaintEvictionController(store, clock=clock, recorder=events)
    assert sorted(ctl.sync().statuses) == ["broken", "dry-run", "no-schedule"]
    assert _condition(store, "broken") == (
        "True", "PodsPendingEviction", "2 pods need to be evicted in 1 namespace.")
    assert _condition(store, "dry-run") == (
        "False", "NoEffect",
        "2 published devices selected. 2 allocated devices selected. 2 pods would be evicted "
        "in 1 namespace if the effect was NoExecute. This information will not be updated "
        "again. Recreate the DeviceTaintRule to trigger an update.")
    assert _condition(store, "no-schedule") == (
        "False", "OtherEffect", "Eviction only happens for the NoExecute effect.")
    clock.now = T0 + 30
    result = ctl.sync()
    assert sorted(result.evicted) == ["default/p0", "default/p1"]
    assert result.statuses == []  # at most every 10 seconds
    clock.now = T0 + 40
    assert ctl.sync().statuses == ["broken"]
    assert _condition(store, "broken") == (
        "False", "Completed", "2 pods evicted since starting the controller.")
    clock.now = T0 + 60
    assert ctl.sync().statuses == []  # nothing changed


def test_a_new_rule_without_pods_is_not_started(
    store: SqliteStore, controller: Callable[..., DeviceTaintEvictionController]
) -> None:
    rule(store, "broken")
    assert controller().sync().statuses == ["broken"]
    assert _condition(store, "broken") == ("False", "NotStarted", "")


def _device_of(store: SqliteStore, pod: str) -> str:
    found = store.get(Pod, pod)
    name = found.spec.resource_claims[0].resource_claim_name or ""
    held = store.get(ResourceClaim, name)
    assert held.status is not None and held.status.allocation is not None
    return held.status.allocation.devices.results[0].device


def _taint_slice(store: SqliteStore, taint: dict[str, Any]) -> None:
    raw = to_dict(store.get(ResourceSlice, "n1-gpu.nvidia.com"))
    raw["spec"]["devices"][0]["taints"] = [taint]
    store.update(decode_object(raw).obj)


def _condition(store: SqliteStore, name: str) -> tuple[str, str | None, str | None]:
    found = store.get(DeviceTaintRule, name)
    assert found.status is not None
    (condition,) = [c for c in found.status.conditions if c.type == "EvictionInProgress"]
    assert condition.observed_generation == found.metadata.generation
    return condition.status, condition.reason, condition.message


def test_controller_run_command_evicts_until_stopped(tmp_path: Path, store: SqliteStore) -> None:
    """`kubedra controller run` as a user starts it: a process that evicts as taints come,
    and stops cleanly on SIGTERM."""
    claim(store, "c0", count=2)
    running(store, ("p0", "c0"))
    env = {**os.environ, "KUBEDRA_STORE": str(tmp_path / "state.db")}
    env.pop("KUBECONFIG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubedra", "controller", "run", "--interval", "0.1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        assert exists(store, "p0")
        rule(store, "broken", device=None)
        deadline = time.monotonic() + 30
        while exists(store, "p0") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not exists(store, "p0")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "device-taint-eviction-controller" in err and "Traceback" not in err
