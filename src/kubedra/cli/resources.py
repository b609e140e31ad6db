"""`kubedra get | describe | delete`: kubectl's verbs for reading and removing objects.

Resources are named as kubectl users type them: a kind, plural or short name, qualified by
group (`resourceclaim.resource.k8s.io`, `resourceclaims.v1.resource.k8s.io`), several at
once (`get rc,pods`), `TYPE/NAME` arguments (`get pod/a rc/b`), the `all` category (of
kubedra's kinds, pods: upstream's `all` has no DRA kind either) and `events`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click
import msgspec

from kubedra.api.codec import json_text, to_dict, yaml_text
from kubedra.api.core import Pod
from kubedra.api.kinds import resolve_kind
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaim
from kubedra.cli.columns import COLUMNS
from kubedra.cli.complete import kinds, object_names
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.events import Event, events_table, is_events, list_events
from kubedra.cli.output import (
    Output,
    labels_text,
    parse_output,
    render_columns,
    render_jsonpath,
    render_objects,
    resource_name,
    table,
)
from kubedra.cluster import SqliteStore
from kubedra.cluster.selectors import parse_label_selector
from kubedra.cluster.store import Store
from kubedra.errors import KubedraError, NotFound

Key = tuple[type[KubeObject], str, str]  # kind, name, namespace
Kind = type[KubeObject] | None  # None: events
ALL_CATEGORY: tuple[type[KubeObject], ...] = (Pod,)  # kubectl's `all`, of kubedra's kinds

NAMESPACE = click.option("-n", "--namespace", default="default", show_default=True)
ALL_NAMESPACES = click.option(
    "-A", "--all-namespaces", is_flag=True, help="Every namespace (-n is ignored)."
)
SELECTOR = click.option("-l", "--selector", help="Label selector, e.g. app=vllm,tier!=batch")


def resolve(text: str) -> type[KubeObject]:
    """A kind as kubectl resolves a resource argument: name, plural or short name, or one
    of those qualified by its group or version and group (`rc.resource.k8s.io`)."""
    try:
        return resolve_kind(text)
    except KeyError:
        head, dot, rest = text.partition(".")
        if not dot:
            raise
        try:
            cls = resolve_kind(head)
        except KeyError:
            raise KeyError(f'the server doesn\'t have a resource type "{text}"') from None
        group, version = cls.API_GROUP, cls.API_VERSION
        if rest.lower() in ({group, f"{version}.{group}"} if group else {version, ""}):
            return cls
        raise KeyError(f'the server doesn\'t have a resource type "{text}"') from None


@dataclass
class Request:
    """The resources asked for, in order; `prefixed`: names are printed `kind/name`, as
    kubectl does when several kinds (or TYPE/NAME arguments, or `all`) were asked."""

    kinds: list[Kind] = field(default_factory=list)
    names: dict[Kind, list[str]] = field(default_factory=dict)
    prefixed: bool = False

    @property
    def single_object(self) -> bool:
        """One kind and one name: kubectl prints the object itself, not a List."""
        return len(self.kinds) == 1 and len(self.names.get(self.kinds[0], [])) == 1


def parse_request(kind: str, names: Sequence[str]) -> Request:
    """`KIND[,KIND...] [NAME...]` or `TYPE/NAME...`, as kubectl reads its arguments."""
    if "/" in kind:
        return _slashed([kind, *names])
    if any("/" in n for n in names):
        raise click.UsageError(
            "there is no need to specify a resource type as a separate argument when "
            "passing arguments in resource/name form (e.g. 'kubedra get resource/<name>')"
        )
    request = Request()
    for word in filter(None, kind.split(",")):
        expanded: Sequence[Kind] = ALL_CATEGORY if word.lower() == "all" else [_kind(word)]
        request.prefixed |= word.lower() == "all"
        for cls in expanded:
            if cls not in request.kinds:
                request.kinds.append(cls)
                request.names[cls] = list(names)
    if not request.kinds:
        raise click.UsageError(f"no resource type in {kind!r}")
    request.prefixed |= len(request.kinds) > 1
    return request


def _slashed(args: Sequence[str]) -> Request:
    request = Request(prefixed=True)
    for arg in args:
        word, _, name = arg.partition("/")
        if not name or "/" in name:
            raise click.UsageError(
                f"arguments in resource/name form must have a single resource and name: {arg!r}"
            )
        cls = _kind(word)
        if cls not in request.kinds:
            request.kinds.append(cls)
        request.names.setdefault(cls, []).append(name)
    return request


def _kind(word: str) -> Kind:
    return None if is_events(word) else resolve(word)


# --- get -----------------------------------------------------------------------------


@click.command()
@click.argument("kind", shell_complete=kinds)
@click.argument("names", nargs=-1, shell_complete=object_names)
@NAMESPACE
@ALL_NAMESPACES
@click.option(
    "-o",
    "--output",
    help="wide, yaml, json, name, jsonpath=TEMPLATE, jsonpath-file=FILE, "
    "custom-columns=SPEC, custom-columns-file=FILE (as kubectl).",
)
@SELECTOR
@click.option("--show-labels", is_flag=True, help="A LABELS column, last (as kubectl).")
@click.option(
    "-w", "--watch", is_flag=True, help="After the list, print each change as it happens."
)
@click.option(
    "--show-managed-fields", is_flag=True, help="Keep metadata.managedFields in -o yaml|json."
)
@click.pass_obj
@fails_cleanly
def get(
    settings: Settings,
    kind: str,
    names: tuple[str, ...],
    namespace: str,
    all_namespaces: bool,
    output: str | None,
    selector: str | None,
    show_labels: bool,
    watch: bool,
    show_managed_fields: bool,
) -> None:
    """List objects of one or more kinds (`rc,pods`, `all`, `events`, `TYPE/NAME`; short
    names: rc, rct, dc, rs, dtr, po, no, ns). -o yaml|json prints a List, as kubectl does,
    or the object itself when one NAME of one kind is given."""
    out = parse_output(output)
    request = parse_request(kind, names)
    if watch and (len(request.kinds) != 1 or request.kinds[0] is None):
        raise click.UsageError("--watch works on one kind of object (not events)")
    store = settings.open_store()
    where = None if all_namespaces else namespace
    since = store.resource_version() if watch else 0
    found, missing = _fetch(store, request, where, selector)
    if not show_managed_fields:  # kubectl leaves them out of -o yaml|json unless asked
        found = {k: [_without_managed_fields(o) for o in v] for k, v in found.items()}
    listing = Listing(request, found, out, show_labels, where is None)
    sys.stdout.write(listing.text())
    if not listing.any() and not missing and not watch:
        click.echo(_nothing_found(where), err=True)
    for err in missing:
        click.echo(f"error: {err}", err=True)
    if missing:
        sys.exit(1)
    if watch:
        _watch(store, listing, since, where, selector)


def _nothing_found(namespace: str | None) -> str:
    return f"No resources found in {namespace} namespace." if namespace else "No resources found"


Found = dict[Kind, list[Any]]  # KubeObjects, or Event dicts for None


def _fetch(
    store: Store, request: Request, where: str | None, selector: str | None
) -> tuple[Found, list[NotFound]]:
    """Every object asked for, by kind; and what was named but not found."""
    found: Found = {}
    missing: list[NotFound] = []
    for cls in request.kinds:
        names = request.names.get(cls, [])
        if cls is None:
            found[cls] = _events_named(list_events(store, where), names, missing)
        elif names:
            found[cls] = []
            for name in names:
                try:
                    found[cls].append(store.get(cls, name, where or "default"))
                except NotFound as err:
                    missing.append(err)
        else:
            found[cls] = list(store.list(cls, where, label_selector=selector))
    return found, missing


def _events_named(events: list[Event], names: list[str], missing: list[NotFound]) -> list[Event]:
    if not names:
        return events
    by_name = {e["metadata"]["name"]: e for e in events}
    missing += [NotFound(f'events "{n}" not found') for n in names if n not in by_name]
    return [by_name[n] for n in names if n in by_name]


def _without_managed_fields(obj: Any) -> Any:
    if not isinstance(obj, KubeObject):
        return obj
    meta = msgspec.structs.replace(obj.metadata, managed_fields=())
    return msgspec.structs.replace(obj, metadata=meta)


@dataclass
class Listing:
    """What `get` prints for what it found, in the format asked."""

    request: Request
    found: Found
    out: Output
    show_labels: bool
    with_namespace: bool
    widths: dict[Kind, list[int]] = field(default_factory=dict)

    def any(self) -> bool:
        return any(self.found.values())

    def items(self) -> list[Any]:
        return [o for cls in self.request.kinds for o in self.found.get(cls, [])]

    def text(self) -> str:
        kind, items = self.out.kind, self.items()
        if kind in ("yaml", "json") and self.request.single_object and items:
            return _single(items[0], kind)
        if kind in ("yaml", "json"):
            data = _as_list(items)
            return yaml_text(data) if kind == "yaml" else json_text(data)
        if kind == "name":
            return "".join(f"{_name_of(o)}\n" for o in items)
        if kind == "jsonpath":
            data = _data(items[0]) if self.request.single_object and items else _as_list(items)
            return render_jsonpath(self.out, data)
        if kind == "custom-columns":
            return render_columns(self.out, [_data(o) for o in items]) if items else ""
        return "\n".join(self.table(cls) for cls in self.request.kinds if self.found.get(cls))

    def table(self, cls: Kind, rows_of: Sequence[Any] | None = None, header: bool = True) -> str:
        """The table of one kind (or, with `rows_of`, rows of it in the same widths)."""
        objects = self.found.get(cls, []) if rows_of is None else rows_of
        wide = self.out.kind == "wide"
        if cls is None:
            return events_table(list(objects), wide, self.with_namespace)
        head, rows = self._rows(cls, objects, wide)
        widths = self.widths.setdefault(cls, [len(h) for h in head])
        for row in rows:
            widths[:] = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        text = table([h.ljust(w) for h, w in zip(head, widths, strict=True)], rows)
        return text if header else text.split("\n", 1)[1]

    def _rows(
        self, cls: type[KubeObject], objects: Sequence[KubeObject], wide: bool
    ) -> tuple[list[str], list[list[str]]]:
        base, more = COLUMNS[cls]
        columns = base + (more if wide else [])
        with_ns = self.with_namespace and cls.NAMESPACED
        head = ["NAMESPACE"] * with_ns + ["NAME"] + [c for c, _ in columns]
        head += ["LABELS"] * self.show_labels
        rows = [
            [o.namespace] * with_ns
            + [f"{resource_name(cls)}/{o.name}" if self.request.prefixed else o.name]
            + [fn(o) for _, fn in columns]
            + [labels_text(o.metadata.labels)] * self.show_labels
            for o in objects
        ]
        return head, rows


def _data(item: Any) -> Any:
    return to_dict(item) if isinstance(item, KubeObject) else item


def _as_list(items: Sequence[Any]) -> dict[str, Any]:
    """kubectl's `List` of any number of items."""
    data = [_data(o) for o in items]
    return {"apiVersion": "v1", "items": data, "kind": "List", "metadata": {"resourceVersion": ""}}


