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


PASTED = Path(__file__).resolve().parents[1] / "apply" / "pasted"
# Objects pasted from `kubectl get -o yaml` (no owner references: the garbage collector
# would remove objects owned by nodes this cluster does not have while they are compared).
PASTED_FILES = ("nvidia-deviceclasses.yaml", "example-driver-claim.yaml")
PASTED_OBJECTS = [("deviceclass", "gpu.nvidia.com"), ("deviceclass", "mig.nvidia.com"),
                  ("deviceclass", "gpu.example.com"), ("resourceclaim", "some-gpu"),
                  ("resourceclaimtemplate", "single-gpu")]  # fmt: skip


def _apply_pasted(cluster: DevCluster, tmp_path: Path, tool: str) -> list[str]:
    """Apply the pasted manifests with `tool` twice; the verdicts, or the error's words."""
    verdicts = []
    for _ in range(2):
        for name in PASTED_FILES:
            path = PASTED / name
            if tool == "kubectl":
                done = cluster.kubectl("apply", "-f", str(path), check=False)
                verdicts.append(done or "refused")
            else:
                run = run_kubedra(cluster, "apply", "-f", str(path))
                verdicts.append(run.stdout if run.returncode == 0 else "refused")
    return verdicts


def _delete_pasted(cluster: DevCluster) -> None:
    for kind, name in PASTED_OBJECTS:
        cluster.kubectl("delete", kind, name, "--wait=true", "--ignore-not-found", check=False)
    cluster.kubectl("patch", "resourceclaim", "some-gpu", "--type=json",
                    "-p", '[{"op":"remove","path":"/metadata/finalizers"}]', check=False)  # fmt: skip


def test_pasted_manifests_apply_as_kubectl_applies_them(cluster: DevCluster, tmp_path: Path) -> None:
    """What `kubectl get -o yaml` printed (resourceVersion, uid, times, status) is created on
    the first apply by both tools, with the same last-applied annotation; the second apply
    of the same text (its resourceVersion now stale) ends the same way with both."""
    theirs = _apply_pasted(cluster, tmp_path, "kubectl")
    annotations = {o: raw(cluster, *o)["metadata"]["annotations"][LAST_APPLIED] for o in PASTED_OBJECTS}
    _delete_pasted(cluster)
    ours = _apply_pasted(cluster, tmp_path, "kubedra")
    try:
        assert [v == "refused" for v in ours] == [v == "refused" for v in theirs], (ours, theirs)
        assert ours[0].split() == theirs[0].split()  # first apply: every object created
        assert all(line.endswith(" created") for line in ours[0].splitlines() + ours[1].splitlines())
        for obj, text in annotations.items():
            assert raw(cluster, *obj)["metadata"]["annotations"][LAST_APPLIED] == text, obj
    finally:
        _delete_pasted(cluster)
