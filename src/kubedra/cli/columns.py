"""The columns `kubedra get` prints per kind (and with `-o wide`)."""

from __future__ import annotations

from collections.abc import Callable

from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.cli.output import age

Column = tuple[str, Callable[[KubeObject], str]]


def _claim_state(obj: KubeObject) -> str:
    assert isinstance(obj, ResourceClaim)
    status = obj.status
    if obj.metadata.deletion_timestamp:
        return "deleted"
    if status is None or status.allocation is None:
        return "pending"
    return "allocated,reserved" if status.reserved_for else "allocated"


def _claim_devices(obj: KubeObject) -> str:
    assert isinstance(obj, ResourceClaim)
    alloc = obj.status.allocation if obj.status else None
    if alloc is None:
        return "<none>"
    return ",".join(f"{r.pool}/{r.device}" for r in alloc.devices.results) or "<none>"


def _pod_status(obj: KubeObject) -> str:
    assert isinstance(obj, Pod)
    st = obj.status
    if st is not None and st.phase and st.phase != "Pending":
        return st.phase
    if obj.spec.node_name:
        return "Scheduled"
    unschedulable = st is not None and any(
        c.type == "PodScheduled" and c.status == "False" for c in st.conditions
    )
    return "Unschedulable" if unschedulable else "Pending"


def _pod_node(obj: KubeObject) -> str:
    assert isinstance(obj, Pod)
    return obj.spec.node_name or "<none>"


def _pod_claims(obj: KubeObject) -> str:
    assert isinstance(obj, Pod)
    return ",".join(c.name for c in obj.spec.resource_claims) or "<none>"


def _slice(fn: Callable[[ResourceSlice], object]) -> Callable[[KubeObject], str]:
    def get(obj: KubeObject) -> str:
        assert isinstance(obj, ResourceSlice)
        value = fn(obj)
        return "<none>" if value is None else str(value)

    return get


def _age(obj: KubeObject) -> str:
    return age(obj.metadata.creation_timestamp)


COLUMNS: dict[type[KubeObject], tuple[list[Column], list[Column]]] = {
    ResourceClaim: ([("STATE", _claim_state), ("AGE", _age)], [("DEVICES", _claim_devices)]),
    ResourceClaimTemplate: ([("AGE", _age)], []),
    DeviceClass: ([("AGE", _age)], []),
    ResourceSlice: (
        [
            ("NODE", _slice(lambda s: s.spec.node_name)),
            ("DRIVER", _slice(lambda s: s.spec.driver)),
            ("POOL", _slice(lambda s: s.spec.pool.name)),
            ("AGE", _age),
        ],
        [
            ("DEVICES", _slice(lambda s: len(s.spec.devices))),
            ("GENERATION", _slice(lambda s: s.spec.pool.generation)),
        ],
    ),
    DeviceTaintRule: ([("AGE", _age)], []),
    Pod: (
        [
            ("STATUS", _pod_status),
            ("NODE", _pod_node),
            ("AGE", _age),
        ],
        [("CLAIMS", _pod_claims)],
    ),
    Node: ([("STATUS", lambda o: "Ready"), ("AGE", _age)], []),
    Namespace: ([("STATUS", lambda o: "Active"), ("AGE", _age)], []),
}
