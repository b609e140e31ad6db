"""`kubedra apply | diff`: manifests into the store, or what they would change there."""

from __future__ import annotations

import dataclasses
import difflib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import click
import msgspec

from kubedra.api.apply import LAST_APPLIED
from kubedra.api.codec import to_dict, yaml_text
from kubedra.api.loader import LoadedObject, LoadResult
from kubedra.api.meta import KubeObject
from kubedra.cli.context import Settings, fails_cleanly, fails_with
from kubedra.cli.lint import checked_load_by_object
from kubedra.cli.output import resource_name
from kubedra.cli.progress import Progress
from kubedra.cluster.apply import (
    Applied,
    Target,
    Verb,
    apply_object,
    checked_writes,
    preview_object,
    same_content,
    unversioned,
)
from kubedra.cluster.store import Store, atomic
from kubedra.errors import KubedraError, Problem, ValidationError

FILENAMES = click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    required=True,
    help="File, directory (recursive) or - for stdin.",
)
DRY_RUN_SUFFIX = {"none": "", "client": " (dry run)", "server": " (server dry run)"}
NAMESPACE = click.option(
    "-n",
    "--namespace",
    help="Namespace of the objects that name none (kubectl's -n; default: default); an "
    "object naming another one is refused.",
)

ApplyOne = Callable[[Target, KubeObject], Applied]


@click.command()
@FILENAMES
@click.option(
    "--dry-run",
    type=click.Choice(list(DRY_RUN_SUFFIX)),
    default="none",
    show_default=True,
    help="client: check the manifests and compare them with what is stored, writing "
    "nothing; server: also pass every write through the store's checks (the API server's "
    "validation and admission, or the embedded store's update rules), keeping none.",
)
@NAMESPACE
@click.pass_obj
@fails_cleanly
def apply(settings: Settings, paths: tuple[str, ...], dry_run: str, namespace: str | None) -> None:
    """Create or update objects from manifests, as `kubectl apply` does: fields others set
    are kept, fields dropped since the last apply are removed; on the embedded store all
    objects or, on any error, none. An object's warnings are printed when apply creates or
    changes it (not again for an unchanged one)."""
    checked = load_for_apply(paths, settings.strict, namespace=namespace)
    with checked.all_on_failure():
        if dry_run == "none":
            outcomes = _apply_all(settings.open_store(create=True), checked.result, dry_run)
        else:
            with settings.store_for_preview() as store:
                outcomes = _apply_all(store, checked.result, dry_run)
    for index, (loaded, applied) in enumerate(zip(checked.result.objects, outcomes, strict=True)):
        name = f"{resource_name(loaded.obj)}/{loaded.obj.name}"
        if applied.verb is not Verb.UNCHANGED:
            checked.warn(index)
        if applied.adopted:
            click.echo(
                f"warning: {name} has no {LAST_APPLIED} annotation (it was not created by "
                "apply), so fields dropped from the manifest since were kept; the annotation "
                "is added now",
                err=True,
            )
        if applied.before is not None and applied.before.metadata.deletion_timestamp:
            click.echo(DELETING.format(name=loaded.obj.name), err=True)
        click.echo(f"{name} {applied.verb}{DRY_RUN_SUFFIX[dry_run]}")


@click.command()
@FILENAMES
@NAMESPACE
@click.pass_obj
@fails_with(2)
def diff(settings: Settings, paths: tuple[str, ...], namespace: str | None) -> None:
    """What `apply` would change, as `kubectl diff`: a unified diff of each stored object
    and the object a server dry run of apply returns (resourceVersion and managedFields
    left out), with the warnings of the objects that differ. Exit 0: no differences, 1:
    differences, 2: an error."""
    checked = load_for_apply(paths, settings.strict, "diff", namespace)
    with (
        checked.all_on_failure(),
        settings.store_for_preview() as store,
        checked_writes(store) as target,
    ):
        outcomes = _each(checked.result, apply_object, target)
    texts = [_object_diff(applied) for applied in outcomes]
    for index, text in enumerate(texts):
        if text:
            checked.warn(index)
    sys.stdout.write("".join(texts))
    sys.exit(1 if any(texts) else 0)


# kubectl's words (apply.go's warningChangesOnDeletingResource), printed as it does
DELETING = "Warning: Detected changes to resource {name} which is currently being deleted."


