"""Entry point of the `kubedra` command (console script `kubedra`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from kubedra import __version__
from kubedra.cli.lint import run_lint


@dataclass
class Settings:
    """Global options, shared by every subcommand through click's context."""

    store: str
    strict: bool
    verbosity: int


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", envvar="KUBEDRA_STORE", default=".kubedra/state.db",
              show_default=True, help="Path of the embedded state store.")
@click.option("--strict", is_flag=True, help="Upstream behaviour exactly; warnings fail.")
@click.option("-v", "verbosity", count=True, help="More output (-v, -vv).")
@click.version_option(__version__, prog_name="kubedra")
@click.pass_context
def cli(ctx: click.Context, store: str, strict: bool, verbosity: int) -> None:
    """kubedra: Kubernetes Dynamic Resource Allocation for GPU clusters."""
    ctx.obj = Settings(store=store, strict=strict, verbosity=verbosity)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--strict", "strict_here", is_flag=True, help="Warnings fail too (exit 1).")
@click.pass_obj
def lint(settings: Settings, paths: tuple[str, ...], strict_here: bool) -> None:
    """Validate manifests (FILE, DIR or - for stdin) as the API server would."""
    code = run_lint(paths, sys.stdout, strict=settings.strict or strict_here)
    sys.exit(code)


@cli.command()
@click.pass_obj
def demo(settings: Settings) -> None:
    """Run the seed scenario (examples/seed) and show what kubedra makes of it."""
    from kubedra.cli.demo import run_demo

    sys.exit(run_demo(sys.stdout))


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="kubedra")