def _single(item: Any, fmt: str) -> str:
    if isinstance(item, KubeObject):
        return render_objects([item], fmt)
    return yaml_text(item) if fmt == "yaml" else json_text(item)


def _name_of(item: Any) -> str:
    if isinstance(item, KubeObject):
        return f"{resource_name(item)}/{item.name}"
    return f"event/{item['metadata']['name']}"


def _watch(
    store: Store, listing: Listing, since: int, where: str | None, selector: str | None
) -> None:
    """`get -w`: each change to the kind after the list, as a row (or in the format asked),
    until interrupted; a deleted object is printed as it was last."""
    cls = listing.request.kinds[0]
    assert cls is not None
    names = set(listing.request.names.get(cls, []))
    wanted = parse_label_selector(selector) if selector else None
    try:
        for event in store.watch(since, [cls]):
            obj = event.obj
            if (where is not None and obj.namespace != where and cls.NAMESPACED) or (
                names and obj.name not in names
            ):
                continue
            if wanted is not None and not wanted.matches(obj.metadata.labels):
                continue
            sys.stdout.write(_changed(listing, cls, _without_managed_fields(obj)))
            sys.stdout.flush()
    except KeyboardInterrupt:
        sys.exit(130)


def _changed(listing: Listing, cls: type[KubeObject], obj: KubeObject) -> str:
    """One watched object: a row in the list's widths (the header first if the list had
    no rows), or the object in the format asked."""
    if listing.out.structured or listing.out.kind == "custom-columns":
        single = Listing(Request([cls], {cls: [obj.name]}), {cls: [obj]}, listing.out, False, False)
        text = single.text()
        return text if listing.out.kind != "custom-columns" else text.split("\n", 1)[1]
    return listing.table(cls, [obj], header=cls not in listing.widths)


