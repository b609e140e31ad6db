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
    """A device filter written in CEL (Common Expression Language)."""

    expression: str = ""
    """A CEL expression evaluated once per candidate device; the device qualifies when it
    returns true. The variable `device` offers `driver`, `attributes` and `capacity` (both
    keyed by domain, e.g. `device.attributes["gpu.example.com"].model`) and
    `allowMultipleAllocations`. A lookup of an attribute the device lacks is an error that
    aborts the allocation, so guard optional ones with `has()` or `.?`/`orValue()`.
    At most 10 KiB, and its estimated evaluation cost is capped."""


class DeviceSelector(Model):
    """One condition a device must meet; exactly one kind of selector is set (today only
    `cel`)."""

    cel: CELDeviceSelector | None = None
    """Selects devices with a CEL expression."""


class OpaqueDeviceConfiguration(Model):
    """Settings for one driver in the driver's own format; Kubernetes and kubedra pass
    them through without interpreting them."""

    driver: str = ""
    """The driver these parameters are for; only that driver's kubelet plugin receives
    them. A DNS subdomain of at most 63 characters, normally a domain the vendor owns."""
    parameters: Any = None
    """The driver-defined settings, any JSON or YAML object (usually with its own
    apiVersion and kind). The driver validates them; at most 10 KiB encoded."""


class DeviceClassConfiguration(Model):
    """A configuration entry of a DeviceClass, passed to the driver of every device
    allocated through the class."""

    opaque: OpaqueDeviceConfiguration | None = None
    """Driver-specific settings for one driver."""


# --- DeviceClass --------------------------------------------------------------------------


class DeviceClassSpec(Model):
    """Which devices the class stands for and the configuration they get."""

    selectors: tuple[DeviceSelector, ...] = ()
    """Conditions every device allocated through this class must meet, in addition to
    the request's own selectors. At most 32."""
    config: tuple[DeviceClassConfiguration, ...] = ()
    """Driver settings copied into the allocation result for devices of this class, ahead
    of the claim's own configuration. The allocator does not look at them. At most 32."""
    extended_resource_name: str | None = None
    """An extended resource name (`example.com/gpu`) that pods can request in
    `resources.requests`/`limits` to get devices of this class without writing a claim;
    the scheduler then creates the claim. If several classes give the same name, the
    newest one serves it."""


class DeviceClass(KubeObject):
    """A named kind of device, set up by an administrator or a driver vendor. Claims
    refer to it by name in each request; its selectors narrow the devices the request can
    get and its configuration is handed to the driver. Cluster-scoped."""

    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "DeviceClass"
    NAMESPACED: ClassVar[bool] = False

    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)
    """The class's selectors, configuration and extended resource name. It may change at
    any time; an allocation uses the class as it was when the claim was allocated."""


# --- ResourceSlice ------------------------------------------------------------------------


class DeviceAttribute(Model):
    """Exactly one value; the list forms belong to the DRAListTypeAttributes gate (1.36)."""

    int_: int | None = msgspec.field(default=None, name="int")
    """An integer value (64-bit)."""
    bool_: bool | None = msgspec.field(default=None, name="bool")
    """A boolean value."""
    string: str | None = None
    """A string value of at most 64 characters."""
    version: str | None = None
    """A semantic version (semver 2.0.0, e.g. `1.2.3-rc.1`) of at most 64 characters; CEL
    compares it as a version, not as text."""
    ints: tuple[int, ...] | None = None
    """A non-empty list of integers (DRAListTypeAttributes, alpha)."""
    bools: tuple[bool, ...] | None = None
    """A non-empty list of booleans (DRAListTypeAttributes, alpha)."""
    strings: tuple[str, ...] | None = None
    """A non-empty list of strings, each at most 64 characters (DRAListTypeAttributes,
    alpha)."""
    versions: tuple[str, ...] | None = None
    """A non-empty list of semantic versions, each at most 64 characters
    (DRAListTypeAttributes, alpha)."""

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
    """The amounts a request may take of a shared capacity, as a range with an optional
    step. A request below `min` is raised to `min`, one between steps is raised to the
    next step; above `max` the device cannot serve the request. Fractional bounds are
    computed in milli-units (DRAFractionalCapacityRange)."""

    min: Quantity
    """The smallest amount one allocation consumes: zero or more, and no more than the
    capacity's value or the policy's default."""
    max: Quantity | None = None
    """The largest amount one allocation may consume, at most the capacity's value.
    Unset: up to the whole capacity."""
    step: Quantity | None = None
    """The granularity above `min`: allocations consume `min` plus a whole number of
    steps. Unset: any amount in the range is taken as requested."""


