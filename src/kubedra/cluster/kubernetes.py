"""`KubeStore`: the Store protocol over a real Kubernetes API server.

Objects go in and out as kubedra's own models: responses are decoded from JSON bytes
straight into them (the same codec as the embedded store), requests are their kubectl-shaped
JSON. What the API server owns stays with it: names from generateName, uids,
resourceVersions, defaults, validation, admission, finalizers and garbage collection.
Its errors come back as kubedra's (`NotFound`, `AlreadyExists`, `Conflict`,
`ValidationError` with the server's field paths, `Expired` for 410 Gone).

resourceVersions are compared as integers, as the embedded store's are. The API calls
them opaque; every etcd-backed server (all of them, in practice) issues etcd revisions,
which are cluster-wide and increasing, so kubedra's "changes since" works across kinds.
"""

from __future__ import annotations

import builtins
import json
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from kubedra.api.codec import decode_json, to_dict
from kubedra.api.coordination import Lease
from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.kinds import ALL_KINDS, BY_KIND, with_type_meta
from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.scheduling import PodGroup, Workload
from kubedra.cluster.kubeconfig import ClusterConfig
from kubedra.cluster.rest import ApiClient, Expired, Request
from kubedra.cluster.store import DEFAULT_NAMESPACE, EventType, T, WatchEvent
from kubedra.errors import NotFound