# --- describe ------------------------------------------------------------------------


@click.command()
@click.argument("kind", shell_complete=kinds)
@click.argument("names", nargs=-1, shell_complete=object_names)
@NAMESPACE
@ALL_NAMESPACES
@SELECTOR
@click.pass_obj
@fails_cleanly
def describe(
    settings: Settings,
    kind: str,
    names: tuple[str, ...],
    namespace: str,
    all_namespaces: bool,
    selector: str | None,
) -> None:
    """Show objects in detail: their fields, the objects they are tied to (a claim's pods
    and devices, a pod's claims) and their events. Without NAME every object of the kind
    (or those -l selects); a NAME that matches nothing exactly describes every object whose
    name starts with it, as kubectl does."""
    from kubedra.cli.describe import describe_object

    request = parse_request(kind, names)
    if None in request.kinds:
        raise click.UsageError("events are described with the object they are about")
    store = settings.open_store()
    where = None if all_namespaces else namespace
    objects = [
        obj
        for cls in request.kinds
        if cls is not None
        for obj in _described(store, cls, request.names.get(cls, []), where, selector)
    ]
    if not objects:
        click.echo(_nothing_found(where), err=True)
        return
    sys.stdout.write("\n\n".join(describe_object(store, obj) for obj in objects))


def _described(
    store: Store, cls: type[KubeObject], names: list[str], where: str | None, selector: str | None
) -> list[KubeObject]:
    if not names:
        return list(store.list(cls, where, label_selector=selector))
    out: list[KubeObject] = []
    for name in names:
        try:
            out.append(store.get(cls, name, where or "default"))
        except NotFound:
            prefixed = [o for o in store.list(cls, where) if o.name.startswith(name)]
            if not prefixed or len(names) > 1:
                raise
            out += prefixed
    return out


