"""`kubedra controller run`: kubedra's controllers as a long-running component."""

from __future__ import annotations

import socket
import uuid

import click

from kubedra.cli.context import Settings, fails_cleanly, stop_on_signals
from kubedra.controllers.taint_eviction import NAME, DeviceTaintEvictionController


@click.group()
def controller() -> None:
    """Run kubedra's controllers (device taint eviction) as a component."""


@controller.command("run")
@click.option(
    "--interval",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds between two looks at the cluster at most (a due eviction wakes it sooner).",
)
@click.pass_obj
@fails_cleanly
def run(settings: Settings, interval: float) -> None:
    """Evict pods from devices with a NoExecute taint they do not tolerate (upstream's
    device-taint-eviction-controller), until SIGINT/SIGTERM, on a cluster or the embedded
    store. Run one replica: it does not elect a leader."""
    if interval <= 0:
        raise click.BadParameter("must be positive", param_hint="--interval")
    store = settings.open_store()
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    taints = DeviceTaintEvictionController(store, identity=identity)
    stop = stop_on_signals()
    click.echo(f"kubedra {NAME} on {settings.backend.describe()}", err=True)
    taints.run(stop, interval=interval)
