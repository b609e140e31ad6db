"""`kubedra convert`: manifests in the form upstream's API server accepts, for kubectl."""

from __future__ import annotations

import sys

import click

from kubedra.api.resource import ResourceSlice
from kubedra.cel.portable import portable_object
from kubedra.cel.validation import published_names
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.lint import checked_load
from kubedra.cli.output import render_objects


@click.command()
@click.option(
    "-f", "--filename", "paths", multiple=True, required=True, help="File, directory or -."
)
@click.option(
    "--domain",
    help='Driver domain for bare lookups such as device.capacity["memory"] (default: the '
    "driver whose slices in the files publish the name, else the well-known one).",
)
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml")
@click.pass_obj
@fails_cleanly
def convert(settings: Settings, paths: tuple[str, ...], domain: str | None, output: str) -> None:
    """Print manifests as upstream resource.k8s.io/v1 (v1beta1-style requests moved under
    `exactly`, kubedra-only bare CEL lookups qualified by a driver domain), so that
    `kubedra convert -f DIR | kubectl apply -f -` works on a real cluster."""
    result, _ = checked_load(paths, settings.strict)
    slices = [o.obj for o in result.objects if isinstance(o.obj, ResourceSlice)]
    known = published_names(slices)
    converted = []
    for loaded in result.objects:
        obj, rewrites = portable_object(loaded.obj, known, domain)
        for r in rewrites:
            note = f" ({r.note})" if r.note else ""
            where = f"{loaded.source.file}: {obj.KIND} {obj.name}: {r.path}"
            click.echo(f"{where}: rewritten to {r.after}{note}", err=True)
        converted.append(obj)
    sys.stdout.write(render_objects(converted, output))