# --- delete --------------------------------------------------------------------------


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
@NAMESPACE
@ALL_NAMESPACES
@SELECTOR
@click.option(
    "--all", "every", is_flag=True, help="Every object of the kind in the namespace (or -A)."
)
@click.option("--ignore-not-found", is_flag=True, help="An object that is not there is no error.")
@click.option(
    "--wait",
    type=click.BOOL,
    default=True,
    is_flag=False,
    flag_value=True,
    show_default=True,
    help="Wait for the objects to be gone (finalizers done) before returning; --wait=false "
    "returns at once.",
)
@click.option(
    "--timeout",
    default="0s",
    show_default=True,
    help="How long to wait (30s, 2m, 1h); 0: a week, as kubectl.",
)
@click.pass_obj
@fails_cleanly
def delete(
    settings: Settings,
    kind: str | None,
    names: tuple[str, ...],
    paths: tuple[str, ...],
    namespace: str,
    all_namespaces: bool,
    selector: str | None,
    every: bool,
    ignore_not_found: bool,
    wait: bool,
    timeout: str,
) -> None:
    """Delete objects by KIND NAME..., KIND -l SELECTOR, KIND --all or -f FILE|DIR (owned
    objects, such as generated claims, follow) and, as kubectl, wait until they are gone.
    Every object is tried; any that was not found makes the exit 1."""
    limit = parse_duration(timeout)
    wanted = _to_delete(kind, names, paths, namespace, all_namespaces, selector, every)
    store = settings.open_store()
    keys = wanted if isinstance(wanted, list) else wanted.keys(store)
    if not keys:
        click.echo("No resources found")
        return
    deleted, missing = _delete_each(store, keys, ignore_not_found or every)
    release = _controllers(store, deleted)
    if wait and deleted:
        wait_until_gone(store, deleted, limit, release)
    if missing:
        sys.exit(1)


@dataclass(frozen=True)
class Selection:
    """`delete KIND -l SELECTOR` or `--all`: the objects are known once the store is read."""

    kinds: list[type[KubeObject]]
    namespace: str | None
    selector: str | None

    def keys(self, store: Store) -> list[Key]:
        return [
            (cls, o.name, o.namespace)
            for cls in self.kinds
            for o in store.list(cls, self.namespace, label_selector=self.selector)
        ]


def _to_delete(
    kind: str | None,
    names: Sequence[str],
    paths: Sequence[str],
    namespace: str,
    all_namespaces: bool,
    selector: str | None,
    every: bool,
) -> list[Key] | Selection:
    """What to delete, from the arguments alone (usage errors before any store is opened)."""
    if paths:
        if kind or selector or every:
            raise click.UsageError("give KIND NAME..., KIND -l/--all, or -f FILE|DIR: not both")
        return _from_files(paths, namespace)
    if kind is None:
        raise click.UsageError("give KIND NAME..., KIND -l SELECTOR, KIND --all, or -f FILE|DIR")
    if selector or every:
        if names:
            raise click.UsageError("name cannot be provided when a selector or --all is specified")
        where = None if all_namespaces else namespace
        return Selection(_kinds_only(parse_request(kind, ())), where, selector)
    return _from_names(kind, names, namespace)


