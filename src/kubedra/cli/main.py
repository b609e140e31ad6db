"""Entry point of the `kubedra` command (console script `kubedra`): wires the subcommands."""

from __future__ import annotations

import sys

import click

from kubedra import __version__
from kubedra.cli import verbose
from kubedra.cli.apply import apply, diff
from kubedra.cli.cluster import cluster
from kubedra.cli.context import Settings, backend_of, fails_cleanly
from kubedra.cli.controller import controller
from kubedra.cli.convert import convert
from kubedra.cli.devcluster import dev_cluster
from kubedra.cli.driver import driver
from kubedra.cli.lint import run_lint
from kubedra.cli.resources import delete, describe, get
from kubedra.cli.scheduler import scheduler
from kubedra.cli.scheduling import allocate_command, devices, explain, schedule
from kubedra.cli.sim import sim
from kubedra.cli.store import store
from kubedra.cli.ui import ui
from kubedra.cluster import DEFAULT_PATH


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    envvar="KUBEDRA_STORE",
    default=DEFAULT_PATH,
    show_default=True,
    help="Path of the embedded state store (or KUBEDRA_STORE).",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Work on the cluster of this kubeconfig instead of the embedded store.",
)
@click.option("--context", "kube_context", help="The kubeconfig context to use.")
@click.option(
    "--in-cluster", is_flag=True, help="Use the pod's service account (inside a cluster)."
)
@click.option("--strict", is_flag=True, help="Upstream behaviour exactly; warnings fail.")
@click.option(
    "-v",
    "--verbose",
    "verbosity",
    count=True,
    help="On stderr: -v the store used and the time taken, -vv also every store call.",
)
@click.version_option(__version__, prog_name="kubedra")
@click.pass_context
def cli(
    ctx: click.Context,
    store: str,
    kubeconfig: str | None,
    kube_context: str | None,
    in_cluster: bool,
    strict: bool,
    verbosity: int,
) -> None:
    """kubedra: Kubernetes Dynamic Resource Allocation for GPU clusters.

    Commands work on the embedded store (--store) or, with --kubeconfig, --context,
    --in-cluster or KUBECONFIG set, on a real cluster.

    Shell completion: eval "$(_KUBEDRA_COMPLETE=bash_source kubedra)" (zsh_source, fish_source).
    """
    verbose.setup(verbosity)
    ctx.call_on_close(verbose.timed(ctx.invoked_subcommand))
    ctx.obj = Settings(store=store, strict=strict, verbosity=verbosity, backend=backend_of(ctx))


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--strict", "strict_here", is_flag=True, help="Warnings fail too (exit 1).")
@click.option(
    "--cluster",
    is_flag=True,
    help="Also check selectors against the devices the cluster (or embedded store) publishes.",
)
@click.pass_obj
@fails_cleanly
def lint(settings: Settings, paths: tuple[str, ...], strict_here: bool, cluster: bool) -> None:
    """Validate manifests (FILE, DIR or - for stdin) as the API server would."""
    store = settings.open_store() if cluster else None
    sys.exit(run_lint(paths, sys.stdout, strict=settings.strict or strict_here, cluster=store))


@cli.command()
@click.option("--yes", is_flag=True, help="Replace the store given with --store, not empty.")
@click.pass_obj
@fails_cleanly
def demo(settings: Settings, yes: bool) -> None:
    """The seed scenario on a fresh store of its own (.kubedra/demo.db, or --store, which
    is replaced only when empty or agreed): placement, explanation, device-plugin contrast."""
    from kubedra.cli.demo import run_demo

    sys.exit(run_demo(sys.stdout, settings, replace=yes))


for command in (
    apply,
    diff,
    convert,
    get,
    describe,
    delete,
    schedule,
    scheduler,
    controller,
    explain,
    devices,
    allocate_command,
    cluster,
    dev_cluster,
    driver,
    sim,
    ui,
    store,
):
    cli.add_command(command)


def main() -> None:
    """Console-script entry point; usage errors exit 2 (click), user errors 1."""
    cli(prog_name="kubedra")
