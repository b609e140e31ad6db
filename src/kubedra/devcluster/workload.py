"""A scheduling workload for a cluster, the same for every scheduler put to it.

GPU nodes whose slices kubedra's driver code publishes (catalog profiles, as `kubedra
cluster create` makes them), one DeviceClass, claim templates, pods that ask for devices
through them (for a given scheduler, optionally pinned to one node), and a clock that
notes when each pod got bound, as the watch shows it. Used by the side-by-side benchmark
with kube-scheduler and by the real-cluster tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import DeviceClass, ResourceClaimTemplate
from kubedra.catalog import profile
from kubedra.cluster.reflector import Reflector
from kubedra.cluster.store import Store
from kubedra.driver.publisher import publish

GPU_CLASS = "gpu"
T = TypeVar("T")


def in_parallel(fn: Callable[[T], object], items: Iterable[T], threads: int = 8) -> None:
    """`fn` over `items` from a few threads (a remote store answers one call at a time)."""
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            pass


def gpu_nodes(
    store: Store,
    count: int,
    node_profile: str = "h100x8",
    prefix: str = "",
    labels: dict[str, str] | None = None,
) -> list[str]:
    """`count` nodes of a catalog profile (8 GPUs for the default), created with their
    status (Ready, allocatable) and their slices published by the simulated driver."""
    prof = profile(node_profile)
    names = [f"{prefix or prof.name}-{i:04d}" for i in range(count)]

    def make(name: str) -> None:
        wanted = prof.node(name)
        if labels:
            meta = msgspec.structs.replace(
                wanted.metadata, labels={**wanted.metadata.labels, **labels}
            )
            wanted = msgspec.structs.replace(wanted, metadata=meta)
        created = store.create(wanted)
        if created.status != wanted.status:
            store.update_status(msgspec.structs.replace(created, status=wanted.status))
        for inventory in prof.inventories(name):
            publish(store, inventory, name)

    in_parallel(make, names)
    return names


def gpu_class() -> DeviceClass:
    obj = decode_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU_CLASS},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]},
        }
    ).obj
    assert isinstance(obj, DeviceClass)
    return obj


def gpu_template(name: str, count: int = 1, namespace: str = "default") -> ResourceClaimTemplate:
    obj = decode_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpus",
                                "exactly": {"deviceClassName": GPU_CLASS, "count": count},
                            }
                        ]
                    }
                }
            },
        }
    ).obj
    assert isinstance(obj, ResourceClaimTemplate)
    return obj


def claim_pod(
    name: str,
    template: str,
    scheduler: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    node_selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> Pod:
    """A pod with one claim from `template`, for `scheduler`; pinned to `node` by its
    hostname label when given (a nodeSelector: still scheduled, unlike spec.nodeName)."""
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"claims": [{"name": "gpus"}]},
            }
        ],
    }
    selector = dict(node_selector or {})
    if node is not None:
        selector["kubernetes.io/hostname"] = node
    if selector:
        spec["nodeSelector"] = selector
    obj = decode_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": spec,
        }
    ).obj
    assert isinstance(obj, Pod)
    return obj


def create_all(store: Store, objects: Sequence[KubeObject], threads: int = 8) -> None:
    in_parallel(store.create, objects, threads)


class BindingClock:
    """Watches pods and notes, for each, when it was first seen bound (monotonic time)."""

    def __init__(self, store: Store) -> None:
        self.bound: dict[str, float] = {}  # namespace/name -> when
        self.nodes: dict[str, str] = {}  # namespace/name -> node
        self._stop = threading.Event()
        self._reflector = Reflector(store, Pod)
        self._thread = threading.Thread(target=self._watch, daemon=True, name="binding-clock")
        self._thread.start()

    def _watch(self) -> None:
        for event in self._reflector.events(self._stop, idle=0.5):
            pod = event.obj
            assert isinstance(pod, Pod)
            key = f"{pod.namespace}/{pod.name}"
            if pod.spec.node_name and key not in self.bound:
                self.bound[key] = time.monotonic()
                self.nodes[key] = pod.spec.node_name

    def wait(self, count: int, timeout: float, stalled: float = 60.0) -> bool:
        """Until `count` pods are bound (True), `timeout` passes, or nothing was bound for
        `stalled` seconds (False)."""
        deadline = time.monotonic() + timeout
        last, seen = time.monotonic(), len(self.bound)
        while len(self.bound) < count:
            now = time.monotonic()
            if now > deadline or now - last > stalled:
                return False
            if len(self.bound) != seen:
                last, seen = now, len(self.bound)
            time.sleep(0.1)
        return True

    def close(self) -> None:
        self._stop.set()
