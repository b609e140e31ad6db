"""A scheduling workload for a cluster, the same for every scheduler put to it.

GPU nodes whose slices kubedra's driver code publishes (catalog profiles, as `kubedra
cluster create` makes them), one DeviceClass, claim templates, pods that ask for devices
through them (for a given scheduler, optionally pinned to one node), and a clock that
notes when each pod got bound, as the watch shows it. Used by the side-by-side benchmark
with kube-scheduler and by the real-cluster tests.

Also upstream's scheduler_perf DRA objects (`perf_*`: nodes with one slice of test-driver
devices, its DeviceClass, claim template and pod, claims allocated without a pod), for the
benchmark's runs of its shapes.
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
from kubedra.api.scheduling import PodGroup
from kubedra.catalog import profile
from kubedra.cluster.reflector import Reflector
from kubedra.cluster.store import Store
from kubedra.devcluster.harness import plain_node
from kubedra.driver.publisher import node_owner_ref, publish, slice_object, slice_specs

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
    direct: bool = False,
    threads: int = 8,
) -> list[str]:
    """`count` nodes of a catalog profile (8 GPUs for the default), created with their
    status (Ready, allocatable) and their slices published by the simulated driver.
    `direct`: the slices its first publish would write (generation 1), created without the
    publisher's reads of the node and its slices (large clusters: 1.6x faster at 2,000)."""
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
            if not direct:
                publish(store, inventory, name)
                continue
            owners = (node_owner_ref(name, created.metadata.uid or ""),)
            for i, spec in enumerate(slice_specs(inventory, name)):
                store.create(slice_object(name, inventory.driver, i, spec, 1, owners))

    in_parallel(make, names, threads)
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


def pod_group(
    name: str,
    min_count: int | None,
    *,
    namespace: str = "default",
    topology_key: str = "",
    claims: Sequence[tuple[str, str]] = (),
) -> PodGroup:
    """A scheduling.k8s.io/v1beta1 PodGroup: a gang of `min_count` (`None`: the basic
    policy, its pods scheduled independently), all in one domain of `topology_key` when
    given, with PodGroup-level claims (KEP-5729) as (name, template) pairs."""
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {
        "gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if claims:
        spec["resourceClaims"] = [
            {"name": claim, "resourceClaimTemplateName": template} for claim, template in claims
        ]
    obj = _decode(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )
    assert isinstance(obj, PodGroup)
    return obj


def group_pod(
    name: str,
    group: str,
    template: str,
    scheduler: str,
    *,
    namespace: str = "default",
    node_selector: dict[str, str] | None = None,
) -> Pod:
    """`claim_pod` as a member of PodGroup `group` (spec.schedulingGroup); its claim
    `gpus` from `template` (a PodGroup claim of the same name, if the group has one,
    replaces it)."""
    pod = claim_pod(name, template, scheduler, namespace=namespace, node_selector=node_selector)
    data = msgspec.to_builtins(pod)
    data["spec"]["schedulingGroup"] = {"podGroupName": group}
    obj = _decode({"apiVersion": "v1", "kind": "Pod", **data})
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


# --- upstream's scheduler_perf DRA shapes (test/integration/scheduler_perf/dra) ----------

PERF_DRIVER = "test-driver.cdi.k8s.io"
PERF_CLASS = "test-class"
PERF_TEMPLATE = "test-claim-template"
PERF_NODE_PREFIX = "scheduler-perf-dra"


def perf_nodes(store: Store, count: int, devices: int = 10) -> list[str]:
    """scheduler_perf's `node-with-dra-test-driver.yaml` nodes (4 CPUs, 32Gi, 110 pods,
    Ready) and, for each, what its `createResourceDriver` op publishes: one slice, pool
    named after the node, `devices` devices `instance-<i>` (its maxClaimsPerNode)."""
    names = [f"{PERF_NODE_PREFIX}-{i}" for i in range(count)]

    def make(name: str) -> None:
        node = plain_node(name, cpu="4", memory="32Gi")
        created = store.create(node)
        store.update_status(msgspec.structs.replace(created, status=node.status))
        store.create(perf_slice(name, devices))

    in_parallel(make, names)
    return names


def perf_slice(node: str, devices: int) -> KubeObject:
    return _decode(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": node},
            "spec": {
                "driver": PERF_DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"instance-{i}",
                        "attributes": {
                            "model": {"string": "A100"},
                            "family": {"string": "GPU"},
                            "driverVersion": {"version": "1.2.3"},
                            "dra.example.com/numa": {"int": i},
                        },
                        "capacity": {"memory": {"value": "1Gi"}},
                    }
                    for i in range(devices)
                ],
            },
        }
    )


def perf_class() -> KubeObject:
    """scheduler_perf's `deviceclass.yaml`."""
    return _decode(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": PERF_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{PERF_DRIVER}"'}}]},
        }
    )


def perf_claim_spec() -> dict[str, Any]:
    return {
        "devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": PERF_CLASS}}]}
    }


def perf_template(namespace: str) -> KubeObject:
    """scheduler_perf's `resourceclaimtemplate.yaml` (one request, one device)."""
    return _decode(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": PERF_TEMPLATE, "namespace": namespace},
            "spec": {"spec": perf_claim_spec()},
        }
    )


def perf_pod(name: str, namespace: str, scheduler: str) -> Pod:
    """scheduler_perf's `pod-with-claim-template.yaml`, for `scheduler`."""
    obj = _decode(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedulerName": scheduler,
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10.1",
                        "resources": {"claims": [{"name": "resource"}]},
                    }
                ],
                "resourceClaims": [
                    {"name": "resource", "resourceClaimTemplateName": PERF_TEMPLATE}
                ],
            },
        }
    )
    assert isinstance(obj, Pod)
    return obj


def perf_allocated_claims(
    store: Store,
    count: int,
    nodes: Sequence[str],
    devices: int = 10,
    namespace: str = "init",
    first: int = 0,
) -> None:
    """scheduler_perf's `resourceclaim.yaml` x `count` with its `allocResourceClaims` op:
    claims allocated without a pod (devices in use), filling the nodes in order; `first`:
    that many were made before (numbered and placed after them)."""
    if first + count > len(nodes) * devices:
        raise ValueError(f"{count} claims do not fit {len(nodes)} nodes x {devices} devices")

    def make(k: int) -> None:
        node, device = nodes[k // devices], f"instance-{k % devices}"
        claim = _decode(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"test-claim-{k}", "namespace": namespace},
                "spec": perf_claim_spec(),
            }
        )
        created = store.create(claim)
        allocated = _decode(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": created.name,
                    "namespace": namespace,
                    "resourceVersion": created.metadata.resource_version,
                    "uid": created.metadata.uid,
                },
                "spec": perf_claim_spec(),
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "req-0",
                                    "driver": PERF_DRIVER,
                                    "pool": node,
                                    "device": device,
                                }
                            ]
                        },
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": [node]}
                                    ]
                                }
                            ]
                        },
                    }
                },
            }
        )
        store.update_status(allocated)

    in_parallel(make, range(first, first + count))


def _decode(data: dict[str, Any]) -> KubeObject:
    return decode_object(data).obj