LIST_PAGE = 500  # items per list request (client-go's pager default)
WATCH_SECONDS = 300  # a watch request's lifetime before it is renewed
CHANGES_SETTLE = 0.2  # seconds without news after which `changes` stops reading


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives in the REST API."""

    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def full_name(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else "/api/v1"
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{root}{where}/{self.plural}" + (f"/{name}" if name else "")


RESOURCES: dict[type[KubeObject], Resource] = {
    DeviceClass: Resource("resource.k8s.io", "v1", "deviceclasses", False),
    ResourceClaim: Resource("resource.k8s.io", "v1", "resourceclaims", True),
    ResourceClaimTemplate: Resource("resource.k8s.io", "v1", "resourceclaimtemplates", True),
    ResourceSlice: Resource("resource.k8s.io", "v1", "resourceslices", False),
    DeviceTaintRule: Resource("resource.k8s.io", "v1", "devicetaintrules", False),
    Pod: Resource("", "v1", "pods", True),
    Node: Resource("", "v1", "nodes", False),
    Namespace: Resource("", "v1", "namespaces", False),
    Lease: Resource("coordination.k8s.io", "v1", "leases", True),
    # served with the GenericWorkload gate and `--runtime-config scheduling.k8s.io/v1beta1`
    Workload: Resource("scheduling.k8s.io", "v1beta1", "workloads", True),
    PodGroup: Resource("scheduling.k8s.io", "v1beta1", "podgroups", True),
}
assert set(RESOURCES) == set(BY_KIND.values())


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


_event_decoder = msgspec.json.Decoder(_Event)


class _Meta(msgspec.Struct):
    resourceVersion: str = "0"


class _ListHead(msgspec.Struct):
    metadata: _Meta
    items: list[msgspec.Raw] | None = None


class _ObjectHead(msgspec.Struct):
    kind: str = ""
    metadata: _Meta | None = None


_list_decoder = msgspec.json.Decoder(_ListHead)
_object_head = msgspec.json.Decoder(_ObjectHead)


class KubeStore:
    """The Store of a real cluster. Thread-safe (one connection pool per store)."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.config: ClusterConfig = client.config
        self._written: dict[type[KubeObject], int] = {}  # highest rv this store wrote per kind
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        """Where this store's objects live, for messages (the server and context)."""
        context = f" (context {self.config.context})" if self.config.context else ""
        return f"{self.config.server}{context}"

    def close(self) -> None:
        self.client.close()

    # --- reads ------------------------------------------------------------------------

    def get(self, cls: type[T], name: str, namespace: str = DEFAULT_NAMESPACE) -> T:
        res, ns = RESOURCES[cls], _ns(cls, namespace)
        data = self.client.request(
            "GET", res.path(ns, name), Request("get", res.full_name, ns, name, cls.KIND)
        )
        return _decode(cls, data)

    def list(
        self,
        cls: type[T],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[T]:
        """Objects of a kind, sorted by namespace and name (kubectl's order), page by page."""
        objects, _ = self.list_with_version(cls, namespace, label_selector, field_selector)
        return objects

    def list_with_version(
        self,
        cls: type[T],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[T], int]:
        """The objects and the resourceVersion of the list (where a watch resumes)."""
        res = RESOURCES[cls]
        ns = namespace if res.namespaced else None
        query: dict[str, str] = {"limit": str(LIST_PAGE)}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        objects: builtins.list[T] = []
        about = Request("list", res.full_name, ns or "", kind=cls.KIND)
        while True:
            data = self.client.request("GET", res.path(ns), about, query=query)
            head = _list_decoder.decode(data)
            kind_meta = {"apiVersion": res.group_version, "kind": cls.KIND}
            objects += [_decode_item(cls, raw, kind_meta) for raw in head.items or ()]
            token = _continue_token(data)
            if not token:
                rv = int(head.metadata.resourceVersion or 0)
                break
            query["continue"] = token
        objects.sort(key=lambda o: (o.namespace, o.name))
        return objects, rv

    def resource_version(self) -> int:
        """The cluster's current resourceVersion (a quorum read: etcd's revision now)."""
        res = RESOURCES[Namespace]
        data = self.client.request(
            "GET", res.path(), Request("list", res.full_name), query={"limit": "1"}
        )
        return int(_list_decoder.decode(data).metadata.resourceVersion or 0)

    # --- writes -----------------------------------------------------------------------

    def create(self, obj: T, *, dry_run: bool = False) -> T:
        cls, res = type(obj), RESOURCES[type(obj)]
        ns = _ns(cls, obj.namespace or DEFAULT_NAMESPACE)
        sent = _without_server_fields(obj)
        about = Request("create", res.full_name, ns, obj.name, cls.KIND)
        data = self.client.request(
            "POST", res.path(ns), about, body=_encode(sent), query=_dry(dry_run)
        )
        return self._written_now(_decode(cls, data))

    def update(self, obj: T, *, dry_run: bool = False) -> T:
        """Replace everything but status (a resourceVersion, when given, must be current)."""
        return self._put(obj, "", dry_run)

    def update_status(self, obj: T) -> T:
        """Replace only the status (the `/status` subresource)."""
        return self._put(obj, "/status", False)

    def delete(
        self,
        cls: type[T],
        name: str,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        grace_period_seconds: int | None = None,
    ) -> T:
        """Delete (or, while finalizers remain, mark deleted); the garbage collector takes
        dependents in the background. Returns the object as the server last had it.
        A pod bound to a node is only marked until its kubelet confirms, unless
        `grace_period_seconds=0` (kubectl's `--force --grace-period=0`)."""
        res, ns = RESOURCES[cls], _ns(cls, namespace)
        current = self.get(cls, name, ns)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if current.metadata.uid:
            body["preconditions"] = {"uid": current.metadata.uid}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        data = self.client.request(
            "DELETE",
            res.path(ns, name),
            Request("delete", res.full_name, ns, name, cls.KIND),
            body=json.dumps(body).encode(),
        )
        head = _object_head.decode(data)
        return _decode(cls, data) if head.kind == cls.KIND else current

    def bind(self, pod: Pod, node: str) -> None:
        """Bind a pod to a node through `pods/binding`, as kube-scheduler does; the pod's
        uid is a precondition, so a pod re-created under the same name is never bound."""
        res = RESOURCES[Pod]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.client.request(
            "POST",
            res.path(pod.namespace, pod.name) + "/binding",
            Request("create", "pods/binding", pod.namespace, pod.name, "Binding"),
            body=json.dumps(body).encode(),
        )

    def _put(self, obj: T, subresource: str, dry_run: bool) -> T:
        cls, res = type(obj), RESOURCES[type(obj)]
        ns = _ns(cls, obj.namespace or DEFAULT_NAMESPACE)
        verb = "update"
        about = Request(verb, res.full_name + subresource, ns, obj.name, cls.KIND)
        data = self.client.request(
            "PUT",
            res.path(ns, obj.name) + subresource,
            about,
            body=_encode(with_type_meta(obj)),
            query=_dry(dry_run),
        )
        return self._written_now(_decode(cls, data))

    def _written_now(self, obj: T) -> T:
        rv = int(obj.metadata.resource_version or 0)
        with self._lock:
            self._written[type(obj)] = max(self._written.get(type(obj), 0), rv)
        return obj

    # --- watch ------------------------------------------------------------------------

    def changes(
        self, since: int, kinds: Iterable[type[KubeObject]] | None = None
    ) -> builtins.list[WatchEvent]:
        """Every change after resourceVersion `since` that the server has delivered by
        now, oldest first. The API server replays them from its watch cache; reading stops
        once each kind's stream is quiet for a moment, or has reached the newest write this
        store made (so a client always sees its own writes)."""
        kinds = builtins.list(kinds) if kinds is not None else builtins.list(ALL_KINDS)
        now = self.resource_version()
        events: builtins.list[WatchEvent] = []
        for cls in kinds:
            target = self._written.get(cls, 0)
            for event in self._watch_kind(cls, since, settle=CHANGES_SETTLE, until=target):
                if event.resource_version <= now:
                    events.append(event)
        events.sort(key=lambda e: e.resource_version)
        return events

    def watch(
        self,
        since: int,
        kinds: Iterable[type[KubeObject]] | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """Changes after `since` as they happen, for every kind asked (one stream each,
        renewed as the server ends them, resumed from bookmarks); stops after `timeout`
        seconds without one, or never when None. Raises `Expired` when `since` (or a
        resume point) is older than the server still remembers: relist, then watch again
        (`kubedra.cluster.reflector` does both)."""
        kinds = builtins.list(kinds) if kinds is not None else builtins.list(ALL_KINDS)
        inbox: queue.Queue[WatchEvent | BaseException] = queue.Queue()
        stop = threading.Event()
        threads = [
            threading.Thread(
                target=self._pump, args=(cls, since, inbox, stop), daemon=True, name=cls.KIND
            )
            for cls in kinds
        ]
        for t in threads:
            t.start()
        try:
            while True:
                try:
                    item = inbox.get(timeout=timeout)
                except queue.Empty:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()

    def _pump(
        self,
        cls: type[KubeObject],
        since: int,
        inbox: queue.Queue[WatchEvent | BaseException],
        stop: threading.Event,
    ) -> None:
        """One kind's events into the shared inbox, until stopped or failed."""
        try:
            for event in self._watch_kind(cls, since, stop=stop):
                inbox.put(event)
        except BaseException as err:  # handed to the consumer, which re-raises it
            inbox.put(err)

    def _watch_kind(
        self,
        cls: type[KubeObject],
        since: int,
        *,
        settle: float | None = None,
        until: int = 0,
        stop: threading.Event | None = None,
    ) -> Iterator[WatchEvent]:
        """A kind's changes after `since`, across renewed watch requests. With `settle`,
        a single request that ends after that many quiet seconds once `until` is reached."""
        res = RESOURCES[cls]
        rv = since
        while stop is None or not stop.is_set():
            query = {
                "watch": "1",
                "allowWatchBookmarks": "true",
                "resourceVersion": str(rv),
                "timeoutSeconds": str(WATCH_SECONDS),
            }
            about = Request("watch", res.full_name, kind=cls.KIND)
            read_timeout = settle if settle is not None else WATCH_SECONDS + 30
            for line in self.client.stream(res.path(), about, query=query, timeout=read_timeout):
                if stop is not None and stop.is_set():
                    return
                event = _event_decoder.decode(line)
                if event.type == "ERROR":
                    _raise_status(bytes(event.object), cls)
                head = _object_head.decode(event.object)
                rv = int(head.metadata.resourceVersion) if head.metadata else rv
                if event.type == "BOOKMARK":
                    if settle is not None and rv >= until:
                        return
                    continue
                obj = _decode(cls, bytes(event.object))
                yield WatchEvent(EventType(event.type), rv, obj)
            if settle is not None and rv >= until:
                return  # quiet for `settle` seconds and caught up with our own writes
            if settle is not None:
                time.sleep(settle / 4)


def _raise_status(data: bytes, cls: type[KubeObject]) -> None:
    """A watch's ERROR event carries a Status: 410 (compacted) becomes `Expired`."""
    status = json.loads(data)
    message = str(status.get("message") or "watch failed")
    if status.get("code") == 410 or status.get("reason") in ("Expired", "Gone"):
        raise Expired(f"{cls.KIND} watch: {message}")
    raise NotFound(message) if status.get("code") == 404 else RuntimeError(message)


def _continue_token(data: bytes) -> str:
    class _ListMeta(msgspec.Struct):
        metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    return str(msgspec.json.decode(data, type=_ListMeta).metadata.get("continue") or "")


def _ns(cls: type[KubeObject], namespace: str) -> str:
    return namespace if cls.NAMESPACED else ""


def _dry(dry_run: bool) -> dict[str, str] | None:
    return {"dryRun": "All"} if dry_run else None


def _decode(cls: type[T], data: bytes) -> T:
    obj = decode_json(data).obj
    if not isinstance(obj, cls):
        raise TypeError(f"the API server answered a {obj.kind}, not a {cls.KIND}")
    return obj


def _decode_item(cls: type[T], raw: msgspec.Raw, kind_meta: dict[str, str]) -> T:
    """A list item (the server leaves apiVersion and kind out of items): put them back."""
    data = bytes(raw)
    if not data.startswith(b'{"kind"') and b'"apiVersion"' not in data[:200]:
        data = (
            b'{"apiVersion":"%s","kind":"%s",'
            % (
                kind_meta["apiVersion"].encode(),
                kind_meta["kind"].encode(),
            )
            + data[1:]
        )
    return _decode(cls, data)


def _without_server_fields(obj: T) -> T:
    """What a create sends: no resourceVersion or uid (the server refuses them)."""
    meta = msgspec.structs.replace(obj.metadata, resource_version=None, uid=None)
    return with_type_meta(msgspec.structs.replace(obj, metadata=meta))


def _encode(obj: KubeObject) -> bytes:
    """The object as the server serves its kind: a DeviceTaintRule read as v1beta2 (1.36)
    is written as v1 (the shapes are equal; 1.37 serves only v1)."""
    data = to_dict(with_type_meta(obj))
    data["apiVersion"] = RESOURCES[type(obj)].group_version
    return msgspec.json.encode(data)
