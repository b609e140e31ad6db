"""Health and utilization next to allocation (issue 35): a device's health taints make it
unhealthy with its fault on every page that lists it, and `kubedra ui --device-metrics URL`
shows what each device is doing, scraped from the node drivers' /metrics in the
background: a busy device busy, a free one idle, a dead endpoint stale, never an error page.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import time
import urllib.request
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from kubedra.api.codec import decode_object
from kubedra.api.resource import DeviceTaint, ResourceSlice
from kubedra.cluster import SqliteStore
from kubedra.driver import faults
from kubedra.driver.devicemetrics import DeviceMetrics, DeviceSample
from kubedra.driver.health import KINDS, FaultKind
from kubedra.driver.kubelet import KubeletClient
from kubedra.web.api import App
from kubedra.web.devicemetrics import Scraper, parse
from kubedra.web.devices import FAULT_NAMES
from kubedra.web.mirror import Mirror
from kubedra.web.server import Server
from tests.driver.conftest import make_claim
from tests.driver.driverproc import DriverProcess, free_port, short_tempdir
from tests.scheduler.cluster import gpu_node, gpu_pod, new_store
from tests.web.browser import missing
from tests.web.conftest import UiProcess

GPU = "gpu.nvidia.com"
GiB = 1 << 30


# --- health -----------------------------------------------------------------------------------


def taint(store: SqliteStore, node: str, marks: dict[str, Sequence[DeviceTaint]]) -> None:
    """Put taints on devices of the node's slice, as the driver's health monitor does."""
    (rs,) = [s for s in store.list(ResourceSlice) if s.spec.node_name == node]
    devices = tuple(
        msgspec.structs.replace(d, taints=tuple(marks.get(d.name, ()))) for d in rs.spec.devices
    )
    store.update(msgspec.structs.replace(rs, spec=msgspec.structs.replace(rs.spec, devices=devices)))


def create(store: SqliteStore, doc: dict[str, Any]) -> Any:
    return store.create(decode_object(doc).obj)


def hold(store: SqliteStore, name: str, pool: str, device: str) -> None:
    """A claim allocated `device` (status written as a scheduler would)."""
    claim = create(store, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
    })  # fmt: skip
    status = decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "status": {"allocation": {"devices": {"results": [
            {"request": "r", "driver": GPU, "pool": pool, "device": device}]}}},
    }).obj  # fmt: skip
    store.update_status(msgspec.structs.replace(claim, status=status.status))


def body(app: App, path: str, query: dict[str, str] | None = None) -> str:
    answer = app.get(path, query or {})
    assert answer.status == 200, answer.body[:500]
    return answer.body.decode()


def tile(html: str, device: str) -> str:
    """The opening tag of a device's tile on the fleet page."""
    found = re.search(rf'<(?:a|div) class="dev [^>]*data-device="{GPU}/[^"]*/{device}"[^>]*>', html)
    assert found is not None, f"no tile for {device}"
    return found.group(0)


def test_fault_names_cover_the_drivers_health_keys() -> None:
    assert set(FAULT_NAMES) == {suffix for suffix, _ in KINDS.values()}


@pytest.fixture
def sick(tmp_path: Path) -> SqliteStore:
    """n1's 4 GPUs: gpu-1 with a critical Xid (held by a claim), gpu-2 lost, gpu-3 with an
    admin's taint only (tainted, not unhealthy); a pod waiting for 4 GPUs."""
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    taint(store, "n1", {
        "gpu-1": [DeviceTaint(key=f"{GPU}/xid", value="74", effect="NoExecute")],
        "gpu-2": [DeviceTaint(key=f"{GPU}/gpu-lost", effect="NoExecute"),
                  DeviceTaint(key=f"{GPU}/thermal", value="slowdown", effect="NoSchedule")],
        "gpu-3": [DeviceTaint(key="example.com/maintenance", effect="NoSchedule")],
    })  # fmt: skip
    hold(store, "held", "n1", "gpu-1")
    create(store, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "four", "namespace": "default"},
        "spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 4}}]}},
    })  # fmt: skip
    gpu_pod(store, "waiting", claim="four")
    return store


