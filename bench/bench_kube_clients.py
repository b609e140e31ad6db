"""Listing 5,000 ResourceSlices from a real kube-apiserver: kubedra's client against others.

The same 5,000 slices (8 devices x 12 attributes, the API load benchmark's workload) are
created in a local control plane (`kubedra dev-cluster`); then each client lists them all
and decodes them into its own typed objects, best of 3:
- kubedra: KubeStore (urllib3, JSON bytes decoded by msgspec straight into kubedra's models);
- httpx + msgspec: the same decode, over httpx instead of urllib3;
- the official `kubernetes` client (37.x, pydantic models), `lightkube` (its own models),
  `kr8s` (dict-backed objects): measured when installed (`pip install kubernetes==37.0.2
  lightkube lightkube-models kr8s httpx`), skipped otherwise.
Skipped entirely when the control-plane binaries are not built.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import msgspec

from bench.bench_api import SLICES, slice_doc
from bench.harness import Row, best_of
from kubedra.api.resource import ResourceSlice
from kubedra.cluster.kubeconfig import load_config
from kubedra.cluster.kubernetes import RESOURCES, KubeStore
from kubedra.cluster.rest import Request
from kubedra.devcluster.binaries import binaries
from kubedra.devcluster.harness import DevCluster

GROUP = "kube clients"


def run() -> list[Row]:
    if not binaries().complete():
        return [
            Row(GROUP, "list 5,000 slices", 0, "s", note="skipped: run `kubedra dev-cluster build`")
        ]
    with tempfile.TemporaryDirectory() as folder:
        cluster = DevCluster(folder)
        started = time.perf_counter()
        cluster.up()
        try:
            ready = time.perf_counter() - started
            return [_start_row(ready), *_list_rows(cluster)]
        finally:
            cluster.down()


def _start_row(seconds: float) -> Row:
    """etcd, kube-apiserver and kube-controller-manager started and answering (the issue:
    under 30 s once built)."""
    return Row(GROUP, "dev cluster: start to ready", seconds, "s", "< 30", seconds < 30)


def _list_rows(cluster: DevCluster) -> list[Row]:
    store = cluster.store(qps=-1)
    _create_slices(store)
    config = str(cluster.kubeconfig)
    rows = [_row("kubedra KubeStore (urllib3 + msgspec)", lambda: _kubedra(store))]
    candidates: list[tuple[str, str, Callable[[str], int]]] = [
        ("httpx", "httpx + msgspec (kubedra models)", _httpx),
        ("kubernetes", "kubernetes 37 (pydantic models)", _official),
        ("lightkube", "lightkube (its models)", _lightkube),
        ("kr8s", "kr8s (dict objects)", _kr8s),
    ]
    for module, name, fn in candidates:
        if importlib.util.find_spec(module) is None:
            rows.append(Row(GROUP, name, 0, "s", note=f"skipped: {module} not installed"))
            continue
        rows.append(_row(name, lambda fn=fn: fn(config)))  # type: ignore[misc]
    store.close()
    return rows


def _row(name: str, fn: Callable[[], int]) -> Row:
    count = fn()  # warm up, and check that every client saw every slice
    assert count == SLICES, (name, count)
    return Row(GROUP, f"list+decode {SLICES:,} slices: {name}", best_of(fn), "s")


def _create_slices(store: KubeStore) -> None:
    res = RESOURCES[ResourceSlice]
    about = Request("create", res.full_name)
    started = time.perf_counter()

    def create(n: int) -> None:
        doc = slice_doc(n)
        doc["metadata"] = {"name": doc["metadata"]["name"]}
        store.client.request("POST", res.path(), about, body=json.dumps(doc).encode())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(SLICES)))
    took = time.perf_counter() - started
    print(f"  created {SLICES:,} slices in {took:.1f} s", file=sys.stderr)


def _kubedra(store: KubeStore) -> int:
    return len(store.list(ResourceSlice))


def _httpx(kubeconfig: str) -> int:
    import httpx

    from kubedra.cluster.kubernetes import _decode_item

    config = load_config(kubeconfig)
    ca = tempfile.NamedTemporaryFile(suffix=".crt")  # noqa: SIM115
    ca.write(config.ca_data or b"")
    ca.flush()
    headers = {"Authorization": config.credentials.authorization() or ""}
    count, query = 0, {"limit": "500"}
    with httpx.Client(base_url=config.server, verify=ca.name, headers=headers) as client:
        while True:
            data = client.get("/apis/resource.k8s.io/v1/resourceslices", params=query).content
            page = msgspec.json.decode(data, type=_Page)
            meta = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}
            count += len([_decode_item(ResourceSlice, raw, meta) for raw in page.items])
            if not page.metadata.get("continue"):
                return count
            query["continue"] = str(page.metadata["continue"])


def _official(kubeconfig: str) -> int:
    from kubernetes import client, config  # type: ignore[import-not-found]

    api = client.ResourceV1Api(config.new_client_from_config(kubeconfig))
    count, token = 0, None
    while True:
        page = api.list_resource_slice(limit=500, _continue=token)
        count += len(page.items)
        token = page.metadata._continue if page.metadata else None
        if not token:
            return count


def _lightkube(kubeconfig: str) -> int:
    from lightkube import Client, KubeConfig  # type: ignore[import-not-found]
    from lightkube.resources.resource_v1 import ResourceSlice as LkSlice  # type: ignore[import-not-found]

    client = Client(KubeConfig.from_file(kubeconfig))
    return sum(1 for _ in client.list(LkSlice, chunk_size=500))


def _kr8s(kubeconfig: str) -> int:
    import kr8s  # type: ignore[import-not-found]

    api = kr8s.api(kubeconfig=kubeconfig)
    return len(list(api.get("resourceslices.resource.k8s.io")))


class _Page(msgspec.Struct):
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)
    metadata: dict[str, object] = msgspec.field(default_factory=dict)