class CapacityRequestPolicy(Model):
    """How much of a shared capacity one allocation consumes: a default, and either a list
    of allowed amounts or a range. At most one of `validValues` and `validRange`."""

    default: Quantity | None = None
    """The amount consumed by a request that does not ask for this capacity. Must be one
    of `validValues` or within `validRange` when those are set."""
    valid_values: tuple[Quantity, ...] = ()
    """The amounts an allocation may consume, ascending, at most 10. A request is rounded
    up to the smallest value that covers it; a request above the largest cannot use the
    device."""
    valid_range: CapacityRequestPolicyRange | None = None
    """The range (and step) of amounts an allocation may consume."""


class DeviceCapacity(Model):
    """An amount a device has of something (memory, bandwidth, compute share)."""

    value: Quantity
    """The device's total of this capacity. It stays fixed: what allocations consume is
    tracked by the scheduler, not subtracted here."""
    request_policy: CapacityRequestPolicy | None = None
    """For a device with `allowMultipleAllocations`, how each allocation consumes this
    capacity. Unset: a request takes what it asks for (everything if it asks nothing),
    as long as all allocations together stay within `value`."""


class Counter(Model):
    """An amount of a shared counter."""

    value: Quantity
    """The amount: in a counter set how much is available, in a device's consumption how
    much allocating the device uses up."""


class CounterSet(Model):
    """A named budget of counters shared by devices of the pool, e.g. the memory and
    compute slices of one physical GPU that its partitions draw on. Allocating a device
    subtracts its consumption; a device fits only while every counter it draws on has
    enough left."""

    name: str = ""
    """The set's name (a DNS label), unique in the pool; devices refer to it in
    `consumesCounters`."""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)
    """The counters of the set and their available amounts, keyed by DNS-label names.
    At most 32."""


class DeviceCounterConsumption(Model):
    """What a device uses up from one counter set of its pool when it is allocated."""

    counter_set: str = ""
    """The name of the counter set (in the pool's `sharedCounters`) to draw from."""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)
    """The amount of each counter the device uses, keyed by counter name. At most 32."""
    # DRADeviceCompatibilityGroups (alpha in 1.37): modelled, not implemented (see
    # docs/compatibility.md); the allocator ignores slices that use it, as upstream does
    # with the feature off.
    compatibility_groups: tuple[str, ...] = ()
    """Opaque group names (at most 2): devices drawing on the same counter set can only be
    allocated together if they share a group; no groups goes only with no groups.
    DRADeviceCompatibilityGroups (alpha): kubedra ignores slices that use it."""


class DeviceTaint(Model):
    """A taint on a device: claims that do not tolerate it cannot get the device, and with
    `NoExecute` pods using it are evicted."""

    key: str = ""
    """The taint's key, in the form of a label name (optional DNS prefix, name of at most
    63 characters)."""
    value: str | None = None
    """An optional value, in the form of a label value."""
    effect: str | None = None
    """`None` (informational only), `NoSchedule` (the device is not allocated to claims
    that do not tolerate it) or `NoExecute` (additionally, pods using it without a
    toleration are evicted and the claim deallocated). Unknown effects act like `None`."""
    time_added: str | None = None
    """When the taint was added, or in a DeviceTaintRule when its effect last changed
    (RFC 3339). Filled in on write when unset; toleration periods count from it."""