def test_a_device_with_a_health_taint_is_unhealthy_with_its_fault(sick: SqliteStore) -> None:
    app = App(Mirror(sick).sync(), backend="test")
    fleet = json.loads(body(app, "/api/fleet"))
    devices = {d["name"]: d for g in fleet["groups"] for n in g["nodes"] for d in n["devices"]}
    assert {k: (d["healthy"], d["faults"]) for k, d in devices.items()} == {
        "gpu-0": (True, []),
        "gpu-1": (False, ["Xid 74"]),
        "gpu-2": (False, ["GPU lost", "thermal slowdown"]),
        "gpu-3": (True, []),  # an admin's taint: tainted, not a fault
    }
    assert devices["gpu-3"]["tainted"] and devices["gpu-1"]["state"] == "allocated"
    assert fleet["summary"]["accelerators"]["unhealthy"] == 2
    assert fleet["summary"]["unhealthy"] == 2 and fleet["summary"]["tainted"] == 3
    assert fleet["deviceMetrics"] is None and "metrics" not in devices["gpu-0"]

    html = body(app, "/fleet")
    assert re.search(r'data-count="unhealthy"[^>]*class="bad"><b>2</b> unhealthy', html)
    held = tile(html, "gpu-1")  # allocated and unhealthy: both show
    assert 'class="dev gpu allocated tainted unhealthy"' in held
    assert "unhealthy: Xid 74" in held and 'data-health="unhealthy"' in held
    assert "unhealthy: GPU lost, thermal slowdown" in tile(html, "gpu-2")
    assert "unhealthy" not in tile(html, "gpu-3").replace('data-health="healthy"', "")
    assert 'class="swatch unhealthy"' in html  # in the legend
    # where the figures would come from, without --device-metrics
    assert 'id="device-metrics"' in html and "--device-metrics http://NODE:PORT/metrics" in html
    assert "data-figures" not in html

    heat = body(app, "/fleet", {"mode": "heat"})
    cell = re.search(r'<div class="cell [^"]*"[^>]*data-node="n1"[^>]*>', heat)
    assert cell is not None and "unhealthy" in cell.group(0).split('"')[1]
    assert "2 unhealthy: GPU lost, Xid 74, thermal slowdown" in cell.group(0)

    claim = json.loads(body(app, "/api/claims/default/held"))
    (device,) = claim["devices"]
    assert (device["healthy"], device["faults"], device["name"]) == (False, ["Xid 74"], "gpu-1")
    page = body(app, "/claims/default/held")
    assert '<span class="badge unhealthy" data-health="unhealthy">unhealthy: Xid 74</span>' in page


def test_the_pending_pods_devices_mark_the_unhealthy_ones(sick: SqliteStore) -> None:
    """The explanation names the tainted devices; the pod's device list (the fleet filtered
    by the pod, linked from its card) marks them unhealthy, with their fault."""
    app = App(Mirror(sick).sync(), backend="test")
    pending = body(app, "/pending")
    assert "default/waiting" in pending and "taint" in pending
    assert ('<span class="badge unhealthy" data-device="gpu.nvidia.com/n1/gpu-2" data-health="unhealthy" '
            'title="gpu.nvidia.com/n1/gpu-2 on n1 · free">gpu-2 on n1: GPU lost, thermal slowdown</span>') in pending
    assert ">gpu-1 on n1: Xid 74</span>" in pending  # held by another claim besides
    (pod,) = json.loads(body(app, "/api/pending"))["pods"]
    assert [(d["name"], d["faults"]) for d in pod["unhealthyDevices"]] == [
        ("gpu-1", ["Xid 74"]), ("gpu-2", ["GPU lost", "thermal slowdown"])]
    assert 'href="/fleet?pod=default%2Fwaiting"' in pending
    html = body(app, "/fleet", {"pod": "default/waiting"})
    lost = tile(html, "gpu-2")
    assert "admitted" in lost and "unhealthy" in lost and "GPU lost" in lost
    assert "admitted" in tile(html, "gpu-0") and "unhealthy" not in tile(html, "gpu-0").split('"')[1]


