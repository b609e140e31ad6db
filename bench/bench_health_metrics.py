"""Device health and metrics on one node: the cost of one health check (what the monitor does
every 0.5 s), one sampling of every device (the metrics sampler, every 5 s) and one scrape
of the driver's /metrics (over HTTP, what Prometheus waits for), at 8 and 64 devices per
node; on the simulated backend and on the NVML code path with the fake NVML of the tests
(tests/driver/fakenvml.py: dictionary look-ups, so the NVML rows count the calls one check
makes: on real GPUs each is a driver ioctl, tens of microseconds).

64 devices: the simulated backend with 64 GPUs on the node; NVML with 8 GPUs in MIG mode,
7 MIG devices each (8 + 56 = 64 devices with figures). Half the devices are held by
prepared claims, so the scraped series carry claim and pod labels.

Also the scheduler's device figures (idle devices, FGD fragmentation per driver), which it
computes on its scheduling thread at most every 10 s, after changes only: 1,000 nodes of
8 GPUs.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from tempfile import TemporaryDirectory

import msgspec
from tests.driver.fakenvml import FakeNvml
from tests.scheduler.cluster import gpu_node, new_store

from bench.harness import Row, best_of, per_call, quick, sized
from kubedra.api.resource import Device
from kubedra.catalog.inventory import DriverInventory
from kubedra.driver.backends import Backend, inventory_for
from kubedra.driver.backends.nvml import NvmlBackend
from kubedra.driver.backends.simulated import SimulatedBackend
from kubedra.driver.checkpoint import PreparedClaim, PreparedDevice
from kubedra.driver.devicemetrics import DeviceMetrics
from kubedra.driver.health import HealthState, Monitor
from kubedra.driver.metrics import DriverMetrics
from kubedra.scheduler.metrics import cluster_figures
from kubedra.scheduler.scheduler import Scheduler

GPU = "gpu.nvidia.com"
NODE = "bench-node"
SCRAPE_TARGET_MS = 50.0


class _Claims:
    """Prepared claims holding every other device, one pod each."""

    def __init__(self, devices: Sequence[str]) -> None:
        self.prepared: dict[str, PreparedClaim] = {}
        self.consumers: dict[str, tuple[str, ...]] = {}
        for i, name in enumerate(devices[::2]):
            uid = f"00000000-0000-4000-8000-{i:012d}"
            device = PreparedDevice(
                request_names=["gpu"], pool_name=NODE, device_name=name, cdi_device_ids=[]
            )
            self.prepared[uid] = PreparedClaim(
                uid=uid, namespace="team-a", name=f"train-{i}", devices=[device]
            )
            self.consumers[uid] = (f"train-{i}-worker",)


class _WideSimulated(SimulatedBackend):
    """The h100x8 profile with `gpus` GPUs on the node (copies of its GPU 0)."""

    def __init__(self, gpus: int) -> None:
        super().__init__("h100x8", NODE)
        (inventory,) = [i for i in super().inventories() if i.driver == GPU]
        template = inventory.devices[0]
        self.wide = DriverInventory(
            GPU,
            tuple(
                msgspec.structs.replace(template, name=f"gpu-{i}", attributes={
                    **template.attributes,
                    "uuid": msgspec.structs.replace(template.attributes["uuid"],
                                                    string=f"GPU-{i:08d}-0000-4000-8000-0"),
                })
                for i in range(gpus)
            ),
        )  # fmt: skip

    def inventories(self) -> list[DriverInventory]:
        return [self.wide]


def _mig_fake() -> tuple[FakeNvml, list[str]]:
    """8 H100s in MIG mode with 7 MIG 1g.10gb devices each; the MIG devices' names."""
    fake = FakeNvml(gpus=8, mig=tuple(range(8)))
    for gpu in range(8):
        for start in range(7):
            fake.create_mig(gpu, profile_id=19, start=start, size=1, memory_mib=9984)
    return fake, [f"gpu-{g}-mig-1g10gb-19-{s}" for g in range(8) for s in range(7)]


def _monitor(backend: Backend, plugin_dir: Path) -> Monitor:
    """The health monitor as `run_driver` builds it: the names of the inventory published
    last, the backend's report, a HealthState."""
    names = tuple(d.name for d in inventory_for(backend, GPU).devices)
    return Monitor(
        HealthState(GPU), lambda: names, backend.health_report(plugin_dir), lambda c: None, 0.5
    )