class NodeAllocatableMapping(Model):
    """How an allocation turns into an amount of a node resource: by the number of
    devices (`deviceMultiplier`) or by consumed capacity (`capacityKey` with
    `capacityMultiplier`), not both."""

    capacity_key: str | None = None
    """A capacity of the device whose consumed amount is the base of the node resource
    amount; needs `capacityMultiplier`."""
    capacity_multiplier: Quantity | None = None
    """The factor applied to the consumed amount of `capacityKey`."""
    device_multiplier: Quantity | None = None
    """The node resource amount per allocated device; only without `capacityKey`."""


class NodeAllocatableOverhead(Model):
    """Extra node resources a device costs its users (e.g. host memory for a GPU),
    charged per pod and per container that refers to the claim."""

    per_pod: Quantity | None = None
    """A fixed amount charged once per pod that uses the claim on the node."""
    per_container: Quantity | None = None
    """An amount charged for each container reference to the claim."""


class NodeAllocatableResource(Model):
    """DRANodeAllocatableResources (alpha in 1.37): modelled, not implemented."""

    mapping: NodeAllocatableMapping | None = None
    """For a device that itself provides a node resource (CPUs, memory): how much of it an
    allocation amounts to. Such claims cannot be shared between pods."""
    overhead: NodeAllocatableOverhead | None = None
    """Node resources consumed alongside the device, on top of any mapping."""


class Device(Model):
    """One allocatable device (a GPU, a GPU partition, a NIC, ...) as its driver publishes
    it: a name, attributes that selectors test, capacities, and where it is reachable."""

    name: str = ""
    """The device's name, a DNS label unique among the driver's devices in the pool.
    Allocation results refer to the device as driver/pool/name."""
    attributes: dict[str, DeviceAttribute] = msgspec.field(default_factory=dict)
    """Properties of the device that selectors and constraints test, keyed by name: a C
    identifier (in the driver's domain) or `domain/identifier`. Attributes and capacities
    together: at most 32."""
    capacity: dict[str, DeviceCapacity] = msgspec.field(default_factory=dict)
    """Amounts the device has (memory, ...), keyed like attributes. Selectors compare them
    as quantities; with `allowMultipleAllocations`, allocations consume them."""
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    """What allocating the device takes from the pool's shared counter sets (one entry per
    set, at most 2). This is how partitions of one physical device exclude each other."""
    node_name: str | None = None
    """The node the device is on, with `perDeviceNodeSelection`. At most one of
    `nodeName`, `nodeSelector` and `allNodes`."""
    node_selector: NodeSelector | None = None
    """The nodes that can reach the device (exactly one term), with
    `perDeviceNodeSelection`."""
    all_nodes: bool | None = None
    """True when every node can reach the device, with `perDeviceNodeSelection`."""
    taints: tuple[DeviceTaint, ...] = ()
    """Taints the driver puts on the device; a request gets a device with a `NoSchedule`
    or `NoExecute` taint only if it tolerates the taint. At most 16; a slice with tainted
    devices holds at most 64 devices."""
    binds_to_node: bool | None = None
    """True when an allocation of this device is valid only on the node it was made for:
    the allocation's node selector then names that node."""
    binding_conditions: tuple[str, ...] = ()
    """Condition types (at most 4) that must all be True in the claim's device status
    before the pod is bound to its node; the scheduler waits for them, for example while
    a device is attached."""
    binding_failure_conditions: tuple[str, ...] = ()
    """Condition types (at most 4); if one becomes True in the device status, binding
    failed and the scheduler gives up the allocation and tries again."""
    allow_multiple_allocations: bool | None = None
    """True when the device can be shared: several requests and claims may be allocated
    it at once, each consuming part of its capacities (consumable capacity)."""
    node_allocatable_resources: dict[str, NodeAllocatableResource] = msgspec.field(
        default_factory=dict
    )
    """Node resources (`cpu`, `memory`, hugepages; not extended resources) that an
    allocation of this device accounts for, keyed by resource name.
    DRANodeAllocatableResources (alpha): kubedra does not charge them."""


