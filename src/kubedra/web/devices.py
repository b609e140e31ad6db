"""What each device is and who holds it: the facts the fleet and fragmentation views share.

A device is `allocated` (one claim holds it exclusively), `shared` (claims hold shares of it:
upstream's allowMultipleAllocations with consumable capacity), `blocked` (free, but it draws
on counters that devices already allocated have used up: a MIG slice of a GPU whose memory
slices are taken, the whole GPU once one slice is taken), or `free`. Taints with a NoSchedule
or NoExecute effect, from the slice or from DeviceTaintRules, make it `tainted` besides.

A device is unhealthy when it carries one of its driver's health taints (`kubedra driver
run`'s health monitor, as NVIDIA's DRA driver: `<driver>/gpu-lost`, `/xid` with the code as
value, `/ecc`, `/thermal`, `/power`), whatever their effect; each is a fault for people
("Xid 74", "GPU lost"). Any other taint (an admin's DeviceTaintRule) leaves it healthy,
tainted only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubedra.allocator import AllocatedState, DeviceRef, NodeInfo
from kubedra.allocator.inventory import DeviceEntry, Pool
from kubedra.allocator.search import taint_blocks
from kubedra.api.resource import DeviceTaint, ResourceClaim
from kubedra.scheduler.scheduler import Scheduler

# Attribute names (bare, in the driver's own domain) that say what a device is.
_TYPE = "type"  # NVIDIA's driver: gpu, mig, vfio ...
_PRODUCTS = ("productName", "accelerator", "pciDevice", "model")
_NIC_HINTS = ("rdma", "rdmaDevice", "ifName", "interfaceName")
# A health taint's key after `<driver>/` -> the fault's name for people (its value follows):
# kubedra.driver.health.KINDS's keys (a test keeps them equal).
FAULT_NAMES = {"gpu-lost": "GPU lost", "xid": "Xid", "ecc": "ECC", "thermal": "thermal",
               "power": "power"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    ref: DeviceRef
    node: str
    kind: str  # gpu | mig | tpu | nic | device
    product: str
    state: str  # free | allocated | shared | blocked
    fill: float  # how much of it is held, 0..1 (shared: its most used consumable capacity)
    tainted: bool
    taints: tuple[str, ...]  # key=value:effect
    holders: tuple[str, ...]  # claims as namespace/name
    parent: str | None  # driver/pool/counter set it draws on (a partitionable GPU), if any
    entry: DeviceEntry  # what CEL selectors are evaluated on
    faults: tuple[str, ...] = ()  # what its health taints say ("Xid 74"); none: healthy

    @property
    def healthy(self) -> bool:
        return not self.faults


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    labels: Mapping[str, str]
    devices: tuple[DeviceFacts, ...]
    problems: tuple[str, ...]  # pools the allocator cannot use on this node, and why
    partitions: Mapping[str, float]  # counter set (as `parent`) -> how much of it is used


def cluster_devices(scheduler: Scheduler) -> list[NodeFacts]:
    """Every node (name order) with its node-local devices as the allocator sees them."""
    holders = claim_holders(scheduler.store.list(ResourceClaim))
    allocated = scheduler.allocated()
    inventory = scheduler.inventory()
    out = []
    for node in scheduler.nodes():
        info = NodeInfo(node.name, node.metadata.labels)
        pools = inventory.pools_for(info, scheduler.features)
        devices: list[DeviceFacts] = []
        problems: list[str] = []
        partitions: dict[str, float] = {}
        for pool in pools:
            if pool.incomplete:
                problems.append(f"pool {pool.id}: incomplete (slices missing)")
            elif pool.invalid is not None:
                problems.append(f"pool {pool.id}: invalid: {pool.invalid}")
            left = _counters_left(pool, allocated)
            devices += _pool_devices(pool, node.name, allocated, holders, left)
            for set_name, total in pool.counter_sets.items():
                partitions[f"{pool.id}/{set_name}"] = _partition_fill(left[set_name], total)
        out.append(
            NodeFacts(node.name, node.metadata.labels, tuple(devices), tuple(problems), partitions)
        )
    return out


def claim_holders(claims: Iterable[ResourceClaim]) -> dict[DeviceRef, list[str]]:
    """Device -> the claims (namespace/name) whose allocation holds it."""
    out: defaultdict[DeviceRef, list[str]] = defaultdict(list)
    for claim in claims:
        allocation = claim.status.allocation if claim.status else None
        for r in allocation.devices.results if allocation else ():
            out[DeviceRef(r.driver, r.pool, r.device)].append(f"{claim.namespace}/{claim.name}")
    return out


def _pool_devices(
    pool: Pool,
    node: str,
    allocated: AllocatedState,
    holders: Mapping[DeviceRef, list[str]],
    left: Mapping[str, Mapping[str, int]],
) -> list[DeviceFacts]:
    out = []
    for entry, usable in pool.devices:
        if not usable or not entry.node_local:
            continue
        state, fill = _state(entry, allocated, left)
        out.append(
            DeviceFacts(
                ref=entry.ref,
                node=node,
                kind=_kind(entry),
                product=_product(entry),
                state=state,
                fill=fill,
                tainted=taint_blocks(entry, ()),
                taints=tuple(f"{t.key}={t.value or ''}:{t.effect or ''}" for t in entry.taints),
                holders=tuple(holders.get(entry.ref, ())),
                parent=f"{pool.id}/{entry.consumes[0][0]}" if entry.consumes else None,
                entry=entry,
                faults=device_faults(entry.ref.driver, entry.taints),
            )
        )
    return out


def device_faults(driver: str, taints: Iterable[DeviceTaint]) -> tuple[str, ...]:
    """The faults a device's health taints say, for people, in taint order: "GPU lost",
    "Xid 74", "ECC dbe", "thermal slowdown", "power brake" (the key's name, then its value)."""
    out = []
    for taint in taints:
        domain, _, suffix = taint.key.rpartition("/")
        name = FAULT_NAMES.get(suffix) if domain == driver else None
        if name is not None:
            out.append(f"{name} {taint.value}" if taint.value else name)
    return tuple(out)


def _counters_left(pool: Pool, allocated: AllocatedState) -> dict[str, dict[str, int]]:
    """Counter set -> counter -> what the pool's allocated devices leave of it (upstream's
    partitionable devices: every allocated device consumes its counters once)."""
    left = {name: dict(counters) for name, counters in pool.counter_sets.items()}
    for entry in [*(e for e, _ in pool.devices), *pool.other_devices]:
        if not allocated.is_allocated(entry.ref):
            continue
        for set_name, counters in entry.consumes:
            have = left.get(set_name)
            if have is None:
                continue  # an invalid pool: it has no devices to show anyway
            for counter, amount in counters:
                have[counter] = have.get(counter, 0) - amount
    return left


def _partition_fill(pool_left: Mapping[str, int], total: Mapping[str, int]) -> float:
    """How much of a counter set is used, 0..1: the mean over its counters."""
    ratios = [1 - pool_left.get(c, 0) / t for c, t in total.items() if t > 0]
    return sum(ratios) / len(ratios) if ratios else 0.0


def _state(
    entry: DeviceEntry, allocated: AllocatedState, left: Mapping[str, Mapping[str, int]]
) -> tuple[str, float]:
    ref = entry.ref
    if ref in allocated.devices:
        return "allocated", 1.0
    if ref in allocated.shared:
        return "shared", _shared_fill(entry, allocated)
    for set_name, counters in entry.consumes:
        have = left.get(set_name, {})
        if any(have.get(counter, 0) < amount for counter, amount in counters):
            return "blocked", 0.0
    return "free", 0.0


def _shared_fill(entry: DeviceEntry, allocated: AllocatedState) -> float:
    """The most consumed of the device's capacities, 0..1 (1 when nothing says how much)."""
    consumed = allocated.consumed(entry.ref)
    ratios = [
        amount / cap.value.nanos
        for name, amount in consumed.items()
        if (cap := entry.capacity.get(name)) is not None and cap.value.nanos > 0
    ]
    return min(max(ratios), 1.0) if ratios else 1.0


def _attribute(entry: DeviceEntry, name: str) -> object:
    """An attribute's value, bare name in the driver's domain or fully qualified."""
    attrs = entry.device.attributes
    attr = attrs.get(name) or attrs.get(f"{entry.ref.driver}/{name}")
    return attr.value if attr is not None else None


def _kind(entry: DeviceEntry) -> str:
    declared = _attribute(entry, _TYPE)
    if isinstance(declared, str) and declared in ("gpu", "mig", "tpu", "nic"):
        return declared
    driver = entry.ref.driver
    if driver.startswith("tpu.") or _attribute(entry, "tpuGen") is not None:
        return "tpu"
    if driver.startswith("gpu.") or _attribute(entry, "productName") is not None:
        return "gpu"
    if any(_attribute(entry, hint) is not None for hint in _NIC_HINTS) or driver == "dra.net":
        return "nic"
    return "device"


def _product(entry: DeviceEntry) -> str:
    for name in _PRODUCTS:
        value = _attribute(entry, name)
        if isinstance(value, str) and value:
            return value
    return ""
