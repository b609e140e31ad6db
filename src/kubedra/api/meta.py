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
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ManagedFieldsEntry(Model):
    manager: str | None = None
    operation: str | None = None
    api_version: str | None = None
    time: str | None = None
    fields_type: str | None = None
    fields_v1: dict[str, Any] | None = msgspec.field(default=None, name="fieldsV1")
    subresource: str | None = None


class ObjectMeta(Model):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()
    managed_fields: tuple[ManagedFieldsEntry, ...] = ()


class UnknownField(msgspec.Struct, frozen=True):
    """A field the model does not know, kept so that a load/dump round trip loses nothing."""

    path: tuple[str | int, ...]
    value: Any
    silent: bool = False  # inside an open core/v1 struct: valid Kubernetes, not reported


UNKNOWN_FIELDS_KEY = "x-kubedra-unknown-fields"


class KubeObject(Model):
    """A top-level API object: apiVersion, kind, metadata, and the fields kept aside."""

    API_GROUP: ClassVar[str] = ""
    KIND: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = True

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    unknown_fields: tuple[UnknownField, ...] = msgspec.field(default=(), name=UNKNOWN_FIELDS_KEY)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""
