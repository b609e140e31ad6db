"""`kubedra apply` on upstream's kube-apiserver: nothing another writer set is lost, and
kubedra and kubectl take turns applying one object (the last-applied annotation they share)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.apply import LAST_APPLIED, applied_configuration, encode_last_applied
from kubedra.api.core import Pod
from kubedra.api.loader import load_text
from kubedra.api.resource import ResourceClaim
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster, plain_nodes
from tests.e2e.conftest import run_kubedra

SEED_UNCHANGED = [
    "deviceclass.resource.k8s.io/high-memory-gpu unchanged",
    "resourceclaim.resource.k8s.io/vllm-gpu-claim unchanged",
    "pod/vllm-inference unchanged",
]

# A manifest in plain v1 (kubectl sends what it reads; the seed's v1beta1-style request
# fields are kubedra's conversion and would be unknown fields to the API server).
INTEROP = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: {name}-claim
  labels: {labels}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: high-memory-gpu}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {labels}
spec:
  schedulerName: nobody
  resourceClaims: [{{name: gpu, resourceClaimName: {name}-claim}}]
  containers: [{{name: app, image: "registry.k8s.io/pause:3.10", resources: {{claims: [{{name: gpu}}]}}}}]
"""


def apply_kubedra(cluster: DevCluster, path: Path) -> list[str]:
    run = run_kubedra(cluster, "apply", "-f", str(path))
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def apply_kubectl(cluster: DevCluster, path: Path) -> list[str]:
    return cluster.kubectl("apply", "-f", str(path)).splitlines()


