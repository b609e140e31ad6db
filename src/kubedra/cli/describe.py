"""`kubedra describe`: an object as kubectl describes it: its fields as indented
`Key: value` lines, the objects it is tied to, and its events.

Events: the embedded store keeps no Event objects, so the events shown are read from what
the object records itself (conditions with their transition times, the allocation and its
`allocationTimestamp`, reservations dated by the binding of their pod, deletion). That
works the same on both backends; the From column says which component wrote the record.
Field names are labelled as kubectl labels them; map keys (capacities, labels) are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec.inspect as mi

from kubedra.api.codec import to_dict
from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaim
from kubedra.cli.columns import claim_devices, claim_state, pod_status
from kubedra.cli.output import age, table
from kubedra.cluster.store import Store
from kubedra.errors import NotFound
from kubedra.scheduler.claims import recorded_claim_name

SKIP = {"managedFields"}


@dataclass(frozen=True)
class Event:
    """One line of the Events table."""

    type: str  # Normal | Warning
    reason: str
    time: str | None
    source: str
    message: str


def describe_object(store: Store, obj: KubeObject) -> str:
    lines = _fields(obj)
    related = RELATED.get(type(obj))
    if related is not None:
        lines += related(store, obj)
    pods = reserving_pods(store, obj) if isinstance(obj, ResourceClaim) else {}
    lines += _events(events_of(obj, pods))
    return "\n".join(lines) + "\n"


def _fields(obj: KubeObject) -> list[str]:
    data = to_dict(obj)
    meta = data.pop("metadata", {})
    lines = [f"Name:         {obj.name}"]
    if obj.namespace:
        lines.append(f"Namespace:    {obj.namespace}")
    for key in ("labels", "annotations"):
        values = meta.get(key) or {}
        shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "<none>"
        lines.append(f"{key.capitalize() + ':':<13} {shown}")
    lines.append(f"API Version:  {data.pop('apiVersion', '')}")
    lines.append(f"Kind:         {data.pop('kind', '')}")
    fields = _struct_fields(mi.type_info(type(obj))) or {}
    for section in ("spec", "status"):
        if section in data:
            lines.append(f"{section.capitalize()}:")
            lines += _lines(data.pop(section), 1, fields.get(section))
    return lines


# --- the objects an object is tied to ---------------------------------------------------


def _pod_claims(store: Store, obj: KubeObject) -> list[str]:
    """A pod's claims: which ResourceClaim each entry resolves to, its state and devices."""
    assert isinstance(obj, Pod)
    rows = []
    for entry in obj.spec.resource_claims:
        name = recorded_claim_name(obj, entry)
        claim = _claim(store, name, obj.namespace) if name else None
        rows.append(
            [
                entry.name,
                name or f"<not generated yet from {entry.resource_claim_template_name}>",
                claim_state(claim) if claim else "<not found>",
                claim_devices(claim) if claim else "<none>",
            ]
        )
    return _section("Resource Claims", ["NAME", "CLAIM", "STATE", "DEVICES"], rows)


def _claim_ties(store: Store, obj: KubeObject) -> list[str]:
    """A claim's devices, the pods it is reserved for, and every pod that refers to it."""
    assert isinstance(obj, ResourceClaim)
    alloc = obj.status.allocation if obj.status else None
    devices = [
        [r.request, r.driver, r.pool, r.device, "yes" if r.admin_access else ""]
        for r in (alloc.devices.results if alloc else ())
    ]
    lines = _section(
        "Allocated Devices", ["REQUEST", "DRIVER", "POOL", "DEVICE", "ADMIN ACCESS"], devices
    )
    reserved = [
        [f"{r.resource}/{r.name}", r.uid] for r in (obj.status.reserved_for if obj.status else ())
    ]
    lines += _section("Reserved For", ["CONSUMER", "UID"], reserved)
    users = [
        [f"pod/{pod.name}", entry.name, pod_status(pod), pod.spec.node_name or "<none>"]
        for pod in store.list(Pod, obj.namespace)
        for entry in pod.spec.resource_claims
        if recorded_claim_name(pod, entry) == obj.name
    ]
    return lines + _section("Used By", ["POD", "POD CLAIM", "STATUS", "NODE"], users)