def _kinds_only(request: Request) -> list[type[KubeObject]]:
    if None in request.kinds:
        raise click.UsageError("events are not deleted by kubedra")
    return [cls for cls in request.kinds if cls is not None]


def _from_names(kind: str, names: Sequence[str], namespace: str) -> list[Key]:
    request = parse_request(kind, names)
    keys = [(cls, name, namespace) for cls in _kinds_only(request) for name in request.names[cls]]
    if not keys:
        raise click.UsageError(
            f"resource(s) were provided, but no name was specified for {kind} "
            "(KIND NAME..., -l SELECTOR, --all, or -f FILE|DIR)"
        )
    return keys


def _from_files(paths: Iterable[str], namespace: str) -> list[Key]:
    """The objects the manifests name, in file order (namespace: the manifest's, else -n)."""
    from kubedra.api.loader import load  # YAML parsing: only `delete -f` and the like pay for it

    keys = [
        (type(loaded.obj), loaded.obj.name, loaded.obj.namespace or namespace)
        for loaded in load(list(paths))
    ]
    if not keys:
        raise click.UsageError(f"no objects in {', '.join(paths)}")
    return keys


Deleted = tuple[Key, str | None]  # the key and the uid of what was deleted


def _delete_each(store: Store, keys: list[Key], quiet_missing: bool) -> tuple[list[Deleted], int]:
    """Delete every key, saying so as kubectl does; (what was deleted, how many were missing)."""
    deleted: list[Deleted] = []
    missing = 0
    for cls, name, ns in keys:
        try:
            gone = store.delete(cls, name, ns)
        except NotFound as err:
            missing += not quiet_missing
            if not quiet_missing:
                click.echo(f"error: {err}", err=True)
            continue
        deleted.append(((cls, name, ns), gone.metadata.uid))
        where = f" from {ns} namespace" if cls.NAMESPACED else ""
        click.echo(f'{resource_name(cls)} "{name}" deleted{where}')
    return deleted, missing


WEEK_S = 7 * 24 * 3600.0


def parse_duration(text: str) -> float:
    """kubectl's `--timeout`: `30s`, `2m`, `1h30m`, `500ms` (a bare number: seconds); 0
    means a week (kubectl's "wait forever")."""
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise click.BadParameter(
            f"invalid duration {text!r} (e.g. 30s, 2m, 1h)", param_hint="--timeout"
        )
    scale = {"ms": 0.001, "s": 1.0, "": 1.0, "m": 60.0, "h": 3600.0}
    seconds = sum(float(n) * scale[u] for n, u in parts)
    return seconds or WEEK_S


def _controllers(store: Store, deleted: list[Deleted]) -> Callable[[], None] | None:
    """On the embedded store, where no controller runs by itself, what the claim controller
    does once pods or claims are deleted, done now and returned for the wait: a claim being
    deleted, or reserved for pods now gone, is freed (its finalizer removed), as `kubedra
    schedule` does on each pass. None on a cluster (kube-controller-manager does it)."""
    if not isinstance(store, SqliteStore):
        return None
    if not any(cls in (Pod, ResourceClaim) for (cls, _, _), _ in deleted):
        return None
    release = _releaser(store)
    release()
    return release


def wait_until_gone(
    store: Store,
    deleted: list[Deleted],
    timeout: float,
    release: Callable[[], None] | None = None,
) -> None:
    """Wait, as `kubectl delete --wait` does, until no deleted object is there any more
    (one with the same name but another uid was made anew: that one counts as gone);
    `release`, run between looks, is the embedded store's claim controller."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while deleted := [d for d in deleted if _still_there(store, d)]:
        if time.monotonic() >= deadline:
            (cls, name, _), _uid = deleted[0]
            raise KubedraError(f"timed out waiting for the condition on {_plural(cls)}/{name}")
        time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, 1.0)
        if release is not None:
            release()


def _still_there(store: Store, deleted: Deleted) -> bool:
    (cls, name, ns), uid = deleted
    try:
        current = store.get(cls, name, ns)
    except NotFound:
        return False
    return uid is None or current.metadata.uid == uid


def _releaser(store: Store) -> Callable[[], None]:
    """One pass of the claim controller's release, for the embedded store (on a cluster
    kube-controller-manager does it)."""
    from kubedra.scheduler.scheduler import Scheduler

    scheduler = Scheduler(store, claim_controller=True)

    def release() -> None:
        scheduler.refresh()
        scheduler.release_ended()

    return release


def _plural(cls: type[KubeObject]) -> str:
    kind = cls.KIND.lower()
    return kind + ("es" if kind.endswith("s") else "s")
