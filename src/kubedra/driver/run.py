"""The node agent's main loop, as `kubedra driver run` / `kubedra driver cleanup` call it."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import threading
from collections.abc import Collection, Mapping
from pathlib import Path

from kubedra.api.core import Node
from kubedra.api.validation import names
from kubedra.catalog.inventory import DriverInventory
from kubedra.cluster.store import Store
from kubedra.driver import publisher
from kubedra.driver.backends import Backend, inventory_for, open_backend
from kubedra.driver.claimfiles import ClaimFiles
from kubedra.driver.devicemetrics import SAMPLE_SECONDS, DeviceMetrics
from kubedra.driver.health import DEFAULT_EFFECTS, HealthState, Monitor
from kubedra.driver.health_service import HealthStream
from kubedra.driver.kubelet import DEFAULT_ROOT, PluginPaths
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.metrics import DriverMetrics
from kubedra.driver.prepare import DeviceState
from kubedra.driver.retry import Backoff, Transitions
from kubedra.driver.server import PluginServer
from kubedra.driver.status import StatusWriter
from kubedra.errors import AlreadyExists, NotFound

DEFAULT_CDI_DIR = Path("/var/run/cdi")
RESYNC_SECONDS = 30.0  # upstream's DefaultSyncDelay
HEALTH_SECONDS = 0.5  # a fault is a taint on the published slice within a second
log = get_logger("run")


def _ensure_node(store: Store, backend: Backend, node: str) -> None:
    """Simulated nodes exist only in the catalog: create the Node if the store lacks it."""
    simulated = backend.node()
    if simulated is None:
        return
    try:
        store.get(Node, node)
    except NotFound:
        with contextlib.suppress(AlreadyExists):  # another driver of the node was faster
            store.create(simulated)
            log_event(log, "node created", node=node)


class _Pool:
    """Keeps the node's pool published: every `interval` while that works, sooner (with
    backoff) after a failure, so an API server that is away at start or for a while is
    caught up with as soon as it answers, and logged once per state change."""

    def __init__(
        self, store: Store, source: Backend, state: DeviceState, metrics: DriverMetrics,
        interval: float, create_node: bool, health: HealthState,
    ) -> None:  # fmt: skip
        self.store, self.source, self.state, self.metrics = store, source, state, metrics
        self.health = health
        self.devices: tuple[str, ...] = ()  # the names of the inventory read last
        self.publisher = publisher.Publisher(store, state.driver, state.node)
        self.interval, self.create_node = interval, create_node
        self.published = False  # at least once since start
        self.backoff = Backoff(cap=interval)
        self.transitions = Transitions(log, "publishing ResourceSlices")

    def sync(self, inventory: DriverInventory | None = None) -> float:
        """Read the inventory (unless given) and publish it; the seconds until the next
        sync. The devices prepare can hand out follow the inventory even while the API
        server is away."""
        try:
            inventory = inventory or inventory_for(self.source, self.state.driver)
            inventory = self.state.publishable(inventory)  # around MIG instances not ours
            self.devices = tuple(d.name for d in inventory.devices)
            self.state.set_devices(inventory.devices)
            if self.create_node:
                _ensure_node(self.store, self.source, self.state.node)
            devices = tuple(self.health.tainted(inventory.devices))
            tainted = dataclasses.replace(inventory, devices=devices)
            result = self.publisher.publish(tainted)
        except Exception as err:  # keep serving prepared claims whatever failed
            self.transitions.failed(err, node=self.state.node)
            return self.backoff.next()
        self.metrics.set_published(result.devices, len(result.slices), result.generation)
        self.published = True
        self.transitions.succeeded(generation=result.generation, slices=len(result.slices))
        self.backoff.reset()
        return self.interval

    def names(self) -> tuple[str, ...]:
        """The node's devices (those the health monitor checks and the kubelet is told of)."""
        return self.devices

    def ready(self, plugin: PluginServer) -> str | None:
        """`/readyz`: the plugin answers and the node's devices are advertised."""
        return plugin.probe() if self.published else "ResourceSlices not published yet"


