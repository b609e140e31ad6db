"""`kubedra driver run | cleanup`: the node agent (ResourceSlices + kubelet DRA plugin)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kubedra.cli.complete import profile_names
from kubedra.cli.context import Settings, fails_cleanly, stop_on_signals

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
    plugin_root: str,
    plugin_dir: Path | None,
    registry_dir: Path | None,
    cdi_dir: Path | None,
) -> None:
    """Publish the node's devices and serve the kubelet plugin until SIGINT/SIGTERM."""
    from kubedra.driver import DEFAULT_CDI_DIR, run_driver
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
