"""`kubedra ui`: the web dashboard of the cluster (embedded store or a real one)."""

from __future__ import annotations

from pathlib import Path

import click

from kubedra.cli.context import Settings, fails_cleanly, stop_on_signals
from kubedra.errors import KubedraError

# The simulator's figures in a source checkout (docs/figures beside src/).
_CHECKOUT_FIGURES = Path(__file__).resolve().parents[3] / "docs" / "figures"


def _check_urls(
    ctx: click.Context, param: click.Parameter, urls: tuple[str, ...]
) -> tuple[str, ...]:
    """Each an http(s) URL with a host (not a file: URL, which would read local files)."""
    from kubedra.web.devicemetrics import check_url

    try:
        return tuple(check_url(url) for url in urls)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


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
@click.option(
    "--device-metrics",
    "device_metrics",
    metavar="URL",
    multiple=True,
    callback=_check_urls,
    help="A node driver's metrics URL (`kubedra driver run --metrics-port P`: "
    "http://NODE:P/metrics); repeat for each. Each device's utilization, memory and "
    "temperature are scraped from them in the background and shown beside its allocation.",
)
@click.option(
    "--device-metrics-interval",
    type=click.FloatRange(0.2, 3600),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two scrapes of the --device-metrics URLs.",
)
@click.pass_obj
@fails_cleanly
def ui(
    settings: Settings,
    port: int,
    address: str,
    figures_dir: Path | None,
    device_metrics: tuple[str, ...],
    device_metrics_interval: float,
) -> None:
    """Serve a read-only web dashboard: fleet, claims and pods, pending, fragmentation."""
    from kubedra.web.api import App
    from kubedra.web.devicemetrics import Scraper
    from kubedra.web.mirror import Mirror
    from kubedra.web.server import Server

    mirror = Mirror(settings.open_store()).start()
    scraper = Scraper(device_metrics, device_metrics_interval) if device_metrics else None
    app = App(
        mirror,
        strict=settings.strict,
        backend=settings.backend.describe(),
        figures_dir=figures_dir or _default_figures(),
        device_metrics=scraper,
    )
    try:
        server = Server(app, address, port).start()
    except OSError as err:
        mirror.stop()
        raise KubedraError(f"cannot listen on {address}:{port}: {err.strerror or err}") from None
    if scraper is not None:
        scraper.start()
    stop = stop_on_signals()
    click.echo(f"kubedra ui: {server.url} ({app.backend}); Ctrl-C stops it", err=True)
    try:
        stop.wait()
    finally:
        server.stop()
        if scraper is not None:
            scraper.stop()
        mirror.stop()


def _default_figures() -> Path | None:
    for folder in (Path("docs/figures"), _CHECKOUT_FIGURES):
        if folder.is_dir():
            return folder
    return None