RELATED: dict[type[KubeObject], Callable[[Store, KubeObject], list[str]]] = {
    Pod: _pod_claims,
    ResourceClaim: _claim_ties,
}


def _claim(store: Store, name: str, namespace: str) -> ResourceClaim | None:
    try:
        return store.get(ResourceClaim, name, namespace)
    except NotFound:
        return None


def _section(title: str, header: Sequence[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return [f"{title + ':':<13} <none>"]
    return [f"{title}:", *("  " + line for line in table(header, rows).splitlines())]


# --- events ----------------------------------------------------------------------------


def events_of(obj: KubeObject, pods: Mapping[str, Pod] | None = None) -> list[Event]:
    """What the object records about its history, oldest first (no timestamp: last).
    `pods`, by uid: the pods a claim is reserved for, whose binding dates the reservation."""
    found = list(_condition_events(obj))
    if isinstance(obj, ResourceClaim):
        found += _claim_events(obj, pods or {})
    if obj.metadata.deletion_timestamp:
        waiting = ", ".join(obj.metadata.finalizers) or "nothing"
        found.append(
            Event(
                "Normal",
                "Deleting",
                obj.metadata.deletion_timestamp,
                "api",
                f"marked for deletion, waiting for finalizers: {waiting}",
            )
        )
    return sorted(found, key=lambda e: (e.time is None, e.time or ""))


def _condition_events(obj: KubeObject) -> list[Event]:
    status = getattr(obj, "status", None)
    out = []
    for c in getattr(status, "conditions", ()) if status is not None else ():
        if isinstance(obj, Pod) and c.type == "PodScheduled":
            out.append(_scheduled(obj, c.status == "True", c.last_transition_time, c.message))
            continue
        state = "Normal" if c.status == "True" else "Warning"
        text = f"{c.type}={c.status}" + (f": {c.message}" if c.message else "")
        out.append(Event(state, c.reason or c.type, c.last_transition_time, "status", text))
    return out


def _scheduled(pod: Pod, ok: bool, time: str | None, message: str | None) -> Event:
    """kube-scheduler's two events, as it words them."""
    source = pod.spec.scheduler_name or "default-scheduler"
    if ok:
        where = f"{pod.namespace}/{pod.name} to {pod.spec.node_name}"
        return Event("Normal", "Scheduled", time, source, f"Successfully assigned {where}")
    return Event("Warning", "FailedScheduling", time, source, message or "")


def _claim_events(claim: ResourceClaim, pods: Mapping[str, Pod]) -> list[Event]:
    status = claim.status
    alloc = status.allocation if status else None
    if status is None or alloc is None:
        return []
    devices = ", ".join(f"{r.driver}/{r.pool}/{r.device}" for r in alloc.devices.results)
    allocated = alloc.allocation_timestamp
    out = [Event("Normal", "Allocated", allocated, "scheduler", devices)]
    for ref in status.reserved_for:
        when = _scheduled_at(pods.get(ref.uid)) or allocated
        out.append(Event("Normal", "Reserved", when, "scheduler", f"for {ref.resource}/{ref.name}"))
    for device in status.devices:
        for c in device.conditions:
            state = "Normal" if c.status == "True" else "Warning"
            text = f"{device.driver}/{device.pool}/{device.device}: {c.type}={c.status}"
            out.append(Event(state, c.reason or c.type, c.last_transition_time, "driver", text))
    return out


def _scheduled_at(pod: Pod | None) -> str | None:
    """When a pod was bound: its reservation of a claim is written in the same binding
    cycle, just before (the claim keeps no time of its own for it). A claim reserved for
    no pod known here dates its reservation by its allocation: the first reservation is
    written with the allocation, in one status update."""
    conditions = pod.status.conditions if pod is not None and pod.status else ()
    bound = (c for c in conditions if c.type == "PodScheduled" and c.status == "True")
    return next((c.last_transition_time for c in bound), None)


def reserving_pods(store: Store, claim: ResourceClaim) -> dict[str, Pod]:
    """The pods of the claim's namespace it is reserved for, by uid."""
    uids = {r.uid for r in (claim.status.reserved_for if claim.status else ())}
    if not uids:
        return {}
    pods = store.list(Pod, claim.namespace)
    return {p.metadata.uid or "": p for p in pods if p.metadata.uid in uids}


def _events(found: list[Event]) -> list[str]:
    if not found:
        return ["Events:       <none>"]
    rows = [[e.type, e.reason, age(e.time), e.source, e.message] for e in found]
    return _section("Events", ["TYPE", "REASON", "AGE", "FROM", "MESSAGE"], rows)


# --- the field dump ----------------------------------------------------------------------


def _lines(value: Any, depth: int, tp: Any = None) -> list[str]:
    """`Key:  value` lines, nested by two spaces. A model's field names are labelled as
    kubectl labels them (`nodeName` -> `Node Name`); the keys of a map (capacity, labels,
    attributes, opaque parameters) are printed as they are (`nvidia.com/gpu`, `cpu`)."""
    pad = "  " * depth
    if isinstance(value, dict):
        out = []
        fields = _struct_fields(tp)
        for key, item in value.items():
            if key in SKIP:
                continue
            label = smart_label(key) if fields is not None else key
            sub = fields.get(key) if fields is not None else _item_type(tp)
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{label}:")
                out += _lines(item, depth + 1, sub)
            else:
                out.append(f"{pad}{label}:  {item}")
        return out
    if isinstance(value, list):
        out = []
        for item in value:
            sub = _lines(item, depth + 1, _item_type(tp))
            if sub:
                out.append(f"{pad}- {sub[0].strip()}")
                out += sub[1:]
        return out
    return [f"{pad}{value}"]


def _concrete(tp: Any) -> Any:
    """The type behind an optional (`X | None`)."""
    if isinstance(tp, mi.UnionType):
        return next((t for t in tp.types if not isinstance(t, mi.NoneType)), None)
    return tp


def _struct_fields(tp: Any) -> dict[str, Any] | None:
    """A model's fields by wire name; None where the value is a map or free-form."""
    tp = _concrete(tp)
    if isinstance(tp, mi.StructType):
        return {f.encode_name: f.type for f in tp.fields}
    return None


def _item_type(tp: Any) -> Any:
    """The type of a list's items or a map's values (None: not known)."""
    tp = _concrete(tp)
    if isinstance(tp, mi.DictType):
        return tp.value_type
    if isinstance(tp, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return tp.item_type
    return None


def smart_label(key: str) -> str:
    """kubectl describe's label for a field name (its `smartLabelFor`): camel case split
    into title-cased words, API/URL/UID/GUID in capitals; a name with characters other
    than letters and `-` as it is."""
    if not key or any(not (c.isalpha() or c == "-") for c in key):
        return key
    words = _merged(_camel_split(key))
    return " ".join(
        w.upper() if w.upper() in ACRONYMS else w.title() if w.islower() else w
        for w in words
        if w != "_"
    )


ACRONYMS = frozenset({"API", "URL", "UID", "GUID"})


def _camel_split(text: str) -> list[str]:
    """fatih/camelcase's Split: runs of one character class, the last capital of a run
    of capitals moved to a following lower-case run (`PDFLoader` -> `PDF`, `Loader`)."""
    runs: list[str] = []
    last = None
    for c in text:
        kind = 1 if c.islower() else 2 if c.isupper() else 3 if c.isdigit() else 4
        if kind == last:
            runs[-1] += c
        else:
            runs.append(c)
        last = kind
    for i in range(len(runs) - 1):
        if runs[i] and runs[i][0].isupper() and runs[i + 1][0].islower():
            runs[i], runs[i + 1] = runs[i][:-1], runs[i][-1] + runs[i + 1]
    return [r for r in runs if r]


def _merged(parts: list[str]) -> list[str]:
    """A run of two or more capitals joins the capitalised word after it (kubectl's rule)."""
    out: list[str] = []
    i = 0
    while i < len(parts):
        part = parts[i]
        nxt = parts[i + 1] if i + 1 < len(parts) else ""
        if len(part) >= 2 and part.isupper() and nxt[:1].isupper():
            out.append(part + nxt)
            i += 2
            continue
        out.append(part)
        i += 1
    return out
