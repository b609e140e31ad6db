"""The fleet view: every node as a block of its devices, grouped by hardware, with a filter.

The filter answers "which devices would this admit?" with the allocator's own CEL: a
DeviceClass admits a device when all of its selectors are true (upstream's class rule); a
pending pod's claims admit a device when, for one of their requests (or firstAvailable
subrequests), the class's selectors and the request's own selectors are all true. Devices
a pod admits but cannot have are the ones it was refused (held, blocked or tainted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubedra.allocator.inventory import DeviceEntry
from kubedra.api.core import Pod
from kubedra.api.resource import DeviceClass, DeviceSelector, ResourceClaim
from kubedra.cel import CelCompileError, CelEvalError
from kubedra.errors import KubedraError
from kubedra.scheduler.explain import pod_claims
from kubedra.scheduler.scheduler import Unschedulable
from kubedra.web.devices import DeviceFacts, NodeFacts
from kubedra.web.facts import Facts

ACCELERATORS = ("gpu", "mig", "tpu")
STATES = ("free", "allocated", "shared", "blocked")
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# One way to be admitted: all of these CEL expressions true (a class's and a request's).
Selection = tuple[str, ...]


@dataclass
class Admission:
    """A filter over devices, with what went wrong evaluating it."""

    label: str
    selections: list[Selection]
    error: str | None = None
    device_errors: int = 0  # devices on which a selector failed at run time (not admitted)


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator as an operator counts it: a GPU or TPU, or a partitionable GPU (MIG)
    once, however many partitions its slices offer."""

    kind: str  # gpu | tpu
    fill: float  # how much of it is held, 0..1 (a partitionable GPU: its used counters)
    tainted: bool
    partitionable: bool  # its devices draw on counters: MIG placements, the whole GPU
    partitions: int  # its partitions (MIG devices) allocated
    unhealthy: bool = False  # a health taint on it (any of its devices: MIG shares its GPU's)

    @property
    def state(self) -> str:
        """allocated (held whole), partial (MIG partitions or shares of it held), free."""
        if self.fill >= 1.0:
            return "allocated"
        return "partial" if self.fill > 0 else "free"


def accelerators(node: NodeFacts) -> list[Accelerator]:
    """The node's accelerators: each GPU/TPU not drawing on counters, then each counter set
    its devices draw on (a partitionable GPU: the whole-GPU device and its MIG placements),
    in name order. The fleet's counts, the heat map and the fragmentation measure all count
    these, so the header and the fragmentation page agree."""
    units = [d for d in node.devices if d.kind in ACCELERATORS]
    out = [
        Accelerator(d.kind, d.fill, d.tainted, False, 0, not d.healthy)
        for d in units
        if d.parent is None
    ]
    parts: dict[str, list[DeviceFacts]] = {}
    for d in units:
        if d.parent is not None:
            parts.setdefault(d.parent, []).append(d)
    for parent in sorted(parts):
        devices = parts[parent]
        out.append(
            Accelerator(
                "tpu" if any(d.kind == "tpu" for d in devices) else "gpu",
                node.partitions.get(parent, 0.0),
                any(d.tainted for d in devices),
                True,
                sum(d.kind == "mig" and d.state == "allocated" for d in devices),
                any(not d.healthy for d in devices),
            )
        )
    return out


def fleet_view(facts: Facts, class_name: str = "", pod: str = "") -> dict[str, Any]:
    """Every node with its devices, grouped by hardware, and the counts an operator reads:
    accelerators by state, MIG partitions in use, NICs; besides, the device entries of the
    slices by state (a MIG GPU offers dozens of placements: counted there, not as GPUs)."""
    admission = _admission(facts, class_name, pod)
    admit = _admitter(facts, admission) if admission is not None else None
    groups: dict[str, list[dict[str, Any]]] = {}
    counts = dict.fromkeys((*STATES, "tainted", "unhealthy", "admitted", "devices"), 0)
    units: Counter[str] = Counter()
    nics: Counter[str] = Counter()
    for node in facts.nodes:
        devices = [_device(d, admit) for d in node.devices]
        for d in devices:
            counts["devices"] += 1
            counts[d["state"]] += 1
            counts["tainted"] += d["tainted"]
            counts["unhealthy"] += not d["healthy"]
            counts["admitted"] += bool(d["admitted"])
            if d["kind"] == "nic":
                nics["total"] += 1
                nics["inUse"] += d["state"] in ("allocated", "shared")
        mine = accelerators(node)
        for unit in mine:
            units["total"] += 1
            units[unit.kind] += 1
            units[unit.state] += 1
            units["tainted"] += unit.tainted
            units["unhealthy"] += unit.unhealthy
            units["partitions"] += unit.partitions
            units["partitionable"] += unit.partitionable
        groups.setdefault(group_name(node), []).append(
            {
                "name": node.name,
                "fill": round(node_fill(node), 3),
                "accelerators": len(mine),
                "inUse": sum(u.fill > 0 for u in mine),
                "unhealthy": sum(u.unhealthy for u in mine),
                "problems": list(node.problems),
                "partitions": {k: round(v, 3) for k, v in node.partitions.items()},
                "devices": devices,
            }
        )
    summary = {
        "nodes": len(facts.nodes),
        **counts,
        "accelerators": {
            k: units[k]
            for k in ("total", "gpu", "tpu", "allocated", "partial", "free", "tainted", "unhealthy")
        },
        "partitionsInUse": units["partitions"],
        "partitionable": units["partitionable"],
        "nics": {"total": nics["total"], "inUse": nics["inUse"]},
    }
    return {
        "version": facts.version,
        "filter": _filter_json(admission),
        "classes": [c.name for c in facts.scheduler.store.list(DeviceClass)],
        "summary": summary,
        "groups": [{"name": k, "nodes": v} for k, v in sorted(groups.items())],
    }


