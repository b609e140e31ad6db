"""Per-device metrics on the driver's /metrics: the simulated backend's figures follow a
claim's allocation and release, each series names the claim and its pods while one holds
the device, faults are series too, and a scrape reads a cache (never the backend)."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kubedra.api.resource import ResourceClaimConsumerReference
from kubedra.cluster.sqlite import SqliteStore
from kubedra.driver import faults
from kubedra.driver.backends.simulated import SimulatedBackend, SimulatedSampler
from kubedra.driver.checkpoint import PreparedClaim
from kubedra.driver.devicemetrics import DeviceMetrics, DeviceSample
from kubedra.driver.health import FaultKind, HealthState
from kubedra.driver.kubelet import PluginPaths
from kubedra.driver.metrics import DriverMetrics
from kubedra.driver.prepare import ClaimRef, DeviceState
from kubedra.driver.publisher import publish

from .conftest import GPU, NODE, make_claim, make_node

UTIL = "kubedra_device_utilization_ratio"


@dataclass
class Node:
    store: SqliteStore
    backend: SimulatedBackend
    state: DeviceState
    metrics: DriverMetrics
    health: HealthState
    devices: DeviceMetrics
    plugin_dir: Path

    def prepare(self, name: str, device: str, pods: Sequence[str] = ()) -> ClaimRef:
        claim = make_claim(self.store, name, [("gpu", NODE, device)])
        assert claim.status is not None
        reserved = tuple(
            ResourceClaimConsumerReference(resource="pods", name=pod, uid=f"uid-{pod}")
            for pod in pods
        )
        status = msgspec.structs.replace(claim.status, reserved_for=reserved)
        claim = self.store.update_status(msgspec.structs.replace(claim, status=status))
        ref = ClaimRef("default", claim.metadata.uid or "", name)
        assert self.state.prepare([ref])[ref.uid].error == ""
        return ref

    def series(self, name: str, **match: str) -> list[tuple[dict[str, str], float]]:
        """The samples of metric `name` (as exposed: counters with _total) whose labels
        include `match`."""
        text = generate_latest(self.metrics.registry).decode()
        return [
            (dict(s.labels), s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name and match.items() <= s.labels.items()
        ]

    def value(self, name: str, **match: str) -> float:
        (found,) = self.series(name, **match)
        return found[1]


def simulated_node(store: SqliteStore, root: Path, profile: str) -> Node:
    backend = SimulatedBackend(profile, NODE)
    (inventory,) = [i for i in backend.inventories() if i.driver == GPU]
    make_node(store, NODE)
    publish(store, inventory, NODE)
    paths = PluginPaths.for_driver(GPU, root / "kubelet")
    metrics = DriverMetrics(GPU, NODE)
    state = DeviceState(store, GPU, NODE, paths.plugin_dir, root / "cdi", metrics, lock_timeout=5)
    state.set_devices(inventory.devices)
    health = HealthState(GPU)
    sampler = backend.device_sampler(GPU, paths.plugin_dir)
    devices = DeviceMetrics(GPU, NODE, sampler, state, health).register(metrics.registry)
    return Node(store, backend, state, metrics, health, devices, paths.plugin_dir)


@pytest.fixture
def node(store: SqliteStore, short_dir: Path) -> Iterator[Node]:
    n = simulated_node(store, short_dir, "h100x8")
    yield n
    n.devices.stop()
    n.state.close()


def test_series_follow_a_claims_allocation_and_release(node: Node) -> None:
    node.devices.sample()
    assert len(node.series(UTIL)) == 8 and node.value(UTIL, device="gpu-2") == 0.0
    (labels, _) = node.series(UTIL, device="gpu-2")[0]
    assert labels == {
        "driver": GPU, "node": NODE, "pool": NODE, "device": "gpu-2",
        "uuid": labels["uuid"], "model": "NVIDIA H100 80GB HBM3",
        "namespace": "", "claim": "", "pod": "",
    }  # fmt: skip
    assert labels["uuid"].startswith("GPU-")
    idle_watts = node.value("kubedra_device_power_watts", device="gpu-2")
    ref = node.prepare("train", "gpu-2", pods=["trainer-0"])
    node.devices.sample()
    held = {"namespace": "default", "claim": "train", "pod": "trainer-0"}
    assert 0.88 <= node.value(UTIL, device="gpu-2", **held) < 0.98
    assert node.series(UTIL, device="gpu-2", claim="") == []  # the free series is gone
    total = node.value("kubedra_device_memory_total_bytes", device="gpu-2")
    assert total == 81559 << 20  # the catalog's capacity
    assert node.value("kubedra_device_memory_used_bytes", device="gpu-2", **held) > 0.7 * total
    assert node.value("kubedra_device_power_watts", device="gpu-2", **held) > 500 > idle_watts
    assert node.value("kubedra_device_temperature_celsius", device="gpu-2") > 60
    assert node.value(UTIL, device="gpu-3", claim="") == 0.0  # its neighbour stays idle
    assert node.value("kubedra_device_ecc_errors_total", device="gpu-2", type="double") == 0
    assert node.state.unprepare([ref]) == {ref.uid: ""}
    node.devices.sample()
    assert node.value(UTIL, device="gpu-2", claim="") == 0.0
    assert node.series(UTIL, claim="train") == []
    assert node.value("kubedra_device_memory_used_bytes", device="gpu-2") == 0


def test_a_claim_used_by_several_pods_has_a_series_per_pod(node: Node) -> None:
    node.prepare("shared", "gpu-5", pods=["worker-b", "worker-a"])
    node.devices.sample()
    pods = sorted(labels["pod"] for labels, _ in node.series(UTIL, device="gpu-5"))
    assert pods == ["worker-a", "worker-b"]
    node.prepare("nobody", "gpu-6")  # reserved for no pod (yet): the claim alone
    node.devices.sample()
    ((labels, _),) = node.series(UTIL, device="gpu-6")
    assert (labels["claim"], labels["pod"]) == ("nobody", "")


def test_a_scrape_reads_the_cache_and_wakes_the_sampler(node: Node) -> None:
    node.devices.interval = 60.0  # only a wake makes it sample again
    node.devices.start()
    node.prepare("late", "gpu-1", pods=["p"])
    assert node.series(UTIL, device="gpu-1", claim="late")[0][1] == 0.0  # the cached figure
    deadline = time.monotonic() + 5
    while node.series(UTIL, device="gpu-1", claim="late")[0][1] == 0.0:
        assert time.monotonic() < deadline, "the scrape did not wake the sampler"
        time.sleep(0.02)
    assert node.value("kubedra_driver_device_sample_timestamp_seconds") > 0


def test_faults_are_series_and_move_the_figures(node: Node) -> None:
    faults.inject(node.plugin_dir, NODE, "gpu-3", FaultKind.THERMAL)
    faults.inject(node.plugin_dir, NODE, "gpu-4", FaultKind.LOST)
    faults.inject(node.plugin_dir, NODE, "gpu-5", FaultKind.ECC)
    names = [f"gpu-{i}" for i in range(8)]
    node.health.update(names, faults.read(node.plugin_dir, NODE))
    node.devices.sample()
    assert node.value("kubedra_device_temperature_celsius", device="gpu-3") >= 91
    assert node.series(UTIL, device="gpu-4") == []  # a lost GPU reports nothing
    assert node.value("kubedra_device_ecc_errors_total", device="gpu-5", type="double") == 1
    found = {(labels["device"], labels["kind"]) for labels, v in node.series("kubedra_device_fault")}
    assert found == {("gpu-3", "thermal"), ("gpu-4", "lost"), ("gpu-5", "ecc")}
    (labels, _) = node.series("kubedra_device_fault", device="gpu-3")[0]
    assert labels["model"] == "NVIDIA H100 80GB HBM3"
    faults.inject(node.plugin_dir, NODE, "gpu-3", None, clear=True)
    node.health.update(names, faults.read(node.plugin_dir, NODE))
    assert node.series("kubedra_device_fault", device="gpu-3") == []


def test_mig_devices_have_figures_while_held(store: SqliteStore, short_dir: Path) -> None:
    node = simulated_node(store, short_dir, "a100-40x8-mig")
    try:
        node.devices.sample()
        assert {labels["device"] for labels, _ in node.series(UTIL)} == {
            f"gpu-{i}" for i in range(8)
        }
        mig = "gpu-0-mig-3g20gb-9-0"
        node.prepare("slice", mig, pods=["infer"])
        node.devices.sample()
        total = node.value("kubedra_device_memory_total_bytes", device=mig)
        (inventory,) = [i for i in node.backend.inventories() if i.driver == GPU]
        published = {d.name: d for d in inventory.devices}[mig].capacity["memory"].value
        assert total == published.value()  # the catalog's capacity of the profile
        assert node.value("kubedra_device_memory_used_bytes", device=mig, pod="infer") > 0
        assert node.series(UTIL, device=mig) == []  # NVML has no utilization per MIG device
        (labels, _) = node.series("kubedra_device_memory_total_bytes", device=mig)[0]
        assert labels["uuid"].startswith("MIG-") and labels["claim"] == "slice"
        busy = node.value(UTIL, device="gpu-0")  # its GPU: busy as the slice's memory share
        assert 0.3 < busy < 0.6
    finally:
        node.state.close()


def test_energy_counts_up_with_the_power_drawn() -> None:
    backend = SimulatedBackend("l4x4", NODE)
    (inventory,) = backend.inventories()
    now = [100.0]
    sampler = SimulatedSampler(inventory.devices, clock=lambda: now[0])
    first = {s.device: s for s in sampler(())}
    assert first["gpu-0"].energy_joules == 0.0
    now[0] += 10
    second = {s.device: s for s in sampler({"gpu-0"})}
    watts = first["gpu-0"].power_watts
    assert watts is not None and second["gpu-0"].energy_joules == pytest.approx(watts * 10)
    now[0] += 10
    third = {s.device: s for s in sampler(())}
    busy = second["gpu-0"].power_watts
    assert busy is not None and busy > watts
    assert third["gpu-0"].energy_joules == pytest.approx(watts * 10 + busy * 10)


class _Claims:
    """No prepared claims."""

    def __init__(self) -> None:
        self.prepared: dict[str, PreparedClaim] = {}
        self.consumers: dict[str, tuple[str, ...]] = {}


def test_a_failing_sampler_keeps_the_last_figures() -> None:
    answers: list[Sequence[DeviceSample] | Exception] = [
        [DeviceSample("gpu-0", utilization=0.5)],
        RuntimeError("NVML went away"),
    ]

    def sampler(in_use: object) -> Sequence[DeviceSample]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    registry = CollectorRegistry()
    devices = DeviceMetrics(GPU, NODE, sampler, _Claims()).register(registry)
    devices.sample()
    devices.sample()
    labels = {"driver": GPU, "node": NODE}
    errors = registry.get_sample_value("kubedra_driver_device_sample_errors_total", labels)
    assert errors == 1
    kept = registry.get_sample_value(UTIL, {**labels, "pool": NODE, "device": "gpu-0", "uuid": "",
                                            "model": "", "namespace": "", "claim": "", "pod": ""})
    assert kept == 0.5


def test_served_on_the_drivers_metrics_port(node: Node) -> None:
    node.devices.sample()
    port = node.metrics.serve(0, "127.0.0.1")
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        body = urllib.request.urlopen(url, timeout=5).read().decode()
    finally:
        node.metrics.shutdown()
    assert "# TYPE kubedra_device_utilization_ratio gauge" in body
    assert "# TYPE kubedra_device_energy_joules_total counter" in body
    assert 'kubedra_device_memory_total_bytes{claim="",device="gpu-0"' in body


def test_a_scrape_never_waits_for_the_sampler(node: Node) -> None:
    """A sampler stuck in NVML (here: on an event) holds no scrape up."""
    release = threading.Event()
    node.devices.sample()

    def stuck(in_use: object) -> list[DeviceSample]:
        release.wait(10)
        return []

    node.devices.sampler = stuck
    thread = threading.Thread(target=node.devices.sample)
    thread.start()
    try:
        started = time.perf_counter()
        assert len(node.series(UTIL)) == 8
        assert time.perf_counter() - started < 1.0
    finally:
        release.set()
        thread.join(5)
