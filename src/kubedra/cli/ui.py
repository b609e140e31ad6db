"""`kubedra ui`: the web dashboard of the cluster (embedded store or a real one)."""

from __future__ import annotations

from pathlib import Path

import click

from kubedra.cli.context import Settings, fails_cleanly, stop_on_signals
from kubedra.errors import KubedraError

# The simulator's figures in a source checkout (docs/figures beside src/).
_CHECKOUT_FIGURES = Path(__file__).resolve().parents[3] / "docs" / "figures"


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback exposes the cluster's state.",
)
@click.option(
    "--figures",
    "figures_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Simulator figures to show (default: docs/figures here or in the checkout).",
)
@click.pass_obj
@fails_cleanly
def ui(settings: Settings, port: int, address: str, figures_dir: Path | None) -> None:
    """Serve a read-only web dashboard: fleet, claims and pods, pending, fragmentation."""
    from kubedra.web.api import App
    from kubedra.web.mirror import Mirror
    from kubedra.web.server import Server

    mirror = Mirror(settings.open_store()).start()
    app = App(
        mirror,
        strict=settings.strict,
        backend=settings.backend.describe(),
        figures_dir=figures_dir or _default_figures(),
    )
    try:
        server = Server(app, address, port).start()
    except OSError as err:
        mirror.stop()
        raise KubedraError(f"cannot listen on {address}:{port}: {err.strerror or err}") from None
    stop = stop_on_signals()
    click.echo(f"kubedra ui: {server.url} ({app.backend}); Ctrl-C stops it", err=True)
    try:
        stop.wait()
    finally:
        server.stop()
        mirror.stop()


def _default_figures() -> Path | None:
    for folder in (Path("docs/figures"), _CHECKOUT_FIGURES):
        if folder.is_dir():
            return folder
    return None
