"""Entry point of the `kubedra` command (console script `kubedra`): wires the subcommands."""

from __future__ import annotations

import logging
import sys

import click
from click.core import ParameterSource

from kubedra import __version__
from kubedra.cli.cluster import cluster
from kubedra.cli.context import Settings
from kubedra.cli.convert import convert
from kubedra.cli.devcluster import dev_cluster
from kubedra.cli.driver import driver
from kubedra.cli.lint import run_lint
from kubedra.cli.resources import apply, delete, describe, get
from kubedra.cli.scheduler import scheduler
from kubedra.cli.scheduling import allocate_command, devices, explain, schedule
from kubedra.cli.sim import sim
from kubedra.cli.store import store
from kubedra.cli.ui import ui
from kubedra.cluster import DEFAULT_PATH
from kubedra.cluster.connect import Backend


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
@click.option("-v", "verbosity", count=True, help="More output (-v, -vv).")
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
    levels = {0: logging.WARNING, 1: logging.INFO}
    logging.basicConfig(
        level=levels.get(verbosity, logging.DEBUG),
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    given = ctx.get_parameter_source("store") is not ParameterSource.DEFAULT
    backend = Backend(
        store=store if given else None,
        kubeconfig=kubeconfig,
        context=kube_context,
        in_cluster=in_cluster,
    )
    ctx.obj = Settings(store=store, strict=strict, verbosity=verbosity, backend=backend)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--strict", "strict_here", is_flag=True, help="Warnings fail too (exit 1).")
@click.pass_obj
def lint(settings: Settings, paths: tuple[str, ...], strict_here: bool) -> None:
    """Validate manifests (FILE, DIR or - for stdin) as the API server would."""
    sys.exit(run_lint(paths, sys.stdout, strict=settings.strict or strict_here))


@cli.command()
@click.pass_obj
def demo(settings: Settings) -> None:
    """The seed scenario on a fresh store: placement, explanation, device-plugin contrast."""
    from kubedra.cli.demo import run_demo

    sys.exit(run_demo(sys.stdout, settings))


for command in (
    apply,
    convert,
    get,
    describe,
    delete,
    schedule,
    scheduler,
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