class ResourcePool(Model):
    """The pool a ResourceSlice belongs to. A pool may span several slices; consumers use
    only the slices of its newest generation, and only once all of them are seen."""

    name: str = ""
    """The pool's name, unique per driver; often the node's name for node-local devices.
    At most 253 characters, DNS subdomains separated by slashes."""
    generation: int = 0
    """The pool's version. A driver that changes the pool writes a higher generation into
    all its slices; slices of an older generation are ignored."""
    resource_slice_count: int = 0
    """How many slices make up the pool at this generation (at least 1). Until all of
    them are present the pool is incomplete: the allocator uses none of its devices, and
    a request for all matching devices fails."""


class ResourceSliceSpec(Model):
    """A driver's devices (or shared counters) in one pool, and the nodes they are
    reachable from."""

    driver: str = ""
    """The driver that publishes the slice: a DNS subdomain of at most 63 characters,
    lower case, normally ending in a domain its vendor owns. Cannot be changed."""
    pool: ResourcePool = msgspec.field(default_factory=lambda: ResourcePool(name=""))
    """The pool the slice belongs to, with the pool's generation and slice count."""
    node_name: str | None = None
    """The node whose devices these are (node-local devices). Exactly one of `nodeName`,
    `nodeSelector`, `allNodes` and `perDeviceNodeSelection`. Cannot be changed."""
    node_selector: NodeSelector | None = None
    """The nodes that can reach the pool's devices (network-attached devices), as a node
    selector with exactly one term."""
    all_nodes: bool | None = None
    """True when every node can reach the pool's devices."""
    devices: tuple[Device, ...] = ()
    """The devices of this slice, at most 128 (64 if any device has taints or consumes
    counters). A slice holds either devices or shared counters."""
    per_device_node_selection: bool | None = None
    """True when each device says which nodes reach it (its own `nodeName`,
    `nodeSelector` or `allNodes`)."""
    shared_counters: tuple[CounterSet, ...] = ()
    """Counter sets that devices of the pool draw on, at most 8, names unique in the
    pool. A slice holds either devices or shared counters."""
    # Alpha in 1.37 (DRAPartitionableDevicesType, DRAOptionalNodeOperations): modelled only.
    partition_type_attribute: str | None = None
    """A string attribute (`domain/name`) whose value tells each partitionable device's
    partition type, such as a MIG profile. DRAPartitionableDevicesType (alpha): modelled
    only."""
    skip_node_operations: tuple[str, ...] = ()
    """Node-side driver calls that devices of this slice do not need:
    `NodePrepareResources`, `NodeUnprepareResources` or `*` for both. The kubelet skips a
    call when every device of a claim from the driver skips it. DRAOptionalNodeOperations
    (alpha): modelled only."""


class ResourceSlice(KubeObject):
    """Devices a driver publishes: some or all devices of one pool, with their attributes
    and capacities. The allocator reads every slice to know which devices exist and where
    they can be used. Cluster-scoped; drivers own and update them."""

    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "ResourceSlice"
    NAMESPACED: ClassVar[bool] = False

    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)
    """The driver, the pool, the nodes and the devices (or shared counters) of the slice."""


# --- ResourceClaim and ResourceClaimTemplate ----------------------------------------------


class DeviceToleration(Model):
    """Lets a request be allocated a device whose taint it matches (by key, value and
    effect), and sets how long a pod may stay after a `NoExecute` taint appears."""

    key: str | None = None
    """The taint key to match, in the form of a label name. Empty matches every key and
    then requires operator `Exists`."""
    operator: str | None = None
    """`Equal` (default: the taint's value must equal `value`) or `Exists` (any value;
    `value` must be empty)."""
    value: str | None = None
    """The taint value to match with operator `Equal`, in the form of a label value."""
    effect: str | None = None
    """The taint effect to match, `NoSchedule` or `NoExecute`; empty matches every
    effect."""
    toleration_seconds: int | None = None
    """For `NoExecute` only: how long, in seconds after the taint's `timeAdded`, pods using
    the device may keep running before eviction. Unset: forever; zero or less: evict at
    once."""


