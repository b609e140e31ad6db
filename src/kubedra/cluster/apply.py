"""`apply` on any Store: the same steps on the embedded store and on a real API server.

Create with kubectl's last-applied annotation, or three-way merge the manifest into the
live object (`kubedra.api.apply`) and update it with the resourceVersion that was read: a
writer that got in between makes the update fail with `Conflict`, and apply reads and merges
again (as kubectl retries its patch), so no one's change is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import msgspec

from kubedra.api.apply import LAST_APPLIED, merge_applied, with_last_applied
from kubedra.api.meta import KubeObject
from kubedra.cluster.store import DEFAULT_NAMESPACE, Store
from kubedra.errors import AlreadyExists, Conflict, NotFound

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


def apply_object(store: Store, manifest: KubeObject) -> Applied:
    """Create or merge one manifest into the store; raises Conflict only when every attempt
    raced another writer (or the manifest pins a resourceVersion that is no longer current)."""
    manifest = _in_namespace(manifest)
    pinned = bool(manifest.metadata.resource_version)
    for _ in range(1 if pinned else ATTEMPTS):
        try:
            return _apply_once(store, manifest)
        except (Conflict, AlreadyExists):
            if pinned:
                raise
    raise Conflict(
        f'{manifest.KIND} "{manifest.name}": still changing after {ATTEMPTS} attempts to apply; '
        "try again"
    )


def _apply_once(store: Store, manifest: KubeObject) -> Applied:
    try:
        current = store.get(type(manifest), manifest.name, manifest.namespace)
    except NotFound:
        store.create(with_last_applied(manifest))
        return Applied(Verb.CREATED)
    adopted = LAST_APPLIED not in current.metadata.annotations
    desired = merge_applied(manifest, current)
    if desired is None:
        return Applied(Verb.UNCHANGED, adopted)
    written = store.update(desired)
    # The API server writes nothing when its defaults make the object what it was.
    same = written.metadata.resource_version == current.metadata.resource_version
    return Applied(Verb.UNCHANGED if same else Verb.CONFIGURED, adopted)


def _in_namespace(obj: KubeObject) -> KubeObject:
    """A namespaced manifest without a namespace goes to `default`, as kubectl sends it."""
    if not obj.NAMESPACED or obj.metadata.namespace:
        return obj
    meta = msgspec.structs.replace(obj.metadata, namespace=DEFAULT_NAMESPACE)
    return msgspec.structs.replace(obj, metadata=meta)
