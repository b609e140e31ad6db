"""`apply` on any Store: the same steps on the embedded store and on a real API server.

Create with kubectl's last-applied annotation, or three-way merge the manifest into the
live object (`kubedra.api.apply`) and update it with the resourceVersion that was read: a
writer that got in between makes the update fail with `Conflict`, and apply reads and merges
again (as kubectl retries its patch), so no one's change is lost.

Dry runs, as kubectl's `--dry-run`: `preview_object` only reads and merges (client); under
`checked_writes` every write is checked as a real one (the API server's `dryRun=All`: its
validation, admission and defaults; on the embedded store the same transaction, rolled
back) and nothing is kept (server).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import msgspec

from kubedra.api.apply import LAST_APPLIED, merge_applied, with_last_applied
from kubedra.api.meta import KubeObject
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.store import DEFAULT_NAMESPACE, Store, T
from kubedra.errors import AlreadyExists, Conflict, KubedraError, NotFound

ATTEMPTS = 5  # kubectl's maxPatchRetry


class Verb(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Applied:
    """What apply did to one object; `adopted`: the object had no last-applied annotation
    (created by `create` or another client), so nothing could be removed this time."""

    verb: Verb
    adopted: bool = False
    obj: KubeObject | None = None  # as stored (or as a server dry run would store it)
    before: KubeObject | None = None  # as it was read, None when apply creates it


class Target(Protocol):
    """What apply needs of a store: a read and the two writes."""

    def get(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T: ...

    def create(self, obj: T) -> T: ...

    def update(self, obj: T) -> T: ...


def apply_object(store: Target, manifest: KubeObject) -> Applied:
    """Create or merge one manifest into the store; raises Conflict only when every attempt
    raced another writer (or the manifest pins a resourceVersion that is no longer current)."""
    manifest = _in_namespace(manifest)
    pinned = bool(manifest.metadata.resource_version)
    for _ in range(1 if pinned else ATTEMPTS):
        try:
            return _apply_once(store, manifest)
        except (Conflict, AlreadyExists) as err:
            if pinned:
                raise Conflict(
                    f"{err}: the manifest names resourceVersion "
                    f"{manifest.metadata.resource_version} (as `kubectl get -o yaml` prints "
                    "it), no longer current; remove metadata.resourceVersion to apply it over "
                    "whatever is stored"
                ) from None
    raise Conflict(
        f'{manifest.KIND} "{manifest.name}": still changing after {ATTEMPTS} attempts to apply; '
        "try again"
    )


def preview_object(store: Target, manifest: KubeObject) -> Applied:
    """What apply would do, from a read and the merge alone (kubectl's `--dry-run=client`):
    the store's defaults and update rules are not consulted, and `obj` is not set."""
    manifest = _in_namespace(manifest)
    current = _current(store, manifest)
    if current is None:
        return Applied(Verb.CREATED)
    changed = merge_applied(manifest, current) is not None
    verb = Verb.CONFIGURED if changed else Verb.UNCHANGED
    return Applied(verb, _adopted(current), before=current)


@contextmanager
def checked_writes(store: Store) -> Iterator[Target]:
    """A target on which writes are checked as real ones and none is kept (kubectl's
    `--dry-run=server`): the API server's `dryRun=All`, or on the embedded store one
    transaction that is rolled back at the end."""
    if isinstance(store, KubeStore):
        yield _ServerDryRun(store)
        return
    transaction = getattr(store, "transaction", None)
    if not callable(transaction):
        raise KubedraError(f"{type(store).__name__} cannot check writes without keeping them")
    with suppress(_RolledBack), transaction():
        yield store
        raise _RolledBack


class _RolledBack(Exception):
    """Ends a dry run's transaction: the store rolls back on any exception."""


class _ServerDryRun:
    """The writes of a real cluster sent with `dryRun=All`."""

    def __init__(self, store: KubeStore) -> None:
        self._store = store

    def get(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T:
        return self._store.get(cls, name, namespace)

    def create(self, obj: T) -> T:
        return self._store.create(obj, dry_run=True)

    def update(self, obj: T) -> T:
        return self._store.update(obj, dry_run=True)


def _apply_once(store: Target, manifest: KubeObject) -> Applied:
    current = _current(store, manifest)
    if current is None:
        return Applied(Verb.CREATED, obj=store.create(unpinned(with_last_applied(manifest))))
    desired = merge_applied(manifest, current)
    if desired is None:
        return Applied(Verb.UNCHANGED, _adopted(current), current, current)
    written = store.update(desired)
    # The API server writes nothing when its defaults make the object what it was.
    verb = Verb.UNCHANGED if same_content(written, current) else Verb.CONFIGURED
    return Applied(verb, _adopted(current), written, current)


def unpinned(manifest: T) -> T:
    """The manifest as apply creates it: without a resourceVersion. Objects pasted from
    `kubectl get -o yaml` carry one, and kubectl's create path (cli-runtime's resource
    helper) clears it before posting, since the API server refuses a create that names one.
    The last-applied annotation is made before, from the manifest as given, as kubectl's is."""
    if not manifest.metadata.resource_version:
        return manifest
    meta = msgspec.structs.replace(manifest.metadata, resource_version=None)
    return msgspec.structs.replace(manifest, metadata=meta)


def same_content(a: KubeObject, b: KubeObject) -> bool:
    """Whether two versions of an object differ only in resourceVersion and managedFields
    (upstream's dry-run storage answers an update with the changed object under the old
    resourceVersion, so the version alone cannot tell whether a write changed anything)."""
    return unversioned(a) == unversioned(b)


def unversioned(obj: KubeObject) -> KubeObject:
    """The object without resourceVersion and managedFields (what every write changes)."""
    meta = msgspec.structs.replace(obj.metadata, resource_version=None, managed_fields=())
    return msgspec.structs.replace(obj, metadata=meta)


def _current(store: Target, manifest: KubeObject) -> KubeObject | None:
    try:
        return store.get(type(manifest), manifest.name, manifest.namespace)
    except NotFound:
        return None


def _adopted(current: KubeObject) -> bool:
    return LAST_APPLIED not in current.metadata.annotations


def _in_namespace(obj: KubeObject) -> KubeObject:
    """A namespaced manifest without a namespace goes to `default`, as kubectl sends it."""
    if not obj.NAMESPACED or obj.metadata.namespace:
        return obj
    meta = msgspec.structs.replace(obj.metadata, namespace=DEFAULT_NAMESPACE)
    return msgspec.structs.replace(obj, metadata=meta)
