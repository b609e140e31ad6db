"""What the API server's per-kind registry strategies do to an object it creates or
updates, so the embedded store holds what a cluster would hold for the same writes.

Upstream (the `PrepareForCreate` / `PrepareForUpdate` of each kind's strategy, and the
generic `BeforeUpdate`): a client never sets `metadata.generation`; the kinds that track it
start at 1 and count every change of their spec. A status is the status subresource's: on
create it starts empty (a claim's or pod group's `status: {}`, a pod `Pending`), whatever
the manifest says. Fields of feature gates that are off are dropped on every write
(`kubedra.api.gates`), as the server's strategies drop them.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from kubedra.api.core import Pod, PodStatus
from kubedra.api.gates import without_disabled_fields
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimStatus,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup, PodGroupStatus

T = TypeVar("T", bound=KubeObject)

# Kinds whose strategy sets generation 1 on create and bumps it when the spec changes.
GENERATION_KINDS: tuple[type[KubeObject], ...] = (Pod, DeviceClass, ResourceSlice, DeviceTaintRule)


def _created_status(obj: KubeObject) -> Any:
    """The status a create leaves, or the manifest's where the kind keeps it (a Node's)."""
    if isinstance(obj, ResourceClaim):
        return ResourceClaimStatus()
    if isinstance(obj, Pod):
        return PodStatus(phase="Pending")
    if isinstance(obj, DeviceTaintRule):
        return None
    if isinstance(obj, PodGroup):
        return PodGroupStatus()
    return getattr(obj, "status", None)


def prepared_for_create(obj: T) -> T:
    obj = without_disabled_fields(obj)
    meta = obj.metadata
    if isinstance(obj, GENERATION_KINDS):
        meta = msgspec.structs.replace(meta, generation=1)
    changes: dict[str, Any] = {"metadata": meta}
    if hasattr(obj, "status"):
        changes["status"] = _created_status(obj)
    return msgspec.structs.replace(obj, **changes)


def prepared_for_update(stored: T, new: T) -> T:
    """`new` with the stored generation, plus one for a tracked kind whose spec changed."""
    new = without_disabled_fields(new)
    generation = stored.metadata.generation
    if (
        isinstance(new, GENERATION_KINDS)
        and generation
        and getattr(new, "spec", None) != getattr(stored, "spec", None)
    ):
        generation += 1
    if generation == new.metadata.generation:
        return new
    return msgspec.structs.replace(
        new, metadata=msgspec.structs.replace(new.metadata, generation=generation)
    )
