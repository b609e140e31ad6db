"""`kubedra sim run | compare | report`: the trace-driven simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from kubedra.cli.context import fails_cleanly
from kubedra.sim.cli import sim_compare, sim_report, sim_run
from kubedra.sim.trace import OPENB_DIR

MODES = click.Choice(["saturate", "replay"])


@click.group()
def sim() -> None:
    """Simulate DRA placement (and the device-plugin baseline) on a cluster trace."""


F = TypeVar("F", bound=Callable[..., Any])


def _common(fn: F) -> F:
    """The input/output options `run` and `compare` share."""
    options = [
        click.option(
            "--nodes", required=True, help="Node list CSV (Alibaba openb) or cluster YAML."
        ),
        click.option(
            "--pods", required=True, help="Pod list CSV (Alibaba openb) or workload YAML."
        ),
        click.option("--out", required=True, help="Directory for CSV, plots and summary."),
        click.option("--seed", type=int, default=42, show_default=True),
        click.option("--mode", type=MODES, default="saturate", show_default=True),
        click.option("--max-pods", type=int, help="Only the first N arrivals."),
        click.option(
            "--load",
            type=click.FloatRange(min=0, min_open=True),
            help="Replay a Poisson stream drawn from the trace that offers this GPU load "
            "(1.0 = capacity) instead of the trace's own times.",
        ),
        click.option(
            "--horizon-h",
            type=click.FloatRange(min=0, min_open=True),
            default=6.0,
            show_default=True,
            help="Replay with --load: hours of arrivals.",
        ),
        click.option(
            "--cluster-share",
            type=click.FloatRange(min=0, max=1, min_open=True),
            default=1.0,
            show_default=True,
            help="Simulate this share of the nodes (drawn per GPU model by the seed).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@sim.command("run")
@click.option("--policy", required=True, help="A placement policy, or device-plugin.")
@_common
@fails_cleanly
def run(policy: str, **options: Any) -> None:
    """One policy: prints the final GPU allocation ratio and fragmentation."""
    sim_run(policy=policy, echo=click.echo, **options)


@sim.command("compare")
@click.option("--policy", "policies", multiple=True, required=True)
@click.option("--jobs", type=int, default=1, show_default=True, help="Runs in parallel.")
@_common
@fails_cleanly
def compare(policies: tuple[str, ...], jobs: int, **options: Any) -> None:
    """Several policies side by side on the same arrivals: GPU allocation and pods placed
    per model first (with device-plugin among them: what DRA gains over it), then the plots
    and the table; a line counts the runs' arrivals on a terminal."""
    sim_compare(policies=policies, jobs=jobs, echo=click.echo, **options)


@sim.command("report")
@click.option(
    "--out", required=True, help="The Markdown file to write (the repo's: docs/results.md)."
)
@click.option("--figures", help="Folder for the plots.  [default: figures/ beside --out]")
@click.option(
    "--data",
    default=str(OPENB_DIR),
    show_default=True,
    help="Folder with the Alibaba openb trace (node and pod list CSVs).",
)
@click.option(
    "--max-pods",
    type=click.IntRange(min=1),
    help="Only the first N arrivals of every run, the replay's too (a quick look).",
)
@click.option("--jobs", type=click.IntRange(min=1), default=2, show_default=True,
              help="Runs in parallel.")  # fmt: skip
@fails_cleanly
def report(out: str, figures: str | None, data: str, max_pods: int | None, jobs: int) -> None:
    """Run the report's experiments and write --out with figures (a line counts the runs
    on a terminal; the full report is about an hour on two cores)."""
    sim_report(out, figures, data_dir=data, max_pods=max_pods, jobs=jobs, echo=click.echo)
