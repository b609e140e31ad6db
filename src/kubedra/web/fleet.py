"""The fleet view: every node as a block of its devices, grouped by hardware, with a filter.

The filter answers "which devices would this admit?" with the allocator's own CEL: a
DeviceClass admits a device when all of its selectors are true (upstream's class rule); a
pending pod's claims admit a device when, for one of their requests (or firstAvailable
subrequests), the class's selectors and the request's own selectors are all true. Devices
a pod admits but cannot have are the ones it was refused (held, blocked or tainted).
"""

from __future__ import annotations

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


def fleet_view(facts: Facts, class_name: str = "", pod: str = "") -> dict[str, Any]:
    admission = _admission(facts, class_name, pod)
    admit = _admitter(facts, admission) if admission is not None else None
    groups: dict[str, list[dict[str, Any]]] = {}
    counts = dict.fromkeys((*STATES, "tainted", "admitted", "devices"), 0)
    for node in facts.nodes:
        devices = [_device(d, admit) for d in node.devices]
        for d in devices:
            counts["devices"] += 1
            counts[d["state"]] += 1
            counts["tainted"] += d["tainted"]
            counts["admitted"] += bool(d["admitted"])
        groups.setdefault(group_name(node), []).append(
            {
                "name": node.name,
                "fill": round(node_fill(node), 3),
                "problems": list(node.problems),
                "partitions": {k: round(v, 3) for k, v in node.partitions.items()},
                "devices": devices,
            }
        )
    return {
        "version": facts.version,
        "filter": _filter_json(admission),
        "classes": [c.name for c in facts.scheduler.store.list(DeviceClass)],
        "summary": {"nodes": len(facts.nodes), **counts},
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
    units = [d for d in node.devices if d.kind in ACCELERATORS] or list(node.devices)
    fills = [d.fill for d in units if d.parent is None]
    fills += [node.partitions[p] for p in {d.parent for d in units if d.parent is not None}]
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
            return all(
                inventory.matches(e, entry, strict=facts.strict)
                for e in selection
            )
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
