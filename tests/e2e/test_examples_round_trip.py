"""Every example in examples/, written by one client and read by the other, field for field.

kubectl apply -> kubedra reads, and kubedra apply -> kubectl reads: each object as kubedra
decodes it (dumped back to kubectl's JSON) equals what kubectl prints, managed fields
included, so nothing the server holds is lost or invented on the way through kubedra's
models. The seed goes through `kubedra convert` first (its bare CEL lookup and v1beta1-style
request are kubedra's lenient forms, which the API server refuses). The cluster serves
scheduling.k8s.io/v1beta1 with kubedra's gates, for examples/gang-training.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.codec import to_dict
from kubedra.api.gates import WORKLOAD_FEATURE_GATES
from kubedra.api.loader import load_text
from kubedra.api.meta import KubeObject
from kubedra.cluster.kubernetes import RESOURCES, KubeStore
from kubedra.devcluster.binaries import Binaries
from kubedra.devcluster.harness import DevCluster
from tests.conftest import REPO
from tests.e2e.conftest import run_kubedra

EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, control_plane: Binaries) -> Iterator[DevCluster]:
    """conftest's cluster, also serving Workloads and PodGroups (the gang example's kinds)."""
    folder = tmp_path_factory.mktemp("cluster")
    with DevCluster(folder, kube_scheduler=True, feature_gates=WORKLOAD_FEATURE_GATES) as running:
        yield running


def manifests(cluster: DevCluster, example: Path) -> str:
    """The example as YAML the API server accepts."""
    converted = run_kubedra(cluster, "convert", "-f", str(example))
    assert converted.returncode == 0, converted.stderr
    return converted.stdout


def objects_of(text: str) -> list[KubeObject]:
    return [o.obj for o in load_text(text).objects]


def kubectl_json(cluster: DevCluster, obj: KubeObject) -> dict[str, Any]:
    res = RESOURCES[type(obj)]
    where = ["-n", obj.namespace or "default"] if res.namespaced else []
    out = cluster.kubectl("get", res.full_name, obj.name, *where, "-o", "json",
                          "--show-managed-fields")
    data: dict[str, Any] = json.loads(out)
    return data


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two JSON documents differ (a null field is the same as an absent one: Go
    prints a zero time as null where kubedra omits it)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        keys = {k for k in set(ours) | set(theirs) if (ours.get(k), theirs.get(k)) != (None, None)}
        for key in sorted(keys):
            if key not in theirs:
                out.append(f"{path}.{key}: only in kubedra's")
            elif key not in ours:
                out.append(f"{path}.{key}: only in kubectl's")
            else:
                out += differences(ours[key], theirs[key], f"{path}.{key}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, pair in enumerate(zip(ours, theirs, strict=True))
                for d in differences(*pair, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path}: {ours!r} != {theirs!r}"]


def assert_same_view(cluster: DevCluster, kube: KubeStore, text: str) -> None:
    """Each object read by both clients at one resourceVersion is the same, field for field.
    (Controllers and kube-scheduler may write in between: read again until both agree on
    the version.)"""
    for wanted in objects_of(text):
        for _ in range(20):
            theirs = kubectl_json(cluster, wanted)
            ours = to_dict(kube.get(type(wanted), wanted.name, wanted.namespace or "default"))
            if ours["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]:
                break
            time.sleep(0.2)
        assert differences(ours, theirs) == [], f"{wanted.KIND} {wanted.name}"
        assert ours.get("spec") == theirs.get("spec")


def delete_example(cluster: DevCluster, text: str) -> None:
    cluster.kubectl("delete", "-f", "-", "--wait=true", "--timeout=60s", "--force",
                    "--grace-period=0", input=text, check=False)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_kubectl_writes_kubedra_reads(cluster: DevCluster, kube: KubeStore, example: Path) -> None:
    text = manifests(cluster, example)
    cluster.kubectl("apply", "-f", "-", input=text)
    try:
        assert_same_view(cluster, kube, text)
    finally:
        delete_example(cluster, text)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_kubedra_writes_kubectl_reads(cluster: DevCluster, kube: KubeStore, example: Path) -> None:
    text = manifests(cluster, example)
    applied = run_kubedra(cluster, "apply", "-f", "-", input=text)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.count(" created") == len(objects_of(text))
    try:
        assert_same_view(cluster, kube, text)
        # What the manifest says is what the server holds (defaults aside: compared where
        # the manifest sets a field).
        for wanted in objects_of(text):
            held = kubectl_json(cluster, wanted)
            assert contains(held.get("spec"), to_dict(wanted).get("spec")), wanted.name
    finally:
        delete_example(cluster, text)


def contains(held: Any, wanted: Any) -> bool:
    """Every field `wanted` sets has the same value in `held`. A list's items are found in
    order, with items the server added between them allowed (admission appends some: the
    DefaultTolerationSeconds plugin adds not-ready and unreachable tolerations to a pod)."""
    if wanted is None:
        return True
    if isinstance(wanted, dict):
        return isinstance(held, dict) and all(
            k in held and contains(held[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        if not isinstance(held, list):
            return False
        rest = iter(held)
        return all(any(contains(h, w) for h in rest) for w in wanted)
    return bool(held == wanted)
