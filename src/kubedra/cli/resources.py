"""`kubedra apply | get | describe | delete`: kubectl's verbs on the embedded store."""

from __future__ import annotations

import sys

import click

from kubedra.api.apply import LAST_APPLIED
from kubedra.api.kinds import resolve_kind
from kubedra.api.loader import LoadedObject, LoadResult
from kubedra.api.meta import KubeObject
from kubedra.cli.columns import COLUMNS
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.lint import checked_load
from kubedra.cli.output import render_objects, resource_name, table
from kubedra.cluster.apply import Applied, apply_object
from kubedra.cluster.store import Store, atomic
from kubedra.errors import ValidationError


@click.command()
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    required=True,
    help="File, directory (recursive) or - for stdin.",
)
@click.pass_obj
@fails_cleanly
def apply(settings: Settings, paths: tuple[str, ...]) -> None:
    """Create or update objects from manifests, as `kubectl apply` does: fields others set
    are kept, fields dropped since the last apply are removed; on the embedded store all
    objects or, on any error, none."""
    result, warnings = checked_load(paths, settings.strict)
    for warning in warnings:
        click.echo(str(warning), err=True)
    store = settings.open_store()
    with atomic(store):
        outcomes = [_apply_located(store, result, loaded) for loaded in result.objects]
    for loaded, applied in zip(result.objects, outcomes, strict=True):
        name = f"{resource_name(loaded.obj)}/{loaded.obj.name}"
        if applied.adopted:
            click.echo(
                f"warning: {name} has no {LAST_APPLIED} annotation (it was not created by "
                "apply), so fields dropped from the manifest since were kept; the annotation "
                "is added now",
                err=True,
            )
        click.echo(f"{name} {applied.verb}")


def _apply_located(store: Store, result: LoadResult, loaded: LoadedObject) -> Applied:
    """Apply one object; a refusal (the store's update rules, the API server's validation)
    is reported at the manifest's file and line, like a problem found by lint."""
    try:
        return apply_object(store, loaded.obj)
    except ValidationError as err:
        raise ValidationError(result.locate(p, loaded.source) for p in err.problems) from None


@click.command()
@click.argument("kind")
@click.argument("name", required=False)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-A", "--all-namespaces", is_flag=True)
@click.option("-o", "--output", type=click.Choice(["wide", "yaml", "json", "name"]))
@click.option("-l", "--selector", help="Label selector, e.g. app=vllm,tier!=batch")
@click.pass_obj
@fails_cleanly
def get(
    settings: Settings,
    kind: str,
    name: str | None,
    namespace: str,
    all_namespaces: bool,
    output: str | None,
    selector: str | None,
) -> None:
    """List objects of a kind (short names: rc, rct, dc, rs, po, no, ns)."""
    cls = resolve_kind(kind)
    store = settings.open_store()
    if name:
        objects: list[KubeObject] = [store.get(cls, name, namespace)]
    else:
        objects = list(
            store.list(cls, None if all_namespaces else namespace, label_selector=selector)
        )
    if output in ("yaml", "json", "name"):
        if objects or output == "name":
            sys.stdout.write(render_objects(objects, output))
        return
    if not objects:
        click.echo(
            f"No resources found in {namespace} namespace."
            if cls.NAMESPACED and not all_namespaces
            else "No resources found",
            err=True,
        )
        return
    base, wide = COLUMNS[cls]
    columns = base + (wide if output == "wide" else [])
    with_ns = all_namespaces and cls.NAMESPACED
    header = (["NAMESPACE"] if with_ns else []) + ["NAME"] + [c for c, _ in columns]
    rows = [
        ([o.namespace] if with_ns else []) + [o.name] + [fn(o) for _, fn in columns]
        for o in objects
    ]
    sys.stdout.write(table(header, rows))


@click.command()
@click.argument("kind")
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.pass_obj
@fails_cleanly
def describe(settings: Settings, kind: str, name: str, namespace: str) -> None:
    """Show one object in detail (its stored form, with status and conditions)."""
    from kubedra.cli.describe import describe_object

    cls = resolve_kind(kind)
    store = settings.open_store()
    sys.stdout.write(describe_object(store.get(cls, name, namespace)))


@click.command()
@click.argument("kind")
@click.argument("names", nargs=-1, required=True)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.pass_obj
@fails_cleanly
def delete(settings: Settings, kind: str, names: tuple[str, ...], namespace: str) -> None:
    """Delete objects (owned objects, such as generated claims, follow)."""
    cls = resolve_kind(kind)
    store = settings.open_store()
    for name in names:
        store.delete(cls, name, namespace)
        click.echo(f'{resource_name(cls)} "{name}" deleted')
