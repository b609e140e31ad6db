"""`kubedra get | describe | delete`: kubectl's verbs for reading and removing objects."""

from __future__ import annotations

import sys
from collections.abc import Iterable

import click
import msgspec

from kubedra.api.kinds import resolve_kind
from kubedra.api.loader import load
from kubedra.api.meta import KubeObject
from kubedra.cli.columns import COLUMNS
from kubedra.cli.complete import kinds, object_names
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.output import render_list, render_objects, resource_name, table
from kubedra.errors import NotFound

Key = tuple[type[KubeObject], str, str]  # kind, name, namespace


@click.command()
@click.argument("kind", shell_complete=kinds)
@click.argument("name", required=False, shell_complete=object_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-A", "--all-namespaces", is_flag=True)
@click.option("-o", "--output", type=click.Choice(["wide", "yaml", "json", "name"]))
@click.option("-l", "--selector", help="Label selector, e.g. app=vllm,tier!=batch")
@click.option(
    "--show-managed-fields", is_flag=True, help="Keep metadata.managedFields in -o yaml|json."
)
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
    show_managed_fields: bool,
) -> None:
    """List objects of a kind (short names: rc, rct, dc, rs, dtr, po, no, ns); -o yaml|json
    prints a List, as kubectl does, or the object itself when NAME is given."""
    cls = resolve_kind(kind)
    store = settings.open_store()
    if name:
        objects: list[KubeObject] = [store.get(cls, name, namespace)]
    else:
        where = None if all_namespaces else namespace
        objects = list(store.list(cls, where, label_selector=selector))
    if output in ("yaml", "json", "name"):
        if not show_managed_fields:  # kubectl leaves them out unless asked
            objects = [_without_managed_fields(o) for o in objects]
        sys.stdout.write((render_objects if name else render_list)(objects, output))
        return
    if not objects:
        click.echo(
            f"No resources found in {namespace} namespace."
            if cls.NAMESPACED and not all_namespaces
            else "No resources found",
            err=True,
        )
        return
    sys.stdout.write(_table(cls, objects, output == "wide", all_namespaces and cls.NAMESPACED))


def _without_managed_fields(obj: KubeObject) -> KubeObject:
    meta = msgspec.structs.replace(obj.metadata, managed_fields=())
    return msgspec.structs.replace(obj, metadata=meta)


def _table(cls: type[KubeObject], objects: list[KubeObject], wide: bool, with_ns: bool) -> str:
    base, more = COLUMNS[cls]
    columns = base + (more if wide else [])
    header = (["NAMESPACE"] if with_ns else []) + ["NAME"] + [c for c, _ in columns]
    rows = [
        ([o.namespace] if with_ns else []) + [o.name] + [fn(o) for _, fn in columns]
        for o in objects
    ]
    return table(header, rows)


@click.command()
@click.argument("kind", shell_complete=kinds)
@click.argument("name", shell_complete=object_names)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.pass_obj
@fails_cleanly
def describe(settings: Settings, kind: str, name: str, namespace: str) -> None:
    """Show one object in detail: its fields, the objects it is tied to (a claim's pods and
    devices, a pod's claims) and its events."""
    from kubedra.cli.describe import describe_object

    cls = resolve_kind(kind)
    store = settings.open_store()
    sys.stdout.write(describe_object(store, store.get(cls, name, namespace)))


@click.command()
@click.argument("kind", required=False, shell_complete=kinds)
@click.argument("names", nargs=-1, shell_complete=object_names)
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    help="Delete the objects of these manifests (file, directory or -).",
)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("--ignore-not-found", is_flag=True, help="An object that is not there is no error.")
@click.pass_obj
@fails_cleanly
def delete(
    settings: Settings,
    kind: str | None,
    names: tuple[str, ...],
    paths: tuple[str, ...],
    namespace: str,
    ignore_not_found: bool,
) -> None:
    """Delete objects by KIND NAME... or by -f FILE|DIR (owned objects, such as generated
    claims, follow). Every object is tried; any that was not found makes the exit 1."""
    if paths and kind:
        raise click.UsageError("give KIND NAME... or -f FILE|DIR, not both")
    keys = _from_files(paths, namespace) if paths else _from_names(kind, names, namespace)
    store = settings.open_store()
    missing = 0
    for cls, name, ns in keys:
        try:
            store.delete(cls, name, ns)
        except NotFound as err:
            missing += not ignore_not_found
            if not ignore_not_found:
                click.echo(f"error: {err}", err=True)
            continue
        click.echo(f'{resource_name(cls)} "{name}" deleted')
    if missing:
        sys.exit(1)


def _from_names(kind: str | None, names: Iterable[str], namespace: str) -> list[Key]:
    if kind is None:
        raise click.UsageError("give KIND NAME... or -f FILE|DIR")
    cls = resolve_kind(kind)
    keys = [(cls, name, namespace) for name in names]
    if not keys:
        raise click.UsageError(f"no name given for {kind} (KIND NAME..., or -f FILE|DIR)")
    return keys


def _from_files(paths: Iterable[str], namespace: str) -> list[Key]:
    """The objects the manifests name, in file order (namespace: the manifest's, else -n)."""
    keys = [
        (type(loaded.obj), loaded.obj.name, loaded.obj.namespace or namespace)
        for loaded in load(list(paths))
    ]
    if not keys:
        raise click.UsageError(f"no objects in {', '.join(paths)}")
    return keys