@dataclass
class Checked:
    """Manifests loaded and checked, with their warnings kept until apply knows which
    objects it changes."""

    result: LoadResult
    warnings: list[list[Problem]]

    def warn(self, index: int) -> None:
        """Print the warnings of the index-th object (once)."""
        for warning in self.warnings[index]:
            click.echo(str(warning), err=True)
        self.warnings[index] = []

    @contextmanager
    def all_on_failure(self) -> Iterator[None]:
        """Where applying fails (nothing written, or on a cluster not all), every object's
        warnings are printed before the error: they may be what explains it."""
        try:
            yield
        except Exception:
            for index in range(len(self.warnings)):
                self.warn(index)
            raise


def load_for_apply(
    paths: Sequence[str], strict: bool, verb: str = "apply", namespace: str | None = None
) -> Checked:
    """Load and check manifests as apply needs them: a bar while a large input is read
    (on a terminal), the warnings about no one object on stderr at once (each object's
    are kept for later), kubectl's refusal of an input without objects, and `-n`."""
    with Progress("reading", 1) as bar:

        def read(file: str, done: int, total: int) -> None:
            bar.update(done, total, f"reading {file}")

        result, general, per_object = checked_load_by_object(paths, strict, progress=read)
    for warning in general:
        click.echo(str(warning), err=True)
    if not result.objects:
        raise KubedraError(f"no objects passed to {verb} (in {', '.join(paths)})")
    if namespace is not None:
        result.objects = [in_namespace(loaded, namespace) for loaded in result.objects]
    return Checked(result, per_object)


def in_namespace(loaded: LoadedObject, namespace: str) -> LoadedObject:
    """`-n NS`: a namespaced object without a namespace goes there; one naming another
    namespace is refused, as kubectl refuses it (before anything is written)."""
    obj = loaded.obj
    if not obj.NAMESPACED:
        return loaded
    if obj.metadata.namespace and obj.metadata.namespace != namespace:
        raise KubedraError(
            f'{loaded.source.file}: the namespace from the provided object "'
            f'{obj.metadata.namespace}" does not match the namespace "{namespace}". You must '
            f"pass '--namespace={obj.metadata.namespace}' to perform this operation."
        )
    meta = msgspec.structs.replace(obj.metadata, namespace=namespace)
    return dataclasses.replace(loaded, obj=msgspec.structs.replace(obj, metadata=meta))


def _apply_all(store: Store, result: LoadResult, dry_run: str) -> list[Applied]:
    if dry_run == "client":
        return _each(result, preview_object, store)
    if dry_run == "server":
        with checked_writes(store) as target:
            return _each(result, apply_object, target)
    with atomic(store):
        return _each(result, apply_object, store)


def _each(result: LoadResult, fn: ApplyOne, target: Target) -> list[Applied]:
    """`fn` on every loaded object, with a bar (on a terminal) when it takes a while."""
    out: list[Applied] = []
    with Progress("applying", len(result.objects)) as bar:
        for loaded in result.objects:
            out.append(_located(fn, target, result, loaded))
            bar.update(len(out))
    return out


def _located(fn: ApplyOne, target: Target, result: LoadResult, loaded: LoadedObject) -> Applied:
    """Apply one object; a refusal (the store's update rules, the API server's validation)
    is reported at the manifest's file and line, like a problem found by lint."""
    try:
        return fn(target, loaded.obj)
    except ValidationError as err:
        raise ValidationError(result.locate(p, loaded.source) for p in err.problems) from None


def _object_diff(applied: Applied) -> str:
    """kubectl diff's text for one object: `diff -u -N LIVE/... MERGED/...` and the hunks,
    or nothing when apply would change nothing."""
    before, after = applied.before, applied.obj
    if after is None or (before is not None and same_content(before, after)):
        return ""
    name = _diff_name(after)
    live, merged = f"LIVE/{name}", f"MERGED/{name}"
    lines = difflib.unified_diff(
        _yaml_lines(before), _yaml_lines(after), live, merged, lineterm="\n"
    )
    return f"diff -u -N {live} {merged}\n" + "".join(lines)


def _diff_name(obj: KubeObject) -> str:
    """kubectl diff's file name: `group.version.Kind.namespace.name`."""
    version = obj.api_version.replace("/", ".")
    return f"{version}.{obj.KIND}.{obj.namespace or ''}.{obj.name}"


def _yaml_lines(obj: KubeObject | None) -> list[str]:
    if obj is None:
        return []
    return yaml_text(to_dict(unversioned(obj))).splitlines(keepends=True)