def _scrape_ms(metrics: DriverMetrics) -> float:
    port = metrics.serve(0, "127.0.0.1")
    url = f"http://127.0.0.1:{port}/metrics"

    def get() -> None:
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()

    try:
        get()  # the connection and the first exposition
        return per_call(get, 50) * 1e3
    finally:
        metrics.shutdown()


def _case(
    label: str,
    backend: Backend,
    plugin_dir: Path,
    held: Callable[[Sequence[Device]], Sequence[str]],
    calls: Callable[[], Mapping[str, int]] | None = None,
) -> list[Row]:
    monitor = _monitor(backend, plugin_dir)
    inventory = inventory_for(backend, GPU)
    report = monitor.report
    claims = _Claims(held(inventory.devices))
    metrics = DriverMetrics(GPU, NODE)
    devices = DeviceMetrics(GPU, NODE, backend.device_sampler(GPU, plugin_dir), claims,
                            monitor.state).register(metrics.registry)  # fmt: skip
    devices.sample()
    sampled = len(devices.samples)
    check_ms = per_call(monitor.check, 200) * 1e3
    sample_ms = per_call(devices.sample, 100) * 1e3
    scrape_ms = _scrape_ms(metrics)
    series = sum(
        len(family.samples)
        for family in metrics.registry.collect()
        if family.name.startswith("kubedra_device")
    )
    rows = [
        Row("driver health", f"{label}: one health check", check_ms, "ms",
            note=f"{len(inventory.devices)} published devices; every 0.5 s"),
        Row("driver metrics", f"{label}: one sampling of every device", sample_ms, "ms",
            note=f"{sampled} devices with figures; every 5 s, off the scrape path"),
    ]  # fmt: skip
    if calls is not None:
        report()  # what a GPU does not support is asked once, then no more
        before = dict(calls())
        report()
        after = calls()
        per_check = sum(after.values()) - sum(before.values())
        rows.append(Row("driver health", f"{label}: NVML calls per health report", per_check,
                        "calls", note="each a driver call on real GPUs"))  # fmt: skip
        before = dict(calls())
        devices.sample()
        per_sample = sum(calls().values()) - sum(before.values())
        rows.append(Row("driver metrics", f"{label}: NVML calls per sampling", per_sample,
                        "calls"))  # fmt: skip
    big = sampled >= 64
    rows.append(
        Row("driver metrics", f"{label}: scrape of /metrics over HTTP", scrape_ms, "ms",
            target=f"< {SCRAPE_TARGET_MS:.0f} ms at 64 devices" if big else "",
            ok=scrape_ms < SCRAPE_TARGET_MS if big else None,
            note=f"{series} device series, half the devices held by claims")
    )  # fmt: skip
    return rows


def run() -> list[Row]:
    rows: list[Row] = []
    with TemporaryDirectory() as tmp:
        plugin_dir = Path(tmp)
        def every(devices: Sequence[Device]) -> Sequence[str]:
            return [d.name for d in devices]

        sizes = (8,) if quick() else (8, 64)
        for gpus in sizes:
            backend = _WideSimulated(gpus)
            rows += _case(f"simulated, {gpus} GPUs", backend, plugin_dir, every)
        fake = FakeNvml(gpus=8)
        nvml = NvmlBackend(fake)
        rows += _case("NVML fake, 8 GPUs", nvml, plugin_dir, every, lambda: fake.calls)
        fake, migs = _mig_fake()
        nvml = NvmlBackend(fake)
        rows += _case(
            "NVML fake, 8 GPUs x 7 MIG = 64 devices", nvml, plugin_dir,
            lambda devices: migs, lambda: fake.calls,
        )  # fmt: skip
        rows.append(_scheduler_figures(Path(tmp)))
    return rows


def _scheduler_figures(folder: Path) -> Row:
    nodes = sized(1000, 100)
    store = new_store(folder)
    with store.transaction():
        for n in range(nodes):
            gpu_node(store, f"n{n:04d}", gpus=8)
    scheduler = Scheduler(store, "fragmentation")
    scheduler.refresh()
    scheduler.view()
    seconds = best_of(lambda: cluster_figures(scheduler))
    store.close()
    return Row(
        "scheduler metrics",
        f"device figures, {nodes} nodes x 8 GPUs",
        seconds * 1e3,
        "ms",
        note="on the scheduling thread, at most every 10 s and after changes",
    )


if __name__ == "__main__":
    from bench.harness import format_table

    print(format_table(run()))
