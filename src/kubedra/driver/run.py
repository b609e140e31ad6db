"""The node agent's main loop, as `kubedra driver run` / `kubedra driver cleanup` call it."""

from __future__ import annotations

import contextlib
import shutil
import threading
from pathlib import Path

from kubedra.api.core import Node
from kubedra.api.validation import names
from kubedra.cluster.store import Store
from kubedra.driver import publisher
from kubedra.driver.backends import Backend, inventory_for, open_backend
from kubedra.driver.claimfiles import ClaimFiles
from kubedra.driver.kubelet import DEFAULT_ROOT, PluginPaths
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.metrics import DriverMetrics
from kubedra.driver.prepare import DeviceState
from kubedra.driver.server import PluginServer
from kubedra.errors import AlreadyExists, NotFound

DEFAULT_CDI_DIR = Path("/var/run/cdi")
RESYNC_SECONDS = 30.0  # upstream's DefaultSyncDelay
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
) -> None:
    """Publish the node's devices of `driver`, serve the kubelet plugin until `stop` is set.

    Raises NvmlUnavailable / ValueError (bad backend, profile or driver) before anything is
    served. Every `resync_seconds` the inventory is read again and republished (no writes
    when unchanged; slices deleted by someone else come back). `ready` is set once serving.
    """
    paths = PluginPaths.for_driver(driver, plugin_root, plugin_dir, registry_dir)
    detail = names.dns_subdomain(node[:254])
    if detail:
        raise ValueError(f"node name {node[:80]!r}: {detail}")
    source = backend_impl or open_backend(backend, node, profile)
    metrics = DriverMetrics(driver, node)
    server: PluginServer | None = None
    state: DeviceState | None = None
    try:
        inventory = inventory_for(source, driver)
        _ensure_node(store, source, node)
        pool = publisher.Publisher(store, driver, node)
        state = DeviceState(store, driver, node, paths.plugin_dir, cdi_dir, metrics)

        def sync() -> None:
            nonlocal inventory
            result = pool.publish(inventory)
            state.set_devices(inventory.devices)
            metrics.set_published(result.devices, len(result.slices), result.generation)

        sync()
        if metrics_port is not None:
            port = metrics.serve(metrics_port)
            log_event(log, "metrics serving", port=port)
        server = PluginServer(state, paths)
        server.start()
        if ready is not None:
            ready.set()
        while not stop.wait(resync_seconds):
            try:
                inventory = inventory_for(source, driver)
                sync()
            except Exception:  # keep serving prepared claims when a resync fails
                log.exception("resync failed")
    finally:
        if server is not None:
            server.stop()
        if state is not None:
            state.close()
        metrics.shutdown()
        source.close()
        log_event(log, "driver stopped", driver=driver, node=node)


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
