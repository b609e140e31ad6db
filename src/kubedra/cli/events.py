"""`kubedra get events`: core/v1 Events, as `kubectl get events` lists them.

On a real cluster they are the API server's (kube-scheduler's, the kubelet's, kubedra's
scheduler's). The embedded store keeps no Event objects, so there the events are the ones
`describe` reads from what pods, claims and taint rules record about themselves
(`kubedra.cli.describe.events_of`), shaped as core/v1 Events: the same table, the same
`-o yaml|json`, on both backends.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import DeviceTaintRule, ResourceClaim
from kubedra.cli.output import age, table
from kubedra.cluster import SqliteStore
from kubedra.cluster.store import DEFAULT_NAMESPACE, Store

EVENT_NAMES = frozenset({"event", "events", "ev", "events.events.k8s.io", "event.events.k8s.io"})
PAGE = 500  # kubectl's --chunk-size

Event = dict[str, Any]  # a core/v1 Event as the API serves it


def is_events(kind: str) -> bool:
    return kind.lower() in EVENT_NAMES


def list_events(store: Store, namespace: str | None) -> list[Event]:
    """The events of a namespace (None: all), oldest first."""
    if isinstance(store, SqliteStore):
        found = _recorded(store, namespace)
    else:
        found = _served(store, namespace)
    return sorted(found, key=lambda e: (last_seen(e) is None, last_seen(e) or ""))


def last_seen(event: Event) -> str | None:
    series = event.get("series") or {}
    return series.get("lastObservedTime") or event.get("lastTimestamp") or first_seen(event)


def first_seen(event: Event) -> str | None:
    return event.get("firstTimestamp") or event.get("eventTime")


def _served(store: Store, namespace: str | None) -> list[Event]:
    """core/v1 events from the API server, page by page."""
    from kubedra.cluster.rest import Request

    client = getattr(store, "client")  # noqa: B009 (KubeStore's, not part of the Store seam)
    path = f"/api/v1/namespaces/{namespace}/events" if namespace else "/api/v1/events"
    query = {"limit": str(PAGE)}
    items: list[Event] = []
    about = Request("list", "events", namespace or "", kind="Event")
    while True:
        data = json.loads(client.request("GET", path, about, query=query))
        items += data.get("items") or []
        token = (data.get("metadata") or {}).get("continue")
        if not token:
            return items
        query["continue"] = token


def _recorded(store: Store, namespace: str | None) -> list[Event]:
    """The embedded store's: what its objects record, as events."""
    from kubedra.cli.describe import events_of

    pods = store.list(Pod, namespace)
    by_uid = {p.metadata.uid or "": p for p in pods}
    objects: list[KubeObject] = [*pods, *store.list(ResourceClaim, namespace)]
    if namespace in (None, DEFAULT_NAMESPACE):  # cluster-scoped objects' events live there
        objects += store.list(DeviceTaintRule)
    return [_event(obj, e) for obj in objects for e in events_of(obj, by_uid)]


def _event(obj: KubeObject, found: Any) -> Event:
    namespace = obj.namespace or DEFAULT_NAMESPACE
    digest = hashlib.sha256(f"{found.reason}{found.time}{found.message}".encode()).hexdigest()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{obj.name}.{digest[:16]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.api_version,
            "kind": obj.KIND,
            "name": obj.name,
            **({"namespace": obj.namespace} if obj.namespace else {}),
            "uid": obj.metadata.uid or "",
        },
        "reason": found.reason,
        "message": found.message,
        "type": found.type,
        "source": {"component": found.source},
        "firstTimestamp": found.time,
        "lastTimestamp": found.time,
        "count": 1,
    }


def events_table(events: list[Event], wide: bool, with_namespace: bool) -> str:
    """kubectl's columns: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE (and with -o wide
    SUBOBJECT, SOURCE, FIRST SEEN, COUNT, NAME); NAMESPACE first with -A."""
    header = ["LAST SEEN", "TYPE", "REASON", "OBJECT"]
    header += WIDE if wide else ["MESSAGE"]
    rows = [_row(e, wide) for e in events]
    if with_namespace:
        header = ["NAMESPACE", *header]
        rows = [[_namespace(e), *r] for e, r in zip(events, rows, strict=True)]
    return table(header, rows)


WIDE = ["SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME"]


def _namespace(event: Event) -> str:
    return str((event.get("metadata") or {}).get("namespace", ""))


def _row(event: Event, wide: bool) -> list[str]:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    kind, name = str(involved.get("kind", "")).lower(), involved.get("name", "")
    target = f"{kind}/{name}" if name else kind
    message = str(event.get("message") or event.get("note") or "").strip()
    cells = [age(last_seen(event)), str(event.get("type", "")), str(event.get("reason", ""))]
    cells.append(target)
    if not wide:
        return [*cells, message]
    series = event.get("series") or {}
    count = series.get("count") or event.get("count") or 1
    return [
        *cells,
        involved.get("fieldPath", ""),
        _source(event),
        message,
        age(first_seen(event)),
        str(count),
        (event.get("metadata") or {}).get("name", ""),
    ]


def _source(event: Event) -> str:
    """kubectl's formatEventSource: component and host, else the reporting controller."""
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component
