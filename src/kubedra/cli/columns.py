"""The columns `kubedra get` prints per kind (and with `-o wide`)."""

from __future__ import annotations

from collections.abc import Callable

from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    Device,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.scheduling import DISRUPTION_TARGET, INITIALLY_SCHEDULED, PodGroup, Workload
from kubedra.cli.output import age

Column = tuple[str, Callable[[KubeObject], str]]

PRODUCT_ATTRIBUTES = ("productName", "accelerator", "model")  # GPUs, TPUs, others


def device_product(device: Device) -> str:
    """The device's product name, whatever driver domain qualifies the attribute."""
    by_name = {k.rpartition("/")[2]: a.string for k, a in device.attributes.items() if a.string}
    return next((by_name[n] for n in PRODUCT_ATTRIBUTES if n in by_name), "")


def device_memory(device: Device) -> str:
    """The device's memory capacity (`80Gi`), or "" when it declares none."""
    return next((str(c.value) for k, c in device.capacity.items() if k.endswith("memory")), "")


def claim_state(obj: KubeObject) -> str:
    assert isinstance(obj, ResourceClaim)
    status = obj.status
    if obj.metadata.deletion_timestamp:
        return "deleted"
    if status is None or status.allocation is None:
        return "pending"
    return "allocated,reserved" if status.reserved_for else "allocated"


def claim_devices(obj: KubeObject) -> str:
    assert isinstance(obj, ResourceClaim)
    alloc = obj.status.allocation if obj.status else None
    if alloc is None:
        return "<none>"
    return ",".join(f"{r.pool}/{r.device}" for r in alloc.devices.results) or "<none>"


def pod_status(obj: KubeObject) -> str:
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


def pod_group_policy(obj: KubeObject) -> str:
    assert isinstance(obj, PodGroup)
    return "Gang" if obj.spec.scheduling_policy.gang is not None else "Basic"


def pod_group_state(obj: KubeObject) -> str:
    """kubectl's STATUS of a PodGroup: Pending until the scheduler reports on it, then
    Scheduled or Unschedulable, or the reason of a DisruptionTarget condition."""
    assert isinstance(obj, PodGroup)
    found = {c.type: c for c in (obj.status.conditions if obj.status else ())}
    state = "Pending"
    if INITIALLY_SCHEDULED in found:
        state = "Scheduled" if found[INITIALLY_SCHEDULED].status == "True" else "Unschedulable"
    if DISRUPTION_TARGET in found:
        state = found[DISRUPTION_TARGET].reason or ""
    return state


def _pod_group_workload(obj: KubeObject) -> str:
    assert isinstance(obj, PodGroup)
    ref = obj.spec.workload_ref
    return ref.workload_name if ref is not None else "<none>"


def _pod_group_min(obj: KubeObject) -> str:
    assert isinstance(obj, PodGroup)
    gang = obj.spec.scheduling_policy.gang
    return str(gang.min_count) if gang is not None else "<none>"


def _pod_group_topology(obj: KubeObject) -> str:
    assert isinstance(obj, PodGroup)
    constraints = obj.spec.scheduling_constraints
    keys = [t.key for t in constraints.topology] if constraints is not None else []
    return ",".join(keys) or "<none>"


def _workload_templates(obj: KubeObject) -> str:
    assert isinstance(obj, Workload)
    return ",".join(t.name for t in obj.spec.pod_group_templates) or "<none>"


def _age(obj: KubeObject) -> str:
    return age(obj.metadata.creation_timestamp)


COLUMNS: dict[type[KubeObject], tuple[list[Column], list[Column]]] = {
    ResourceClaim: ([("STATE", claim_state), ("AGE", _age)], [("DEVICES", claim_devices)]),
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
            ("STATUS", pod_status),
            ("NODE", _pod_node),
            ("AGE", _age),
        ],
        [("CLAIMS", _pod_claims)],
    ),
    Node: ([("STATUS", lambda o: "Ready"), ("AGE", _age)], []),
    Namespace: ([("STATUS", lambda o: "Active"), ("AGE", _age)], []),
    # kubectl's columns for these kinds (NAME, AGE; NAME, POLICY, WORKLOAD, STATUS, AGE)
    Workload: ([("AGE", _age)], [("TEMPLATES", _workload_templates)]),
    PodGroup: (
        [
            ("POLICY", pod_group_policy),
            ("WORKLOAD", _pod_group_workload),
            ("STATUS", pod_group_state),
            ("AGE", _age),
        ],
        [("MIN", _pod_group_min), ("TOPOLOGY", _pod_group_topology)],
    ),
}
