"""Entry point of the `kubedra` command (console script `kubedra`): wires the subcommands.

Subcommands are imported when they run or are completed, not for every command: `kubedra
get pods` must answer as fast as `kubectl get pods`, without importing the simulator, the
dashboard's server or a cluster client it does not use. `--help` lists them from `LAZY`.
"""

from __future__ import annotations

import importlib
import sys

import click

from kubedra import __version__
from kubedra.cli import verbose
from kubedra.cli.context import Settings, backend_of, fails_cleanly

# name -> (module under kubedra.cli, attribute, the one line `kubedra --help` shows)
LAZY: dict[str, tuple[str, str, str]] = {
    "allocate": ("scheduling", "allocate_command", "Run the allocator on manifests (no store)."),
    "apply": ("apply", "apply", "Create or update objects from manifests, as kubectl apply."),
    "cluster": ("cluster", "cluster", "Create simulated nodes, or reset the store."),
    "config": ("config", "config", "Show or choose where commands go (contexts)."),
    "controller": ("controller", "controller", "Run kubedra's controllers (taint eviction)."),
    "convert": ("convert", "convert", "Print manifests as upstream resource.k8s.io/v1."),
    "delete": ("resources", "delete", "Delete objects (KIND NAME..., -l, --all, -f), wait."),
    "describe": ("resources", "describe", "Show objects in detail, with their ties and events."),
    "dev-cluster": ("devcluster", "dev_cluster", "Run upstream's control plane (and a real node)."),
    "devices": ("scheduling", "devices", "The device inventory, and the claims holding them."),
    "diff": ("apply", "diff", "What `apply` would change, as `kubectl diff`."),
    "driver": ("driver", "driver", "Run or uninstall a DRA driver on a node."),
    "explain": ("scheduling", "explain", "Why a pod or claim fits, or nowhere; KIND.FIELD: docs."),
    "get": ("resources", "get", "List objects of a kind, as `kubectl get`."),
    "schedule": ("scheduling", "schedule", "Schedule pending pods."),
    "scheduler": ("scheduler", "scheduler", "Run kubedra's scheduler as a component, or check it."),
    "sim": ("sim", "sim", "Simulate DRA placement (and the device-plugin baseline) on a trace."),
    "store": ("store", "store", "Check, repair, back up or restore the embedded store."),
    "ui": ("ui", "ui", "Serve a read-only web dashboard."),
}


class LazyGroup(click.Group):
    """A group whose subcommands (but `lint` and `demo`, defined here) are imported on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY:
            module, attribute, _ = LAZY[name]
            command = getattr(importlib.import_module(f"kubedra.cli.{module}"), attribute)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of `--help`, from the table: no subcommand imported to print it."""
        rows = [(name, LAZY[name][2]) for name in LAZY]
        rows += [(name, cmd.get_short_help_str(80)) for name, cmd in self.commands.items()]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    envvar="KUBEDRA_STORE",
    default=None,
    help="Path of an embedded store (or KUBEDRA_STORE). Default: the current context's "
    "(`kubedra config current-context`), else ~/.local/share/kubedra/state.db.",
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
    store: str | None,
    kubeconfig: str | None,
    kube_context: str | None,
    in_cluster: bool,
    strict: bool,
    verbosity: int,
) -> None:
    """kubedra: Kubernetes Dynamic Resource Allocation for GPU clusters.

    Commands work on an embedded store or, with --kubeconfig, --context, --in-cluster, a
    kubedra context naming one or KUBECONFIG set, on a real cluster (`kubedra config
    current-context` says which, and why).

    Shell completion: eval "$(_KUBEDRA_COMPLETE=bash_source kubedra)" (zsh_source, fish_source).
    """
    verbose.setup(verbosity)
    ctx.call_on_close(verbose.timed(ctx.invoked_subcommand))
    ctx.obj = Settings(strict=strict, verbosity=verbosity, backend=backend_of(ctx))


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
    from kubedra.cli.lint import run_lint

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


def main() -> None:
    """Console-script entry point; usage errors exit 2 (click), user errors 1."""
    cli(prog_name="kubedra")
