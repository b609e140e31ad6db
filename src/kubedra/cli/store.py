"""`kubedra store check | repair | backup | restore`: looking after the embedded store file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cluster import repair as care


@click.group("store")
def store() -> None:
    """Check, repair, back up or restore the embedded store (--store)."""


@store.command("check")
@click.pass_obj
@fails_cleanly
def check(settings: Settings) -> None:
    """Look for every fault kubedra can see, changing nothing (exit 1 if any)."""
    path = Path(settings.embedded_path("store check"))
    report = care.check(path)
    for problem in report.problems:
        click.echo(f"problem: {problem}")
    summary = (
        f"store {path}: {report.objects} object(s), {report.changes} change-log row(s), "
        f"{report.log_frames} write-ahead log frame(s)"
    )
    if report.problems:
        click.echo(f"{summary}: {len(report.problems)} problem(s)", err=True)
        sys.exit(1)
    click.echo(f"{summary}: no faults found")


@store.command("repair")
@click.option("--force", is_flag=True, help="Rebuild even if check finds no fault.")
@click.pass_obj
@fails_cleanly
def repair(settings: Settings, force: bool) -> None:
    """Keep the damaged file aside, recover what can be read into a new store, say what
    was lost. Stop every kubedra process that uses the store first."""
    path = Path(settings.embedded_path("store repair"))
    report = care.repair(path, force=force)
    if report is None:
        click.echo(f"store {path}: no faults found, nothing to repair (--force rebuilds it)")
        return
    click.echo(f"store {path} repaired")
    for line in report.lines():
        click.echo(f"  {line}")


@store.command("backup")
@click.argument("dest", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
@fails_cleanly
def backup(settings: Settings, dest: Path) -> None:
    """Copy the store to the new file DEST (consistent while others write)."""
    path = Path(settings.embedded_path("store backup"))
    report = care.backup(path, dest)
    click.echo(f"store {path} backed up to {dest}: {report.objects} object(s)")


@store.command("restore")
@click.argument("backup_file", metavar="BACKUP", type=click.Path(path_type=Path))
@click.pass_obj
@fails_cleanly
def restore(settings: Settings, backup_file: Path) -> None:
    """Replace the store by a checked copy of BACKUP (the replaced one is kept aside)."""
    path = Path(settings.embedded_path("store restore"))
    aside = care.restore(backup_file, path)
    kept = f"; the replaced store is kept as {aside}" if aside else ""
    click.echo(f"store {path} restored from {backup_file}{kept}")
