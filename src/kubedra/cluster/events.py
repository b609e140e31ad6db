"""Events about objects (events.k8s.io/v1), as `kubectl describe` and `kubectl get events`
show them, written in the background so that reporting never slows the reporter down.

Like kube-scheduler's event broadcaster: a queue drained by one thread, through a client
of its own, and a full queue drops events rather than blocking. That client has the limits
of the component's own (`--kube-api-qps`/`--kube-api-burst`: kube-scheduler makes its event
client from the same clientConnection config, cmd/kube-scheduler/app/options
`createClients`), in a rate limiter of its own, so events never take the scheduler's API
budget. Only the API server keeps events: for the
embedded store the recorder logs them (it has no event expiry, and the pod's conditions
already say the same).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
from dataclasses import dataclass
from typing import Protocol

from kubedra.api.meta import KubeObject
from kubedra.cluster.kubernetes import RESOURCES, KubeStore
from kubedra.cluster.leader import micro_time
from kubedra.cluster.rest import ApiClient, Request
from kubedra.errors import KubedraError

log = logging.getLogger(__name__)
NOTE_LIMIT = 1024  # the API server refuses longer notes
QUEUE_LIMIT = 1000  # events waiting to be written; more are dropped (as client-go does)


@dataclass(frozen=True)
class Event:
    regarding: KubeObject
    type: str  # Normal or Warning
    reason: str  # e.g. Scheduled, FailedScheduling
    action: str  # e.g. Binding, Scheduling
    note: str


class Recorder(Protocol):
    def record(self, event: Event) -> None: ...

    def close(self) -> None: ...


class LogRecorder:
    """Events as log lines (where no API server keeps them)."""

    def record(self, event: Event) -> None:
        obj = event.regarding
        log.info("%s %s/%s: %s: %s", obj.KIND, obj.namespace, obj.name, event.reason, event.note)

    def close(self) -> None:
        pass


class ApiRecorder:
    """Creates events.k8s.io/v1 Events through its own client, one background thread.
    `qps`/`burst`: its rate limit; by default the store's client's (a limiter of its own)."""

    def __init__(
        self,
        store: KubeStore,
        controller: str,
        instance: str,
        qps: float | None = None,
        burst: int | None = None,
    ) -> None:
        limits = store.client.limiter
        self.client = ApiClient(
            store.config,
            qps=limits.qps if qps is None else qps,
            burst=limits.burst if burst is None else burst,
        )
        self.controller, self.instance = controller, instance
        self.dropped = 0
        self.written = 0
        self._queue: queue.Queue[Event | None] = queue.Queue(QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._drain, daemon=True, name="events")
        self._thread.start()

    def record(self, event: Event) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to `timeout` seconds), then stop."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)
        self.client.close()

    def _drain(self) -> None:
        while (event := self._queue.get()) is not None:
            try:
                self._write(event)
                self.written += 1
            except (KubedraError, OSError) as err:
                log.warning("event %s not written: %s", event.reason, err)

    def _write(self, event: Event) -> None:
        obj = event.regarding
        res = RESOURCES[type(obj)]
        stamp = micro_time()
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                # kubectl's and client-go's naming: the object's name and a unique suffix
                "name": f"{obj.name}.{os.urandom(8).hex()}",
                "namespace": obj.namespace or "default",
            },
            "eventTime": stamp,
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": event.action,
            "reason": event.reason,
            "type": event.type,
            "note": event.note[:NOTE_LIMIT],
            "regarding": {
                "apiVersion": res.group_version,
                "kind": obj.KIND,
                "namespace": obj.namespace,
                "name": obj.name,
                "uid": obj.metadata.uid,
                "resourceVersion": obj.metadata.resource_version,
            },
        }
        namespace = obj.namespace or "default"
        self.client.request(
            "POST",
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            Request("create", "events.events.k8s.io", namespace, kind="Event"),
            body=json.dumps(body).encode(),
        )


def recorder_for(store: object, controller: str, instance: str) -> Recorder:
    """An API recorder on a cluster (with the store's client limits), a log recorder
    elsewhere."""
    if isinstance(store, KubeStore):
        return ApiRecorder(store, controller, instance)
    return LogRecorder()
