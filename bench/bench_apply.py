"""`apply` and the update rules: what the three-way merge and the update checks cost.

- the merge alone (`merge_applied`) for the seed pod and for an 8-GPU ResourceSlice;
- `kubedra apply` of 500 pods into the embedded store: first apply (create), re-apply of
  the same manifests (unchanged: read, merge, no write), re-apply with a changed label;
- the update rules on the scheduler's bind (a pod update setting spec.nodeName): the check
  alone, and a whole `SqliteStore.update`, whose cost it adds to.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec

from bench.bench_api import slice_doc
from bench.harness import Row, best_of, per_call, sized
from kubedra.api.apply import merge_applied, with_last_applied
from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.api.validation.update import validate_update
from kubedra.cluster import SqliteStore
from kubedra.cluster.apply import apply_object
from kubedra.cluster.store import atomic

PODS = sized(500, 50)


def pod(n: int, label: str = "a") -> Pod:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{n:04d}", "namespace": "default", "labels": {"v": label}},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
            "containers": [
                {"name": "app", "image": "vllm/vllm-openai:latest", "command": ["serve"],
                 "env": [{"name": "A", "value": "1"}], "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }
    obj = decode_object(doc).obj
    assert isinstance(obj, Pod)
    return obj


def bound(obj: Pod) -> Pod:
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, node_name="node-1"))


def merge_rows() -> list[Row]:
    rows = []
    gpus = decode_object(slice_doc(0)).obj
    objects = (("seed-like pod", pod(0)), ("ResourceSlice, 8 GPUs", gpus))
    for name, manifest in objects:
        live: KubeObject = with_last_applied(manifest)
        if isinstance(live, Pod):
            live = bound(live)
        seconds = per_call(lambda m=manifest, c=live: merge_applied(m, c), 500)
        rows.append(Row("apply", f"merge_applied, {name} (unchanged)", seconds * 1e6, "us"))
    return rows


def store_rows(folder: Path) -> list[Row]:
    rows = []
    for verb, label in (("create", "a"), ("unchanged", "a"), ("configured", "b")):
        store = SqliteStore(folder / f"{verb}.db")
        if verb != "create":
            with atomic(store):
                for n in range(PODS):
                    apply_object(store, pod(n))
        manifests = [pod(n, label) for n in range(PODS)]

        def run(s: SqliteStore = store, ms: list[Pod] = manifests) -> None:
            with atomic(s):
                for m in ms:
                    apply_object(s, m)

        seconds = best_of(run, repeat=1)
        rows.append(Row("apply", f"apply {PODS} pods, embedded store ({verb})", seconds * 1e3, "ms",
                        note=f"{seconds / PODS * 1e6:,.0f} us/object"))
        store.close()
    return rows


def bind_rows(folder: Path) -> list[Row]:
    unbound = pod(0)
    check = per_call(lambda: validate_update(unbound, bound(unbound)), 2000)
    store = SqliteStore(folder / "bind.db")
    created = [store.create(pod(n)) for n in range(PODS)]
    pending = iter(created)
    # The update rules refuse nodeName in an update (as the API server does): a bind is
    # `pods/binding`, the store's `bind`.
    update = per_call(lambda: store.bind(next(pending), "node-1"), PODS, repeat=1)
    store.close()
    return [
        Row("apply", "update rules: pod bind check (validate_update)", check * 1e6, "us"),
        Row("apply", "SqliteStore.bind: pod bind", update * 1e6, "us",
            note=f"an update's rules check would be {check / update:.0%} of it"),
    ]


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        return merge_rows() + store_rows(folder) + bind_rows(folder)