class CapacityRequirements(Model):
    """How much of a shareable device's capacities one allocation asks for."""

    requests: dict[str, Quantity] = msgspec.field(default_factory=dict)
    """The amount wanted of each named capacity. A device qualifies only if it has at
    least that much; the amount consumed is the request rounded up by the capacity's
    request policy (and recorded in the result's `consumedCapacity`). A capacity not
    named here is consumed by the policy's default, or whole if there is no policy."""


class DeviceDerivedAttribute(Model):
    """DRADerivedAttributes (alpha in 1.37): modelled; the allocator refuses requests that
    use it, as upstream does with the feature off."""

    name: str = ""
    """The name (`domain/identifier`, e.g. `derived/numa`) under which constraints of the
    claim can use the computed value; a name equal to a published attribute overrides it
    there. Each derived attribute must be used by a constraint."""
    expression: str = ""
    """A CEL expression over `device` (as in selectors) returning a scalar or a list of
    scalars, computed for each candidate device that passed the request's selectors.
    At most 10 KiB."""


class ExactDeviceRequest(Model):
    """A request for a number of devices (or all matching ones) of one DeviceClass, all
    meeting the same selectors."""

    device_class_name: str = ""
    """The DeviceClass the devices must belong to; its selectors apply and its
    configuration is passed on. Required."""
    selectors: tuple[DeviceSelector, ...] = ()
    """Further conditions every device for this request must meet, on top of the class's.
    At most 32."""
    allocation_mode: str | None = None
    """`ExactCount` (the default) for `count` devices, or `All` for every matching device
    in the pools the node can reach; `All` fails when a pool is incomplete or a matching
    device is already in use (unless `adminAccess`)."""
    count: int | None = None
    """How many devices `ExactCount` allocates; more than zero, 1 if unset."""
    admin_access: bool | None = None
    """True asks for administrative access (monitoring, maintenance): the devices are
    allocated even if other claims hold them and do not count as used. Only allowed in
    namespaces labelled `resource.kubernetes.io/admin-access: "true"`."""
    tolerations: tuple[DeviceToleration, ...] = ()
    """Device taints this request tolerates, at most 16. Without a matching toleration a
    tainted device (`NoSchedule`, `NoExecute`) is not allocated, and a `NoExecute` taint
    added later evicts the claim's pods."""
    capacity: CapacityRequirements | None = None
    """How much of each capacity every allocated device must provide; with shareable
    devices also how much each allocation consumes."""
    derived_attributes: tuple[DeviceDerivedAttribute, ...] = ()
    """Values computed per device with CEL, for use in the claim's constraints (at most
    32). DRADerivedAttributes (alpha): kubedra refuses requests that set it."""


class DeviceSubRequest(Model):
    """One alternative of a `firstAvailable` list: like an exact request, but without
    admin access."""

    name: str = ""
    """The alternative's name, a DNS label unique in the list. Constraints, configuration
    and results refer to it as `<request>/<subrequest>`."""
    device_class_name: str = ""
    """The DeviceClass the devices must belong to. Required."""
    selectors: tuple[DeviceSelector, ...] = ()
    """Further conditions every device must meet, on top of the class's. At most 32."""
    allocation_mode: str | None = None
    """`ExactCount` (the default) or `All`, as in an exact request."""
    count: int | None = None
    """How many devices `ExactCount` allocates; more than zero, 1 if unset."""
    tolerations: tuple[DeviceToleration, ...] = ()
    """Device taints this alternative tolerates, at most 16."""
    capacity: CapacityRequirements | None = None
    """How much of each capacity every allocated device must provide (and, on shareable
    devices, consumes)."""
    derived_attributes: tuple[DeviceDerivedAttribute, ...] = ()
    """Values computed per device with CEL for the claim's constraints (at most 32).
    DRADerivedAttributes (alpha): kubedra refuses requests that set it."""