# --- the scraper ------------------------------------------------------------------------------


class Claims:
    """A driver's prepared claims as the metrics read them."""

    def __init__(self, prepared: dict[str, Any] | None = None,
                 consumers: dict[str, tuple[str, ...]] | None = None) -> None:  # fmt: skip
        self.prepared = prepared or {}
        self.consumers = consumers or {}


class FakeDriver:
    """A node driver's /metrics, made by the driver's own collector from figures the test
    sets: utilization per device of pool `pool`."""

    def __init__(self, pool: str, utilization: dict[str, float]) -> None:
        self.utilization = utilization
        self.registry = CollectorRegistry()
        self.metrics = DeviceMetrics(GPU, pool, self.sample, Claims()).register(self.registry)
        self.metrics.sample()
        self.server, self.thread = start_http_server(0, "127.0.0.1", self.registry)
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"

    def sample(self, in_use: Collection[str]) -> Sequence[DeviceSample]:
        return [
            DeviceSample(name, uuid=f"GPU-{name}", model="NVIDIA H100 80GB HBM3",
                         utilization=u, memory_used_bytes=int(u * 80 * GiB),
                         memory_total_bytes=80 * GiB, temperature_celsius=30 + 40 * u,
                         power_watts=70 + 600 * u)
            for name, u in self.utilization.items()
        ]  # fmt: skip

    def set(self, name: str, utilization: float) -> None:
        self.utilization[name] = utilization
        self.metrics.sample()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def driver() -> Iterator[FakeDriver]:
    fake = FakeDriver("n1", {"gpu-0": 0.0, "gpu-1": 0.5, "gpu-2": 0.0, "gpu-3": 0.96})
    yield fake
    fake.stop()


def dead_url() -> str:
    """A loopback port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}/metrics"


@contextlib.contextmanager
def silent_endpoint() -> Iterator[str]:
    """A port that takes connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"


def test_parse_reads_the_drivers_exposition_one_figure_per_device() -> None:
    """The driver's own text (one series per pod of a shared device), other series and
    devices without the labels ignored."""
    registry = CollectorRegistry()

    shared = Claims({"u1": _prepared("ns", "c", "gpu-0")}, {"u1": ("pod-a", "pod-b")})
    def sample(in_use: Collection[str]) -> Sequence[DeviceSample]:
        return [DeviceSample("gpu-0", utilization=0.75, memory_used_bytes=GiB, memory_total_bytes=2 * GiB),
                DeviceSample("gpu-0-mig", memory_used_bytes=GiB)]  # fmt: skip

    metrics = DeviceMetrics(GPU, "node-a", sample, shared, pool="pool-a").register(registry)
    metrics.sample()
    text = generate_latest(registry).decode()
    assert text.count('kubedra_device_utilization_ratio{') == 2  # one per pod
    figures = parse(text + "\nother_metric 1\nkubedra_device_power_watts{device=\"x\"} 3\n")
    assert set(figures) == {(GPU, "pool-a", "gpu-0"), (GPU, "pool-a", "gpu-0-mig")}
    gpu = figures[(GPU, "pool-a", "gpu-0")]
    assert (gpu.node, gpu.utilization, gpu.memory_used, gpu.memory_total) == ("node-a", 0.75, GiB, 2 * GiB)
    mig = figures[(GPU, "pool-a", "gpu-0-mig")]
    assert mig.utilization is None and mig.memory_used == GiB
    assert len(parse(text, max_devices=1)) == 1  # bounded
    with pytest.raises(ValueError):
        parse("kubedra_device_utilization_ratio{device=")


def _prepared(namespace: str, name: str, device: str) -> Any:
    from kubedra.driver.checkpoint import PreparedClaim, PreparedDevice

    held = PreparedDevice(request_names=["r"], pool_name="pool-a", device_name=device, cdi_device_ids=[])
    return PreparedClaim(uid="u1", namespace=namespace, name=name, devices=[held])