def raw(cluster: DevCluster, kind: str, name: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", kind, name, "-o", "json")))


def portable_seed(seed_dir: Path, folder: Path) -> Path:
    """The seed with the class's selector in the portable form its lint warning suggests
    (the API server refuses `device.capacity["memory"]`, which names no driver domain)."""
    shutil.copytree(seed_dir, folder)
    path = folder / "01-deviceclass-high-memory-gpu.yaml"
    path.write_text(path.read_text().replace(
        'device.capacity["memory"]', 'device.capacity["gpu.nvidia.com"].memory'))
    return folder


def test_reapplying_the_seed_keeps_the_binding_and_other_writers_fields(
    cluster: DevCluster, kube: KubeStore, seed_dir: Path, tmp_path: Path
) -> None:
    seed_dir = portable_seed(seed_dir, tmp_path / "seed")
    first = run_kubedra(cluster, "apply", "-f", str(seed_dir))
    assert first.returncode == 0, first.stderr
    assert [line.split()[-1] for line in first.stdout.splitlines()] == ["created"] * 3
    (node,) = plain_nodes(kube, 1, prefix="apply-node")
    kube.bind(kube.get(Pod, "vllm-inference"), node)
    claim = kube.get(ResourceClaim, "vllm-gpu-claim")  # another writer: a controller
    meta = msgspec.structs.replace(
        claim.metadata,
        labels={"example.com/owner": "ctl"},
        finalizers=("example.com/keep",),
    )
    kube.update(msgspec.structs.replace(claim, metadata=meta))
    pod = kube.get(Pod, "vllm-inference")
    meta = msgspec.structs.replace(pod.metadata, annotations={**pod.metadata.annotations, "ctl/seen": "1"})
    kube.update(msgspec.structs.replace(pod, metadata=meta))
    before = raw(cluster, "pod", "vllm-inference"), raw(cluster, "resourceclaim", "vllm-gpu-claim")

    assert apply_kubedra(cluster, seed_dir) == SEED_UNCHANGED

    pod_after, claim_after = raw(cluster, "pod", "vllm-inference"), raw(cluster, "resourceclaim", "vllm-gpu-claim")
    assert pod_after["spec"]["nodeName"] == node
    assert pod_after["metadata"]["annotations"]["ctl/seen"] == "1"
    assert claim_after["metadata"]["finalizers"] == ["example.com/keep"]
    assert claim_after["metadata"]["labels"] == {"example.com/owner": "ctl"}
    # Nothing was written: the server's resourceVersions did not move.
    assert (pod_after, claim_after) == before
    _release(kube, "vllm-gpu-claim")


def test_moving_a_bound_pod_is_refused_by_the_server_as_by_the_embedded_store(
    cluster: DevCluster, kube: KubeStore, seed_dir: Path, tmp_path: Path
) -> None:
    pod = kube.get(Pod, "vllm-inference")
    assert pod.spec.node_name, "runs after the seed test bound the pod"
    moved = tmp_path / "pod.yaml"
    moved.write_text((seed_dir / "03-pod-vllm.yaml").read_text().replace("spec:\n", "spec:\n  nodeName: elsewhere\n"))
    run = run_kubedra(cluster, "apply", "-f", str(moved))
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "Pod default/vllm-inference: spec: Forbidden: pod updates may not change fields other than" in run.stderr


def kubectl_claim_verdict(cluster: DevCluster, path: Path, claim: str) -> str:
    """What kubectl says re-applying an unchanged claim manifest: "configured", because the
    server's defaults (allocationMode, count) sit inside an atomic list that kubectl's patch
    then sends again, though the server writes nothing (the resourceVersion stays)."""
    before = raw(cluster, "resourceclaim", claim)["metadata"]["resourceVersion"]
    verdict = apply_kubectl(cluster, path)[0].split()[-1]
    assert raw(cluster, "resourceclaim", claim)["metadata"]["resourceVersion"] == before
    return verdict


def test_kubectl_then_kubedra_then_kubectl_take_turns(cluster: DevCluster, tmp_path: Path) -> None:
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text(INTEROP.format(name="turns", labels="{app: a, tier: gold}"))
    two.write_text(INTEROP.format(name="turns", labels="{app: b}"))  # tier dropped
    assert apply_kubectl(cluster, one) == [
        "resourceclaim.resource.k8s.io/turns-claim created", "pod/turns created"]
    kubectl_says = kubectl_claim_verdict(cluster, one, "turns-claim")
    # kubectl's annotation is byte for byte what kubedra writes for the same manifest.
    pod_manifest = load_text(one.read_text()).objects[1].obj
    pod_manifest = msgspec.structs.replace(
        pod_manifest, metadata=msgspec.structs.replace(pod_manifest.metadata, namespace="default"))
    kubectl_text = raw(cluster, "pod", "turns")["metadata"]["annotations"][LAST_APPLIED]
    assert kubectl_text == encode_last_applied(applied_configuration(pod_manifest))
    assert apply_kubedra(cluster, one) == [
        "resourceclaim.resource.k8s.io/turns-claim unchanged", "pod/turns unchanged"]
    cluster.kubectl("label", "pod", "turns", "other=kept")  # another writer
    assert apply_kubedra(cluster, two) == [
        "resourceclaim.resource.k8s.io/turns-claim configured", "pod/turns configured"]
    labels = raw(cluster, "pod", "turns")["metadata"]["labels"]
    assert labels == {"app": "b", "other": "kept"}  # tier removed: kubectl's annotation said so
    assert kubectl_claim_verdict(cluster, two, "turns-claim") == kubectl_says
    assert apply_kubectl(cluster, two)[1] == "pod/turns unchanged"


def test_kubedra_then_kubectl_take_turns(cluster: DevCluster, tmp_path: Path) -> None:
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text(INTEROP.format(name="back", labels="{app: a, tier: gold}"))
    two.write_text(INTEROP.format(name="back", labels="{app: b}"))
    assert apply_kubedra(cluster, one) == [
        "resourceclaim.resource.k8s.io/back-claim created", "pod/back created"]
    assert apply_kubectl(cluster, one)[1] == "pod/back unchanged"
    cluster.kubectl("annotate", "pod", "back", "other=kept")
    assert apply_kubectl(cluster, two)[1] == "pod/back configured"
    pod = raw(cluster, "pod", "back")
    assert pod["metadata"]["labels"] == {"app": "b"}
    assert pod["metadata"]["annotations"]["other"] == "kept"
    assert apply_kubedra(cluster, two) == [
        "resourceclaim.resource.k8s.io/back-claim unchanged", "pod/back unchanged"]
    assert apply_kubedra(cluster, one)[-1] == "pod/back configured"
    assert raw(cluster, "pod", "back")["metadata"]["labels"] == {"app": "a", "tier": "gold"}


def _release(kube: KubeStore, claim_name: str) -> None:
    """Drop the test's finalizer so the claim can go when the cluster does."""
    claim = kube.get(ResourceClaim, claim_name)
    meta = msgspec.structs.replace(claim.metadata, finalizers=())
    kube.update(msgspec.structs.replace(claim, metadata=meta))