class DeviceRequest(Model):
    """One named request of a claim: either exact requirements or an ordered list of
    alternatives. Each request gets its own devices."""

    name: str = ""
    """The request's name, a DNS label unique in the claim. Containers
    (`resources.claims[].request`), constraints and configuration refer to it; with
    `firstAvailable` it stands for whichever alternative was chosen."""
    exactly: ExactDeviceRequest | None = None
    """The requirements the devices must meet. Exactly one of `exactly` and
    `firstAvailable` is set."""
    first_available: tuple[DeviceSubRequest, ...] = ()
    """Alternatives in order of preference (at most 8); the allocator takes the first one
    that can be satisfied together with the rest of the claim on the node."""


class DeviceConstraint(Model):
    """A condition across the devices of several requests, on one attribute: the same
    value for all (`matchAttribute`) or a different value for each
    (`distinctAttribute`). Exactly one of the two is set."""

    requests: tuple[str, ...] = ()
    """The requests whose devices must meet the constraint (`<request>` or
    `<request>/<subrequest>`); empty means all requests of the claim."""
    match_attribute: str | None = None
    """A fully qualified attribute (`domain/name`) that all the devices must have, with
    the same type and value, e.g. a NUMA node or PCIe root. A device without it is not
    chosen."""
    distinct_attribute: str | None = None
    """A fully qualified attribute that all the devices must have with pairwise different
    values, e.g. to spread requests over separate physical devices."""


class DeviceClaimConfiguration(Model):
    """Driver configuration in a claim, for all of its requests or some of them."""

    requests: tuple[str, ...] = ()
    """The requests the configuration is for (`<request>` or `<request>/<subrequest>`);
    empty means all."""
    opaque: OpaqueDeviceConfiguration | None = None
    """Driver-specific settings for one driver."""


class DeviceClaim(Model):
    """The devices a claim asks for: requests, constraints between them, and driver
    configuration."""

    requests: tuple[DeviceRequest, ...] = ()
    """The requests, all of which must be satisfied, each by its own devices (at most
    32). With no requests there is nothing to allocate."""
    constraints: tuple[DeviceConstraint, ...] = ()
    """Conditions the chosen devices must meet together, across requests (at most 32)."""
    config: tuple[DeviceClaimConfiguration, ...] = ()
    """Driver configuration for the allocated devices (at most 32). It is copied into the
    allocation result and does not influence which devices are chosen."""


class ResourceClaimSpec(Model):
    """What a claim asks for."""

    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)
    """The device requests, constraints and configuration of the claim."""


class DeviceRequestAllocationResult(Model):
    """One device allocated to the claim, and the request it serves."""

    request: str
    """The request the device was allocated for; `<request>/<subrequest>` when a
    `firstAvailable` alternative was chosen. A request may have several results."""
    driver: str
    """The driver of the device, whose kubelet plugin prepares it on the node."""
    pool: str
    """The pool of the device; driver/pool/device names it uniquely."""
    device: str
    """The device's name in its pool."""
    admin_access: bool | None = None
    """True when the device was allocated for administrative access (see the request's
    `adminAccess`)."""
    tolerations: tuple[DeviceToleration, ...] = ()
    """The request's tolerations as they were at allocation time (at most 16); the taint
    eviction controller checks later taints against them."""
    binding_conditions: tuple[str, ...] = ()
    """The device's binding conditions, copied from its ResourceSlice at allocation; the
    pod is bound only once all are True in the claim's device status."""
    binding_failure_conditions: tuple[str, ...] = ()
    """The device's binding failure conditions, copied from its ResourceSlice at
    allocation."""
    share_id: str | None = msgspec.field(default=None, name="shareID")
    """Identifies this share of a device that allows multiple allocations, so concurrent
    shares of one device can be told apart."""
    consumed_capacity: dict[str, Quantity] = msgspec.field(default_factory=dict)
    """For a shareable device, how much of each of its capacities this allocation takes:
    the requested amount rounded up by the capacity's policy, every capacity listed (zero
    included)."""
    skip_node_operations: tuple[str, ...] = ()  # DRAOptionalNodeOperations (alpha)
    """The slice's `skipNodeOperations` at allocation time. DRAOptionalNodeOperations
    (alpha): kubedra never sets it."""


