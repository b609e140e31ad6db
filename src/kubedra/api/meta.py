"""The model base and object metadata shared by every kind.

Models are msgspec Structs: frozen (immutable values once loaded), camelCase on the wire,
unknown fields forbidden at decode time so the codec can find, keep and report them, and
fields equal to their default omitted on output (kubectl's `omitempty` shape).
Structs are not tracked by the cycle collector (`gc=False`): models hold no reference
cycles, and a large inventory then loads without GC pauses.
Lists are tuples so a loaded object cannot be changed in place; maps are plain dicts
that callers treat as read-only (msgspec has no frozen mapping type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

if TYPE_CHECKING:
    # mypy's dataclass_transform support does not inherit `frozen` from a base class and
    # would flag every subclass; at run time msgspec does inherit it, so only mypy sees this.
    class Model(msgspec.Struct, kw_only=True):
        """Base of every API struct."""

else:

    class Model(
        msgspec.Struct,
        frozen=True,
        kw_only=True,
        omit_defaults=True,
        rename="camel",
        forbid_unknown_fields=True,
        gc=False,
    ):
        """Base of every API struct."""


class OwnerReference(Model):
    """Names an object that this one depends on. When every owner is gone, the garbage
    collector deletes the dependent; the owner must live in the same namespace or be
    cluster-scoped."""

    api_version: str
    """The owner's group and version, as in its own apiVersion (`v1`, `apps/v1`)."""
    kind: str
    """The owner's kind, in CamelCase (`Pod`, `ReplicaSet`)."""
    name: str
    """The owner's name."""
    uid: str
    """The owner's UID. A reference whose UID no longer exists counts as a dead owner,
    even if an object of that name has been created again."""
    controller: bool | None = None
    """Marks the owner that manages this object (its controller); at most one owner
    reference of an object may have it."""
    block_owner_deletion: bool | None = None
    """With foreground deletion of the owner, true keeps the owner from disappearing
    until this dependent has been deleted. Setting it needs delete permission on the
    owner."""


class ManagedFieldsEntry(Model):
    """One field manager's share of the object for server-side apply: who set which
    fields, with which operation and when. Clients normally leave these entries alone."""

    manager: str | None = None
    """The name of the field manager (a client or controller) that owns these fields."""
    operation: str | None = None
    """How the fields were written: `Apply` (server-side apply) or `Update` (a plain write)."""
    api_version: str | None = None
    """The API version the field set is expressed in; field paths can differ between
    versions."""
    time: str | None = None
    """When this manager last changed one of its fields (RFC 3339, seconds). Removing or
    adding a field updates it; rewriting the same values does not."""
    fields_type: str | None = None
    """The format of the field set. The only format defined is `FieldsV1`."""
    fields_v1: dict[str, Any] | None = msgspec.field(default=None, name="fieldsV1")
    """The set of fields this manager owns, as a nested map of field paths (the FieldsV1
    encoding)."""
    subresource: str | None = None
    """The subresource (`status`, `scale`, ...) the fields were written through; empty
    for the main resource."""


class ObjectMeta(Model):
    """Data that every stored object carries: its identity (name, namespace, uid), labels
    and annotations for users and tools, and bookkeeping that the server maintains."""

    name: str | None = None
    """The object's name, unique per kind within its namespace (or the cluster, for
    cluster-scoped kinds). Usually a DNS subdomain of at most 253 characters; it cannot
    be changed after creation."""
    generate_name: str | None = None
    """A prefix from which the server builds a unique name when `name` is empty: a few
    random characters are appended. Ignored when `name` is set."""
    namespace: str | None = None
    """The namespace of a namespaced object (a DNS label). When it is empty, kubectl and
    kubedra use the current namespace (`default` unless configured); cluster-scoped kinds
    have none."""
    uid: str | None = None
    """A unique identifier the server assigns at creation and never reuses; it tells
    apart two objects that had the same name at different times. Read-only."""
    resource_version: str | None = None
    """An opaque version string that changes with every write. Send it back unchanged
    on an update to make the write conditional (optimistic concurrency); clients must
    not compare or parse it. Read-only."""
    generation: int | None = None
    """A counter the server increases on each change of the desired state (`spec`), but
    not of `status` or metadata. Read-only."""
    creation_timestamp: str | None = None
    """When the server stored the object first (RFC 3339, UTC). Read-only."""
    deletion_timestamp: str | None = None
    """Set by the server when deletion has been asked for but finalizers still hold the
    object; the object is gone once the last finalizer is removed. Read-only."""
    deletion_grace_period_seconds: int | None = None
    """The grace period, in seconds, given to the object to shut down once its deletion
    was requested. Only set together with `deletionTimestamp`. Read-only."""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    """Key/value pairs for organising and selecting objects (label selectors, node
    selectors). Keys are an optional DNS-subdomain prefix and a name of at most 63
    characters; values at most 63 characters."""
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    """Free key/value metadata for tools and people; not used to select objects. Keys
    follow the label key rules; all annotations of an object together are limited to
    256 KiB."""
    owner_references: tuple[OwnerReference, ...] = ()
    """The objects this one belongs to; it is garbage-collected once all of them are
    deleted. At most one entry may be the managing controller."""
    finalizers: tuple[str, ...] = ()
    """Names of clean-up steps that must finish before the object is removed. A delete
    request only sets `deletionTimestamp` while this list is non-empty; whoever owns a
    finalizer removes it when done."""
    managed_fields: tuple[ManagedFieldsEntry, ...] = ()
    """Which field manager owns which fields, kept by the server for server-side apply.
    Mostly internal; clients rarely need to read or write it."""


class UnknownField(msgspec.Struct, frozen=True):
    """A field the model does not know, kept so that a load/dump round trip loses nothing."""

    path: tuple[str | int, ...]
    value: Any
    silent: bool = False  # inside an open core/v1 struct: valid Kubernetes, not reported


UNKNOWN_FIELDS_KEY = "x-kubedra-unknown-fields"


class KubeObject(Model):
    """A top-level API object: apiVersion, kind, metadata, and the fields kept aside."""

    API_GROUP: ClassVar[str] = ""
    API_VERSION: ClassVar[str] = "v1"  # the version kubedra stores and serves the kind as
    KIND: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = True

    api_version: str = ""
    """The API group and version the object is written in: `resource.k8s.io/v1`,
    `scheduling.k8s.io/v1beta1` (Workload, PodGroup), or `v1` for core kinds. kubedra also
    reads resource.k8s.io v1beta1 and v1beta2 and converts them to v1 (a DeviceTaintRule
    keeps the version it was written in)."""
    kind: str = ""
    """The object's type in CamelCase (`ResourceClaim`, `Pod`); together with apiVersion
    it says which schema the rest of the document follows."""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    """The object's name, namespace, labels, annotations and the bookkeeping the server
    keeps (uid, resourceVersion, timestamps)."""
    unknown_fields: tuple[UnknownField, ...] = msgspec.field(default=(), name=UNKNOWN_FIELDS_KEY)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""
