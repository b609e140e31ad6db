"""Typed models of every field of resource.k8s.io/v1 (Kubernetes 1.34+ DRA, GA; as of 1.37).

Field names and nesting follow upstream's `resource/v1` Go types one to one, so manifests
written for a real cluster load verbatim. DeviceTaintRule is served as v1beta2 in 1.36 and
v1 on master; both shapes are identical, so one model serves both.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
from msgspec.structs import astuple

from kubedra.api.core import NodeSelector
from kubedra.api.meta import KubeObject, Model, ObjectMeta
from kubedra.api.quantity import Quantity

GROUP = "resource.k8s.io"
API_VERSION = "resource.k8s.io/v1"

# --- selectors and config (shared by classes, requests, results) --------------------------


class CELDeviceSelector(Model):
    expression: str = ""


class DeviceSelector(Model):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(Model):
    driver: str = ""
    parameters: Any = None


class DeviceClassConfiguration(Model):
    opaque: OpaqueDeviceConfiguration | None = None


# --- DeviceClass --------------------------------------------------------------------------


class DeviceClassSpec(Model):
    selectors: tuple[DeviceSelector, ...] = ()
    config: tuple[DeviceClassConfiguration, ...] = ()
    extended_resource_name: str | None = None


class DeviceClass(KubeObject):
    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "DeviceClass"
    NAMESPACED: ClassVar[bool] = False

    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)


# --- ResourceSlice ------------------------------------------------------------------------


class DeviceAttribute(Model):
    """Exactly one value; the list forms belong to the DRAListTypeAttributes gate (1.36)."""

    int_: int | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None
    ints: tuple[int, ...] | None = None
    bools: tuple[bool, ...] | None = None
    strings: tuple[str, ...] | None = None
    versions: tuple[str, ...] | None = None

    def values_set(self) -> list[str]:
        """Wire names of the value fields that are set (validation wants exactly one)."""
        return [
            n for n, v in zip(ATTRIBUTE_VALUE_FIELDS, astuple(self), strict=True) if v is not None
        ]

    @property
    def value(self) -> int | bool | str | tuple[int, ...] | tuple[bool, ...] | tuple[str, ...]:
        """The single value, whatever its type (versions stay strings here)."""
        for value in astuple(self):
            if value is not None:
                return value  # type: ignore[no-any-return]
        raise ValueError("attribute has no value")


# Wire names of DeviceAttribute's fields, in declaration (and `astuple`) order.
ATTRIBUTE_VALUE_FIELDS = (
    "int",
    "bool",
    "string",
    "version",
    "ints",
    "bools",
    "strings",
    "versions",
)


class CapacityRequestPolicyRange(Model):
    min: Quantity
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(Model):
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(Model):
    value: Quantity
    request_policy: CapacityRequestPolicy | None = None


class Counter(Model):
    value: Quantity


class CounterSet(Model):
    name: str = ""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)


class DeviceCounterConsumption(Model):
    counter_set: str = ""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)
    # DRADeviceCompatibilityGroups (alpha in 1.37): modelled, not implemented (see
    # docs/compatibility.md); the allocator ignores slices that use it, as upstream does
    # with the feature off.
    compatibility_groups: tuple[str, ...] = ()


class DeviceTaint(Model):
    key: str = ""
    value: str | None = None
    effect: str | None = None
    time_added: str | None = None


class NodeAllocatableMapping(Model):
    capacity_key: str | None = None
    capacity_multiplier: Quantity | None = None
    device_multiplier: Quantity | None = None


class NodeAllocatableOverhead(Model):
    per_pod: Quantity | None = None
    per_container: Quantity | None = None


class NodeAllocatableResource(Model):
    """DRANodeAllocatableResources (alpha in 1.37): modelled, not implemented."""

    mapping: NodeAllocatableMapping | None = None
    overhead: NodeAllocatableOverhead | None = None


class Device(Model):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = msgspec.field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = msgspec.field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool | None = None
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool | None = None
    node_allocatable_resources: dict[str, NodeAllocatableResource] = msgspec.field(
        default_factory=dict
    )


class ResourcePool(Model):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class ResourceSliceSpec(Model):
    driver: str = ""
    pool: ResourcePool = msgspec.field(default_factory=lambda: ResourcePool(name=""))
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    devices: tuple[Device, ...] = ()
    per_device_node_selection: bool | None = None
    shared_counters: tuple[CounterSet, ...] = ()
    # Alpha in 1.37 (DRAPartitionableDevicesType, DRAOptionalNodeOperations): modelled only.
    partition_type_attribute: str | None = None
    skip_node_operations: tuple[str, ...] = ()


class ResourceSlice(KubeObject):
    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "ResourceSlice"
    NAMESPACED: ClassVar[bool] = False

    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


# --- ResourceClaim and ResourceClaimTemplate ----------------------------------------------


class DeviceToleration(Model):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class CapacityRequirements(Model):
    requests: dict[str, Quantity] = msgspec.field(default_factory=dict)


class DeviceDerivedAttribute(Model):
    """DRADerivedAttributes (alpha in 1.37): modelled; the allocator refuses requests that
    use it, as upstream does with the feature off."""

    name: str = ""
    expression: str = ""


class ExactDeviceRequest(Model):
    device_class_name: str = ""
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None
    derived_attributes: tuple[DeviceDerivedAttribute, ...] = ()


class DeviceSubRequest(Model):
    name: str = ""
    device_class_name: str = ""
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str | None = None
    count: int | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None
    derived_attributes: tuple[DeviceDerivedAttribute, ...] = ()


class DeviceRequest(Model):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


class DeviceConstraint(Model):
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(Model):
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(Model):
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()


class ResourceClaimSpec(Model):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(Model):
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = msgspec.field(default=None, name="shareID")
    consumed_capacity: dict[str, Quantity] = msgspec.field(default_factory=dict)
    skip_node_operations: tuple[str, ...] = ()  # DRAOptionalNodeOperations (alpha)


class DeviceAllocationConfiguration(Model):
    source: str
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(Model):
    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[DeviceAllocationConfiguration, ...] = ()


class AllocationResult(Model):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(Model):
    resource: str
    uid: str
    name: str = ""
    api_group: str | None = None


class Condition(Model):
    """metav1.Condition, as device statuses and DeviceTaintRule status use it."""

    type: str
    status: str
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class NetworkDeviceData(Model):
    interface_name: str | None = None
    ips: tuple[str, ...] = ()
    hardware_address: str | None = None


class AllocatedDeviceStatus(Model):
    driver: str
    pool: str
    device: str
    share_id: str | None = msgspec.field(default=None, name="shareID")
    conditions: tuple[Condition, ...] = ()
    data: Any = None
    network_data: NetworkDeviceData | None = None


class ResourceClaimStatus(Model):
    allocation: AllocationResult | None = None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()
    devices: tuple[AllocatedDeviceStatus, ...] = ()


class ResourceClaim(KubeObject):
    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "ResourceClaim"
    NAMESPACED: ClassVar[bool] = True

    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus | None = None


class ResourceClaimTemplateSpec(Model):
    metadata: ObjectMeta | None = None
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(KubeObject):
    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "ResourceClaimTemplate"
    NAMESPACED: ClassVar[bool] = True

    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)


# --- DeviceTaintRule ----------------------------------------------------------------------


class DeviceTaintSelector(Model):
    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(Model):
    device_selector: DeviceTaintSelector | None = None
    taint: DeviceTaint = msgspec.field(default_factory=lambda: DeviceTaint(key=""))


class DeviceTaintRuleStatus(Model):
    conditions: tuple[Condition, ...] = ()


class DeviceTaintRule(KubeObject):
    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "DeviceTaintRule"
    NAMESPACED: ClassVar[bool] = False

    spec: DeviceTaintRuleSpec = msgspec.field(default_factory=DeviceTaintRuleSpec)
    status: DeviceTaintRuleStatus | None = None