class DeviceAllocationConfiguration(Model):
    """Driver configuration that applies to the allocated devices, copied from the class
    or the claim."""

    source: str
    """Where the configuration came from: `FromClass` (set by the administrator in the
    DeviceClass) or `FromClaim` (set by the claim's author)."""
    requests: tuple[str, ...] = ()
    """The requests it applies to (`<request>` or `<request>/<subrequest>`); empty means
    all."""
    opaque: OpaqueDeviceConfiguration | None = None
    """Driver-specific settings for one driver."""


class DeviceAllocationResult(Model):
    """The devices allocated to a claim and their configuration."""

    results: tuple[DeviceRequestAllocationResult, ...] = ()
    """One entry per allocated device (at most 32)."""
    config: tuple[DeviceAllocationConfiguration, ...] = ()
    """All driver configuration of the classes and the claim, class entries first; also
    for drivers that got no device, which ignore it."""


class AllocationResult(Model):
    """What the scheduler allocated for a claim, and where it can be used."""

    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    """The allocated devices and the driver configuration for them."""
    node_selector: NodeSelector | None = None
    """The nodes on which the allocated devices can be used; pods using the claim are
    scheduled only there. Unset: any node."""
    allocation_timestamp: str | None = None
    """When the allocation was made (RFC 3339). May be missing."""


class ResourceClaimConsumerReference(Model):
    """An object (normally a pod in the claim's namespace) that the claim is reserved
    for."""

    resource: str
    """The consumer's resource type, plural and lower case (`pods`)."""
    uid: str
    """The UID of the consumer, which tells this object apart from a later one of the
    same name."""
    name: str = ""
    """The consumer's name."""
    api_group: str | None = None
    """The consumer's API group; empty for the core group (pods)."""


class Condition(Model):
    """metav1.Condition, as device statuses and DeviceTaintRule status use it."""

    type: str
    """The condition's type in CamelCase (`Ready`, `EvictionInProgress`, ...); at most
    316 characters, optionally with a DNS prefix."""
    status: str
    """`True`, `False` or `Unknown`."""
    observed_generation: int | None = None
    """The object's `metadata.generation` that the condition was computed for; lower than
    the current generation means it may be out of date."""
    last_transition_time: str | None = None
    """When the status last changed from one value to another (RFC 3339)."""
    reason: str | None = None
    """A CamelCase word for programs that says why the condition is as it is."""
    message: str | None = None
    """A human-readable explanation, possibly empty."""


class NetworkDeviceData(Model):
    """Network details of an allocated device (a NIC or a virtual function), reported by
    its driver."""

    interface_name: str | None = None
    """The name of the network interface in the pod (physical or virtual), at most 256
    characters."""
    ips: tuple[str, ...] = ()
    """The interface's addresses in CIDR form with prefix length, IPv4 or IPv6
    (`10.1.2.3/24`, `fd00::5/64`). At most 16."""
    hardware_address: str | None = None
    """The interface's hardware (MAC) address, at most 128 characters."""


class AllocatedDeviceStatus(Model):
    """A driver's report on one allocated device. Driver, pool, device and share ID must
    name an entry of the claim's allocation results."""

    driver: str
    """The driver of the device."""
    pool: str
    """The pool of the device."""
    device: str
    """The device's name in its pool."""
    share_id: str | None = msgspec.field(default=None, name="shareID")
    """The share of a shareable device this status is for, as in the allocation result."""
    conditions: tuple[Condition, ...] = ()
    """The device's state as the driver last saw it (at most 8); `Ready` is True once the
    device is set up as configured. Binding conditions are reported here too."""
    data: Any = None
    """Any driver-specific data about the device, at most 10 KiB encoded."""
    network_data: NetworkDeviceData | None = None
    """Network details of the device, if it is a network device."""


