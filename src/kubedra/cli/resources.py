"""`kubedra apply | get | describe | delete`: kubectl's verbs on the embedded store."""

from __future__ import annotations

import sys

import click
import msgspec

from kubedra.api.codec import to_dict
from kubedra.api.kinds import resolve_kind
from kubedra.api.loader import load_paths
from kubedra.api.meta import KubeObject
from kubedra.cli.columns import COLUMNS
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.lint import lint_problems
from kubedra.cli.output import render_objects, resource_name, table
from kubedra.cluster.store import Store, atomic
from kubedra.errors import NotFound, ValidationError


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
    """Create or update objects from manifests; all of them or, on any error, none."""
    result = load_paths(paths)
    problems = lint_problems(result, settings.strict)
    for p in problems:
        if not p.is_error:
            click.echo(str(p), err=True)
    errors = [p for p in problems if p.is_error]
    if errors:
        raise ValidationError(errors)
    store = settings.open_store()
    with atomic(store):
        verbs = [_apply_one(store, loaded.obj) for loaded in result.objects]
    for loaded, verb in zip(result.objects, verbs, strict=True):
        click.echo(f"{resource_name(loaded.obj)}/{loaded.obj.name} {verb}")


def _apply_one(store: Store, obj: KubeObject) -> str:
    cls = type(obj)
    try:
        current = store.get(cls, obj.name, obj.namespace or "default")
    except NotFound:
        store.create(obj)
        return "created"
    meta = msgspec.structs.replace(
        obj.metadata,
        resource_version=current.metadata.resource_version,
        uid=current.metadata.uid,
        namespace=current.metadata.namespace,
    )
    desired = msgspec.structs.replace(obj, metadata=meta)
    if _same(current, desired):
        return "unchanged"
    store.update(desired)
    return "configured"


def _same(current: KubeObject, desired: KubeObject) -> bool:
    ignore = ("creationTimestamp", "generation", "resourceVersion", "uid")
    a, b = to_dict(current), to_dict(desired)
    for data in (a, b):
        data.pop("status", None)
        for key in ignore:
            data.get("metadata", {}).pop(key, None)
    return a == b


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
