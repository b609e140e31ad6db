"""Which model serves which apiVersion/kind, and the short names kubectl users type."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from kubedra.api.coordination import Lease
from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    API_VERSION,
    GROUP,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup, Workload

KubeObjectT = TypeVar("KubeObjectT", bound=KubeObject)

ALL_KINDS: tuple[type[KubeObject], ...] = (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    DeviceTaintRule,
    Pod,
    Node,
    Namespace,
)

# Kinds of the machinery rather than of workloads and devices (leader election): stored and
# served like the others, left out of ALL_KINDS (what views, mirrors and dumps cover).
CONTROL_KINDS: tuple[type[KubeObject], ...] = (Lease,)

# scheduling.k8s.io/v1beta1 (workload-aware scheduling): a real cluster serves them only
# with the GenericWorkload gate on and the API version enabled (`kubedra dev-cluster up
# --feature-gates GenericWorkload=true,...` does both), so they stay out of ALL_KINDS,
# which every watch and mirror of a cluster covers; asked for by name they work everywhere.
WORKLOAD_KINDS: tuple[type[KubeObject], ...] = (Workload, PodGroup)

BY_KIND: dict[str, type[KubeObject]] = {
    cls.KIND: cls for cls in ALL_KINDS + WORKLOAD_KINDS + CONTROL_KINDS
}

# Older resource.k8s.io versions that the codec upgrades to v1 (with a warning). v1beta2 has
# the v1 shape; v1beta1 has flat requests and a `basic` wrapper around devices.
OLDER_RESOURCE_VERSIONS = frozenset({f"{GROUP}/v1beta1", f"{GROUP}/v1beta2"})

# DeviceTaintRule is v1beta2 in Kubernetes 1.36 and v1 on master; the shapes are equal and
# the version the user wrote is kept.
TAINT_RULE_VERSIONS = frozenset({f"{GROUP}/v1beta2", API_VERSION})

SHORT_NAMES: dict[str, str] = {
    "dc": "DeviceClass",
    "deviceclass": "DeviceClass",
    "deviceclasses": "DeviceClass",
    "rc": "ResourceClaim",
    "resourceclaim": "ResourceClaim",
    "resourceclaims": "ResourceClaim",
    "rct": "ResourceClaimTemplate",
    "resourceclaimtemplate": "ResourceClaimTemplate",
    "resourceclaimtemplates": "ResourceClaimTemplate",
    "rs": "ResourceSlice",
    "resourceslice": "ResourceSlice",
    "resourceslices": "ResourceSlice",
    "dtr": "DeviceTaintRule",
    "devicetaintrule": "DeviceTaintRule",
    "devicetaintrules": "DeviceTaintRule",
    "po": "Pod",
    "pod": "Pod",
    "pods": "Pod",
    "no": "Node",
    "node": "Node",
    "nodes": "Node",
    "ns": "Namespace",
    "namespace": "Namespace",
    "namespaces": "Namespace",
    "lease": "Lease",
    "leases": "Lease",
    "pg": "PodGroup",
    "podgroup": "PodGroup",
    "podgroups": "PodGroup",
    "workload": "Workload",
    "workloads": "Workload",
}


def api_version_of(cls: type[KubeObject]) -> str:
    """The apiVersion kubedra stores a kind under (`resource.k8s.io/v1`, `v1`,
    `scheduling.k8s.io/v1beta1`)."""
    return f"{cls.API_GROUP}/{cls.API_VERSION}" if cls.API_GROUP else cls.API_VERSION


def resolve_kind(name: str) -> type[KubeObject]:
    """A kind from its name, plural or short name, case-insensitively (`rc`, `pods`, ...)."""
    kind = SHORT_NAMES.get(name.lower()) or next(
        (k for k in BY_KIND if k.lower() == name.lower()), None
    )
    if kind is None:
        known = ", ".join(sorted(BY_KIND))
        raise KeyError(f'the server doesn\'t have a resource type "{name}" (known: {known})')
    return BY_KIND[kind]


def with_type_meta(obj: KubeObjectT) -> KubeObjectT:
    """The object with apiVersion and kind filled in (objects built in code often lack them)."""
    if obj.kind and obj.api_version:
        return obj
    cls = type(obj)
    return msgspec.structs.replace(
        obj, kind=obj.kind or cls.KIND, api_version=obj.api_version or api_version_of(cls)
    )