class ResourceClaimStatus(Model):
    """Whether and how a claim is allocated, who uses it, and what drivers report about
    its devices."""

    allocation: AllocationResult | None = None
    """The allocated devices, set when the claim has been allocated. It is removed again
    only once no consumer is left."""
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()
    """The pods (or other consumers) that may use the claim; a pod not listed does not
    start. The scheduler adds a pod when it binds it; while the list is non-empty the
    claim stays allocated. At most 256."""
    devices: tuple[AllocatedDeviceStatus, ...] = ()
    """Per-device status written by the drivers (conditions, data, network details); each
    driver owns its entries."""


class ResourceClaim(KubeObject):
    """A request for devices by a workload: which devices of which classes, with which
    constraints and configuration. The scheduler allocates it when a pod that needs it is
    scheduled; the status records the allocated devices and the pods using them."""

    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "ResourceClaim"
    NAMESPACED: ClassVar[bool] = True

    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    """What the claim asks for. It cannot be changed after creation."""
    status: ResourceClaimStatus | None = None
    """The allocation, the consumers and the per-device status."""


class ResourceClaimTemplateSpec(Model):
    """The claim a template stamps out: labels and annotations, and the claim's spec."""

    metadata: ObjectMeta | None = None
    """Labels and annotations copied into each generated claim; no other metadata fields
    are allowed."""
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    """The spec of each generated claim, copied unchanged."""


class ResourceClaimTemplate(KubeObject):
    """A blueprint for ResourceClaims: a pod that names it in `spec.resourceClaims` gets
    its own claim made from it, deleted together with the pod."""

    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "ResourceClaimTemplate"
    NAMESPACED: ClassVar[bool] = True

    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)
    """The metadata and spec of the claims made from the template. It cannot be changed
    after creation; claims already made are not updated."""


# --- DeviceTaintRule ----------------------------------------------------------------------


class DeviceTaintSelector(Model):
    """Which devices a DeviceTaintRule taints: those matching every field that is set.
    An empty selector matches all devices."""

    driver: str | None = None
    """Only devices of this driver (the slice's `spec.driver`)."""
    pool: str | None = None
    """Only devices of pools with this name. Several drivers may use the same pool name
    (node-local pools are often named after the node); add `driver` to pick one."""
    device: str | None = None
    """Only devices with this name (`spec.devices[].name` of a slice); add `driver` and
    `pool` to pick one device."""


class DeviceTaintRuleSpec(Model):
    """The devices to taint and the taint to put on them."""

    device_selector: DeviceTaintSelector | None = None
    """The devices the taint applies to. Without a selector the rule taints no device; an
    empty one taints every device."""
    taint: DeviceTaint = msgspec.field(default_factory=lambda: DeviceTaint(key=""))
    """The taint given to each selected device, as if its driver had published it."""


class DeviceTaintRuleStatus(Model):
    """How the rule is being applied."""

    conditions: tuple[Condition, ...] = ()
    """Conditions of the rule (at most 8). `EvictionInProgress` is True while pods using
    tainted devices are still to be evicted; with effect `None` it reports once what a
    `NoExecute` taint would evict."""


class DeviceTaintRule(KubeObject):
    """Taints devices from outside their driver: an administrator marks devices (by
    driver, pool, name) as unusable or to be drained, without editing ResourceSlices.
    Cluster-scoped."""

    API_GROUP: ClassVar[str] = GROUP
    KIND: ClassVar[str] = "DeviceTaintRule"
    NAMESPACED: ClassVar[bool] = False

    spec: DeviceTaintRuleSpec = msgspec.field(default_factory=DeviceTaintRuleSpec)
    """The device selector and the taint. A change increases `metadata.generation`."""
    status: DeviceTaintRuleStatus | None = None
    """The rule's conditions, such as the progress of evictions."""