def run_driver(
    store: Store,
    driver: str,
    node: str,
    backend: str,
    profile: str | None,
    plugin_root: Path,
    cdi_dir: Path,
    metrics_port: int | None,
    stop: threading.Event,
    *,
    plugin_dir: Path | None = None,
    registry_dir: Path | None = None,
    resync_seconds: float = RESYNC_SECONDS,
    ready: threading.Event | None = None,
    backend_impl: Backend | None = None,
    create_node: bool = True,
    health_seconds: float = HEALTH_SECONDS,
    health_effects: Mapping[str, str] = DEFAULT_EFFECTS,
    sample_seconds: float = SAMPLE_SECONDS,
    ignored_xids: Collection[int] | None = None,
) -> None:
    """Publish the node's devices of `driver`, serve the kubelet plugin until `stop` is set.

    Raises NvmlUnavailable / ValueError (bad backend, profile or driver) before anything is
    served. The API server is not needed to start: the plugin serves what the checkpoint
    answers, and publishing is retried. Every `resync_seconds` the inventory is read again
    and republished (no writes when unchanged; slices deleted by someone else come back).
    `create_node`: create a simulated backend's Node when missing (the embedded store; on
    a cluster the kubelet owns Nodes). `ready` is set once serving. Every `health_seconds`
    the devices' health is checked; a change is published at once, as taints whose effect
    per severity `health_effects` gives (`kubedra.driver.health`); NVML's critical Xids
    but `ignored_xids` (applications' errors) are faults. With a metrics port, each device's
    figures are sampled every `sample_seconds` (`kubedra.driver.devicemetrics`).
    """
    paths = PluginPaths.for_driver(driver, plugin_root, plugin_dir, registry_dir)
    detail = names.dns_subdomain(node[:254])
    if detail:
        raise ValueError(f"node name {node[:80]!r}: {detail}")
    source = backend_impl or open_backend(backend, node, profile, ignored_xids=ignored_xids)
    metrics = DriverMetrics(driver, node)
    server: PluginServer | None = None
    state: DeviceState | None = None
    monitor: Monitor | None = None
    devices: DeviceMetrics | None = None
    statuses = StatusWriter(store, driver, cap=resync_seconds)
    try:
        inventory = inventory_for(source, driver)
        state = DeviceState(
            store, driver, node, paths.plugin_dir, cdi_dir, metrics, statuses=statuses,
            cdi_host=source.cdi_host(), nvml=source.mig_nvml(driver, paths.plugin_dir),
        )  # fmt: skip
        statuses.start().enqueue_all(state.prepared)  # what a kill or an outage left unwritten
        health = HealthState(driver, health_effects)
        sampler = source.device_sampler(driver, paths.plugin_dir)
        devices = DeviceMetrics(driver, node, sampler, state, health, interval=sample_seconds)
        devices.register(metrics.registry)
        pool = _Pool(store, source, state, metrics, resync_seconds, create_node, health)
        pool.devices = tuple(d.name for d in inventory.devices)
        wake = threading.Event()  # a health change: publish now, not at the next resync
        monitor = Monitor(
            health,
            pool.names,
            source.health_report(paths.plugin_dir),
            lambda changed: _health_changed(changed, health, wake),
            health_seconds,
        )
        monitor.check()  # the first slices already say what is broken
        delay = pool.sync(inventory)
        stream = HealthStream(health, node, pool.names)
        server = plugin = PluginServer(state, paths, health=stream)
        if metrics_port is not None:
            checks = {"/healthz": plugin.probe, "/readyz": lambda: pool.ready(plugin)}
            port = metrics.serve(metrics_port, checks=checks)
            log_event(log, "metrics serving", port=port)
            devices.start()  # sample the devices only while someone can scrape them
        plugin.start()
        monitor.start()
        if ready is not None:
            ready.set()
        threading.Thread(target=_wake_on, args=(stop, wake), daemon=True).start()
        while not stop.is_set():
            wake.wait(delay)
            wake.clear()
            if not stop.is_set():
                delay = pool.sync()
    finally:
        if devices is not None:
            devices.stop()
        if monitor is not None:
            monitor.stop()
        if server is not None:
            server.stop()
        statuses.stop()
        if state is not None:
            state.close()
        metrics.shutdown()
        source.close()
        log_event(log, "driver stopped", driver=driver, node=node)


def _wake_on(stop: threading.Event, wake: threading.Event) -> None:
    """Stopping ends the main loop's wait at once (it waits on `wake`)."""
    stop.wait()
    wake.set()


def _health_changed(changed: list[str], health: HealthState, wake: threading.Event) -> None:
    """Log each device whose health changed, and have the main loop publish at once."""
    snapshot = health.snapshot()
    for name in changed:
        device = snapshot[name]
        if device.healthy:
            log_event(log, "device healthy", device=name)
        else:
            faults = device.message()
            log_event(log, "device unhealthy", logging.WARNING, device=name, faults=faults)
    wake.set()


def cleanup(
    store: Store,
    driver: str,
    node: str,
    plugin_root: Path | None = None,
    cdi_dir: Path | None = None,
    *,
    plugin_dir: Path | None = None,
    registry_dir: Path | None = None,
) -> int:
    """Uninstall: delete the driver's slices on the node; with `plugin_root` also its sockets,
    plugin directory and checkpoint; with `cdi_dir` its CDI specs and their temporaries.
    Returns slices deleted."""
    deleted = publisher.cleanup(store, driver, node)
    if plugin_root is not None or plugin_dir is not None or registry_dir is not None:
        paths = PluginPaths.for_driver(
            driver, plugin_root or DEFAULT_ROOT, plugin_dir, registry_dir
        )
        with contextlib.suppress(FileNotFoundError):
            paths.registration_socket.unlink()
        shutil.rmtree(paths.plugin_dir, ignore_errors=True)
    if cdi_dir is not None:
        ClaimFiles(Path(), cdi_dir, driver).remove_all_specs()
    return deleted