def test_only_http_urls_are_scraped() -> None:
    for bad in ("file:///etc/passwd", "ftp://h/metrics", "http:///metrics", "127.0.0.1:8080"):
        with pytest.raises(ValueError, match="expected an http"):
            Scraper([bad])


def test_an_answer_too_large_is_refused(driver: FakeDriver) -> None:
    scraper = Scraper([driver.url], max_bytes=100)
    scraper.scrape()
    (endpoint,) = scraper.snapshot().endpoints
    assert endpoint.error == "unreadable: answer larger than 100 bytes" and not endpoint.devices


def test_kubedra_ui_refuses_a_url_that_is_not_http(tmp_path: Path) -> None:
    from tests.cli.test_lint import kubedra

    done = kubedra("--store", str(tmp_path / "s.db"), "ui", "--device-metrics", "file:///etc/passwd")
    assert done.returncode == 2 and "expected an http:// or https:// URL" in done.stderr


def test_figures_beside_allocation_and_a_dead_endpoint_stale(tmp_path: Path, driver: FakeDriver) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    gpu_node(store, "n2", gpus=2)  # no endpoint reports its devices
    dead = dead_url()
    scraper = Scraper([driver.url, dead], timeout=1.0)
    app = App(Mirror(store).sync(), backend="test", device_metrics=scraper)
    page = body(app, "/fleet")  # before any scrape: the page, figures not there yet
    assert 'data-state="waiting"' in page and "not scraped yet" in page
    scraper.scrape()

    fleet = json.loads(body(app, "/api/fleet"))
    devices = {(n["name"], d["name"]): d for g in fleet["groups"] for n in g["nodes"] for d in n["devices"]}
    busy = devices[("n1", "gpu-3")]["metrics"]
    assert busy["utilization"] == 0.96 and busy["memoryTotalBytes"] == 80 * GiB
    assert busy["temperatureCelsius"] == pytest.approx(68.4) and not busy["stale"]
    assert busy["source"] == driver.url
    assert devices[("n1", "gpu-0")]["metrics"]["utilization"] == 0
    assert devices[("n2", "gpu-0")]["metrics"] is None
    live, gone = fleet["deviceMetrics"]["endpoints"]
    assert (live["ok"], live["stale"], live["devices"], live["error"]) == (True, False, 4, None)
    assert (gone["ok"], gone["stale"], gone["devices"], gone["age"]) == (False, True, 0, None)
    assert "refused" in gone["error"].lower()

    html = body(app, "/fleet")
    assert 'id="device-metrics" data-figures' in html
    assert re.search(rf'data-endpoint="{re.escape(dead)}" data-state="stale"><code>[^<]*</code> no figures: ', html)
    gpu3 = html[html.index(f'data-device="{GPU}/n1/gpu-3"'):]
    assert gpu3.index('<i class="util u10" data-utilization="0.96">') < gpu3.index("</div>")
    assert "utilization 96 % · memory 76.8 GiB of 80.0 GiB · 68 °C · 646 W" in tile(html, "gpu-3")
    assert '<i class="util u0"' in html[html.index(f'data-device="{GPU}/n1/gpu-0"'):]
    assert "no device metrics" in html[html.index(f'data-device="{GPU}/n2/gpu-0"') - 300:]
    assert 'class="swatch utilization"' in html
    assert " style=" not in html  # the bar's length is a class: the CSP forbids inline style
    heat = body(app, "/fleet", {"mode": "heat"})
    assert "n1 · 0 of 4 accelerators in use · 0.0 % held · utilization 36.5 % on average" in heat

    # The driver changes its figures: the next round shows them (the cached page is not kept).
    driver.set("gpu-0", 0.4)
    scraper.scrape()
    assert 'data-utilization="0.4"' in html_of_tile(body(app, "/fleet"), "n1", "gpu-0")
    # The driver goes away: its last figures stay, stale, with their age; the page is whole.
    driver.stop()
    time.sleep(1.1)
    scraper.scrape()
    fleet = json.loads(body(app, "/api/fleet"))
    first = fleet["deviceMetrics"]["endpoints"][0]
    assert first["stale"] and not first["ok"] and first["age"] >= 1.0 and first["error"]
    gpu3 = next(d for g in fleet["groups"] for n in g["nodes"] for d in n["devices"]
                if n["name"] == "n1" and d["name"] == "gpu-3")  # fmt: skip
    assert gpu3["metrics"]["utilization"] == 0.96 and gpu3["metrics"]["stale"]
    html = body(app, "/fleet")
    assert re.search(r'data-state="stale"><code>[^<]*</code> stale, figures \d+ s old: ', html)
    assert '<i class="util u10 stale"' in html
    assert re.search(r"stale: figures \d+ s old", tile(html, "gpu-3"))