def group_name(node: NodeFacts) -> str:
    """The node's hardware: its accelerators' products and its instance type."""
    products = sorted({d.product for d in node.devices if d.kind in ACCELERATORS and d.product})
    name = " + ".join(products) or "no accelerators"
    instance = node.labels.get(INSTANCE_TYPE_LABEL)
    return f"{name} · {instance}" if instance else name


def node_fill(node: NodeFacts) -> float:
    """How much of the node's accelerators is held, 0..1 (all devices when it has none): a
    partitionable GPU counts once, by its used counters."""
    fills = [u.fill for u in accelerators(node)]
    if not fills:
        devices = list(node.devices)
        fills = [d.fill for d in devices if d.parent is None]
        fills += [node.partitions[p] for p in {d.parent for d in devices if d.parent is not None}]
    return sum(fills) / len(fills) if fills else 0.0


def _device(d: DeviceFacts, admit: Callable[[DeviceEntry], bool] | None) -> dict[str, Any]:
    return {
        "name": d.ref.device,
        "driver": d.ref.driver,
        "pool": d.ref.pool,
        "kind": d.kind,
        "product": d.product,
        "state": d.state,
        "fill": round(d.fill, 3),
        "tainted": d.tainted,
        "taints": list(d.taints),
        "healthy": d.healthy,
        "faults": list(d.faults),
        "holders": list(d.holders),
        "parent": d.parent,
        "admitted": None if admit is None else admit(d.entry),
    }


def _filter_json(admission: Admission | None) -> dict[str, Any] | None:
    if admission is None:
        return None
    return {
        "label": admission.label,
        "error": admission.error,
        "deviceErrors": admission.device_errors,
    }


def _admission(facts: Facts, class_name: str, pod: str) -> Admission | None:
    if class_name:
        found = facts.scheduler.classes().get(class_name)
        if found is None:
            return Admission(f"DeviceClass {class_name}", [], f"DeviceClass {class_name} not found")
        return Admission(f"DeviceClass {class_name}", [_expressions(found.spec.selectors)])
    if pod:
        return _pod_admission(facts, pod)
    return None


def _pod_admission(facts: Facts, key: str) -> Admission:
    namespace, _, name = key.rpartition("/")
    label = f"pod {namespace or 'default'}/{name}"
    scheduler = facts.scheduler
    try:
        found = scheduler.store.get(Pod, name, namespace or "default")
        claims = pod_claims(scheduler, found)
    except (KubedraError, Unschedulable) as err:
        return Admission(label, [], str(err))
    selections, missing = request_selections(claims, scheduler.classes())
    return Admission(label, selections, "; ".join(missing) or None)


def unhealthy_admitted(facts: Facts, claims: Sequence[ResourceClaim]) -> list[dict[str, Any]]:
    """The unhealthy devices the claims' unallocated requests admit (their selectors pass):
    what a pending pod is kept from by a fault, each with its node and faults. Only the
    unhealthy devices are checked, so this costs next to nothing while all is well."""
    sick = [d for node in facts.nodes for d in node.devices if not d.healthy]
    if not sick:
        return []
    selections, missing = request_selections(claims, facts.scheduler.classes())
    admit = _admitter(facts, Admission("", selections, "; ".join(missing) or None))
    return [
        {
            "device": f"{d.ref.driver}/{d.ref.pool}/{d.ref.device}",
            "name": d.ref.device,
            "node": d.node,
            "state": d.state,
            "faults": list(d.faults),
        }
        for d in sick
        if admit(d.entry)
    ]


def request_selections(
    claims: Sequence[ResourceClaim], classes: dict[str, DeviceClass]
) -> tuple[list[Selection], list[str]]:
    """For each request and firstAvailable subrequest of unallocated claims: the CEL
    expressions a device must pass (class, then request); and the classes not found."""
    out: list[Selection] = []
    missing = []
    for claim in claims:
        if claim.status is not None and claim.status.allocation is not None:
            continue
        for request in claim.spec.devices.requests:
            options = [request.exactly] if request.exactly else list(request.first_available)
            for option in options:
                if option is None:
                    continue
                device_class = classes.get(option.device_class_name)
                if device_class is None:
                    missing.append(f"DeviceClass {option.device_class_name} not found")
                    continue
                class_cel = _expressions(device_class.spec.selectors)
                out.append(class_cel + _expressions(option.selectors))
    return out, missing


def _expressions(selectors: Sequence[DeviceSelector]) -> Selection:
    return tuple(s.cel.expression for s in selectors if s.cel is not None)


def _admitter(facts: Facts, admission: Admission) -> Callable[[DeviceEntry], bool]:
    inventory = facts.scheduler.inventory()

    def passes(selection: Selection, entry: DeviceEntry) -> bool:
        try:
            return all(inventory.matches(e, entry, strict=facts.strict) for e in selection)
        except CelEvalError:
            admission.device_errors += 1
            return False

    def admit(entry: DeviceEntry) -> bool:
        if admission.error and not admission.selections:
            return False
        try:
            return any(passes(s, entry) for s in admission.selections)
        except CelCompileError as err:
            admission.error, admission.selections = f"CEL: {err}", []
            return False

    return admit
