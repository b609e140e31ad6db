"""`kubedra driver run | cleanup | fault`: the node agent (ResourceSlices + kubelet DRA plugin),
and faults injected into a simulated node's devices."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kubedra.cli.complete import profile_names
from kubedra.cli.context import Settings, fails_cleanly, stop_on_signals
from kubedra.driver.health import FaultKind as FAULT_KINDS

DIRS = [
    click.option(
        "--plugin-root",
        default="/var/lib/kubelet",
        show_default=True,
        help="The kubelet's root (plugins/ and plugins_registry/ below it).",
    ),
    click.option(
        "--plugin-dir", type=click.Path(path_type=Path), help="Override <root>/plugins/<driver>."
    ),
    click.option(
        "--registry-dir", type=click.Path(path_type=Path), help="Override <root>/plugins_registry."
    ),
    click.option("--cdi-dir", type=click.Path(path_type=Path), help="Where CDI specs are written."),
]


F = TypeVar("F", bound=Callable[..., Any])


def _with_dirs(fn: F) -> F:
    """The kubelet-directory options both subcommands take."""
    for option in reversed(DIRS):
        fn = option(fn)
    return fn


@click.group()
def driver() -> None:
    """Run or uninstall a DRA driver on a node."""


@driver.command("run")
@click.option("--driver", "name", required=True, help="Driver name, e.g. gpu.nvidia.com.")
@click.option("--node", required=True)
@click.option("--backend", type=click.Choice(["nvml", "simulated"]), required=True)
@click.option(
    "--profile",
    shell_complete=profile_names,
    help="Catalog profile for --backend simulated (kubedra cluster profiles).",
)
@click.option("--metrics-port", type=int, help="Serve Prometheus metrics on this port.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Structured logs on stderr: key=value lines, or JSON lines for log shippers.",
)
@click.option(
    "--health-effects",
    default="degraded=NoSchedule,failed=NoExecute",
    show_default=True,
    help="The taint effect per fault severity: degraded (thermal, power) and failed (GPU "
    "lost, Xid, double-bit ECC); None, NoSchedule or NoExecute.",
)
@click.option(
    "--ignored-xids",
    default="",
    help="Xid codes that leave a GPU healthy: a list, +CODES to add to NVIDIA's application "
    "errors (13,31,43,45,68,109, the default), or none.",
)
@click.option(
    "--metrics-interval",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds between two samplings of the devices' figures (utilization, memory, ...).",
)
@_with_dirs
@click.pass_obj
@fails_cleanly
def run(
    settings: Settings,
    name: str,
    node: str,
    backend: str,
    profile: str | None,
    metrics_port: int | None,
    log_format: str,
    health_effects: str,
    ignored_xids: str,
    metrics_interval: float,
    plugin_root: str,
    plugin_dir: Path | None,
    registry_dir: Path | None,
    cdi_dir: Path | None,
) -> None:
    """Publish the node's devices and serve the kubelet plugin until SIGINT/SIGTERM."""
    from kubedra.driver import DEFAULT_CDI_DIR, run_driver
    from kubedra.driver.backends import parse_xids
    from kubedra.driver.health import parse_effects
    from kubedra.driver.logs import configure_logging

    # a node agent logs its events (prepares, recoveries) by default; -v adds debug output
    configure_logging(logging.DEBUG if settings.verbosity else logging.INFO, log_format == "json")
    stop = stop_on_signals()
    run_driver(
        settings.open_store(create=True),
        name,
        node,
        backend,
        profile,
        Path(plugin_root),
        cdi_dir or Path(DEFAULT_CDI_DIR),
        metrics_port,
        stop,
        plugin_dir=plugin_dir,
        registry_dir=registry_dir,
        create_node=not settings.backend.is_kubernetes(),
        health_effects=parse_effects(health_effects),
        ignored_xids=parse_xids(ignored_xids) if ignored_xids else None,
        sample_seconds=metrics_interval,
    )


@driver.command("cleanup")
@click.option("--driver", "name", required=True)
@click.option("--node", required=True)
@_with_dirs
@click.pass_obj
@fails_cleanly
def cleanup_command(
    settings: Settings,
    name: str,
    node: str,
    plugin_root: str,
    plugin_dir: Path | None,
    registry_dir: Path | None,
    cdi_dir: Path | None,
) -> None:
    """Remove the driver's slices (and its sockets, checkpoint and CDI specs) from a node."""
    from kubedra.driver import cleanup

    deleted = cleanup(
        settings.open_store(),
        name,
        node,
        Path(plugin_root),
        cdi_dir,
        plugin_dir=plugin_dir,
        registry_dir=registry_dir,
    )
    click.echo(f"driver {name}: {deleted} slice(s) removed from node {node}")


@driver.command("fault")
@click.option("--driver", "name", required=True, help="The running driver's name.")
@click.option("--node", required=True, help="The node it runs on.")
@click.option("--device", required=True, help="The device, as published (e.g. gpu-3).")
@click.option(
    "--kind",
    type=click.Choice([k.value for k in FAULT_KINDS]),
    help="lost (fell off the bus), xid (a critical Xid), ecc (double-bit), thermal, power.",
)
@click.option("--clear", is_flag=True, help="Remove the fault (every fault without --kind).")
@_with_dirs
@fails_cleanly
def fault(
    name: str,
    node: str,
    device: str,
    kind: str | None,
    clear: bool,
    plugin_root: str,
    plugin_dir: Path | None,
    registry_dir: Path | None,
    cdi_dir: Path | None,
) -> None:
    """Break (or mend) a device of a driver running the simulated backend, for tests and
    demos: give the same --plugin-root/--plugin-dir as the running driver, which taints
    the device in its ResourceSlice within a second and tells the kubelet."""
    from kubedra.driver import faults
    from kubedra.driver.health import FaultKind
    from kubedra.driver.kubelet import PluginPaths

    if kind is None and not clear:
        raise click.UsageError("give --kind, or --clear")
    paths = PluginPaths.for_driver(name, Path(plugin_root), plugin_dir, registry_dir)
    chosen = FaultKind(kind) if kind else None
    faults.inject(paths.plugin_dir, node, device, chosen, clear)
    what = kind or "every fault"
    click.echo(f"driver {name}: {what} {'cleared on' if clear else 'injected into'} {device}")