def html_of_tile(html: str, node: str, device: str) -> str:
    start = html.index(f'data-device="{GPU}/{node}/{device}"')
    return html[start : html.index("</", start)]


def test_a_claims_devices_show_their_figures(tmp_path: Path, driver: FakeDriver) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    hold(store, "busy", "n1", "gpu-3")
    scraper = Scraper([driver.url])
    scraper.scrape()
    app = App(Mirror(store).sync(), backend="test", device_metrics=scraper)
    (device,) = json.loads(body(app, "/api/claims/default/busy"))["devices"]
    assert device["metrics"]["utilization"] == 0.96 and device["healthy"] is True
    html = body(app, "/claims/default/busy")
    assert '<meter min="0" max="1" value="0.96" title="utilization"></meter>' in html
    assert "utilization 96 % · memory 76.8 GiB of 80.0 GiB" in html and "data-figures" in html
    assert '<span class="badge healthy" data-health="healthy">healthy</span>' in html


def test_a_scrape_round_is_bounded_by_its_timeout() -> None:
    """An endpoint that takes the connection and never answers costs the round its timeout,
    not more; the next round waits for that try rather than starting another beside it."""
    with silent_endpoint() as silent:
        scraper = Scraper([silent, dead_url()], timeout=0.5)
        started = time.monotonic()
        scraper.scrape()
        assert time.monotonic() - started < 2.5
        first, second = scraper.snapshot().endpoints
        assert first.error == "no answer within 0.5 s" and second.error
        assert scraper.snapshot().generation == 1
        scraper.stop()


def test_pages_follow_the_scrapes_through_the_event_stream(tmp_path: Path, driver: FakeDriver) -> None:
    """A `metrics` event after each round (the pages showing figures fetch themselves again
    on it); the scraper in the background, its round every interval."""
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    mirror = Mirror(store, idle=0.2).start()
    scraper = Scraper([driver.url], interval=0.3, timeout=1.0)
    server = Server(App(mirror, backend="test", device_metrics=scraper), port=0, min_interval=0.1).start()
    scraper.start()
    try:
        host, port = server.bound
        connection = http.client.HTTPConnection(host, port, timeout=10)
        connection.request("GET", "/api/events")
        answer = connection.getresponse()
        seen: list[str] = []
        deadline = time.monotonic() + 10
        while seen.count("metrics") < 2 and time.monotonic() < deadline:
            line = answer.readline().decode()
            if line.startswith("event: "):
                seen.append(line.split()[1])
        assert seen[0] == "hello" and seen.count("metrics") >= 2
        connection.close()
    finally:
        server.stop()
        scraper.stop()
        mirror.stop()


# --- kubedra driver run + kubedra ui --device-metrics ----------------------------------------


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        return str(answer.read().decode())


def wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_kubedra_ui_shows_a_real_drivers_figures_and_health() -> None:
    """`kubedra driver run --backend simulated --metrics-port P` on an embedded store, a
    claim prepared on gpu-2 through the kubelet's socket, an Xid injected into gpu-5; then
    `kubedra ui --device-metrics` with that driver's URL and a dead one."""
    with short_tempdir() as folder:
        process = DriverProcess(folder / "state.db", folder / "kubelet", folder / "cdi",
                                metrics_port=free_port()).start()  # fmt: skip
        ui: UiProcess | None = None
        try:
            store = SqliteStore(process.store)
            claim = make_claim(store, "busy", [("gpu", "sim-1", "gpu-2")])
            with KubeletClient(process.paths.registration_socket, timeout=10) as kubelet:
                kubelet.register()
                answer = kubelet.prepare([("default", claim.metadata.uid, "busy")])
            assert answer.claims[claim.metadata.uid].error == ""
            faults.inject(process.paths.plugin_dir, "sim-1", "gpu-5", FaultKind.XID)
            metrics, dead = f"http://127.0.0.1:{process.metrics_port}/metrics", dead_url()
            ui = UiProcess("--store", str(process.store), options=(
                "--device-metrics", metrics, "--device-metrics", dead,
                "--device-metrics-interval", "0.5"))  # fmt: skip

            def figures() -> dict[str, Any] | None:
                fleet = get_json(ui.url + "api/fleet")  # type: ignore[union-attr]
                found = {d["name"]: d for g in fleet["groups"] for n in g["nodes"] for d in n["devices"]}
                busy = found["gpu-2"]["metrics"]
                ready = busy and busy["utilization"] > 0.5 and not found["gpu-5"]["healthy"]
                return {"fleet": fleet, "devices": found} if ready else None

            seen = wait_for(figures)
            devices, fleet = seen["devices"], seen["fleet"]
            assert devices["gpu-2"]["state"] == "allocated" and devices["gpu-2"]["holders"] == ["default/busy"]
            assert devices["gpu-0"]["state"] == "free" and devices["gpu-0"]["metrics"]["utilization"] == 0
            assert devices["gpu-2"]["metrics"]["memoryUsedBytes"] > devices["gpu-0"]["metrics"]["memoryUsedBytes"]
            assert devices["gpu-5"]["faults"] == ["Xid 74"] and devices["gpu-5"]["tainted"]
            assert fleet["summary"]["accelerators"]["unhealthy"] == 1
            live, gone = fleet["deviceMetrics"]["endpoints"]
            assert live["url"] == metrics and live["ok"] and live["devices"] == 8
            assert gone["url"] == dead and gone["stale"] and gone["error"]

            html = get_text(ui.url + "fleet")
            assert re.search(r'class="util u(9|10)"', tile(html, "gpu-2") + html_of_tile(html, "sim-1", "gpu-2"))
            assert "unhealthy: Xid 74" in tile(html, "gpu-5")
            assert f'data-endpoint="{dead}" data-state="stale"' in html
            page = get_text(ui.url + "claims/default/busy")
            assert "<meter" in page and "utilization 9" in page and f"from {metrics}" in page
        finally:
            if ui is not None:
                ui.stop()
            process.stop()


# --- in Chromium ------------------------------------------------------------------------------


@pytest.mark.skipif(missing() is not None, reason=f"browser tests skipped: {missing()}")
def test_a_tiles_utilization_follows_the_driver_without_reload(tmp_path: Path, driver: FakeDriver, page: Any) -> None:
    from tests.web.test_browser import wait_js

    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    mirror = Mirror(store, idle=0.2).start()
    scraper = Scraper([driver.url, dead_url()], interval=0.3, timeout=1.0)
    server = Server(App(mirror, backend="test", device_metrics=scraper), port=0).start()
    scraper.start()
    try:
        page.goto(server.url + "fleet")
        page.wait_for_selector("#live.on")
        tile_js = f"document.querySelector('[data-device=\"{GPU}/n1/gpu-0\"] .util')"
        wait_js(page, f"{tile_js} !== null && Number({tile_js}.dataset.utilization) === 0")
        page.evaluate("window.__sameDocument = true")
        driver.set("gpu-0", 0.55)
        wait_js(page, f"Number({tile_js}.dataset.utilization) === 0.55")
        assert page.evaluate("window.__sameDocument") is True
        assert page.get_attribute(f"[data-device='{GPU}/n1/gpu-0'] .util", "class") == "util u6"
        width = page.evaluate(f"{tile_js}.getBoundingClientRect().width")
        assert 8 < width < 13  # 60 % of an 18 px tile: the stylesheet's bar, no inline style
        assert page.locator("[data-endpoint][data-state=stale]").count() == 1
    finally:
        server.stop()
        scraper.stop()
        mirror.stop()

