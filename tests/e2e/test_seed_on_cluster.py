"""The seed scenario end to end on upstream's control plane.

kubedra's driver code publishes the slices (`kubedra cluster create` through KubeStore), the
seed DeviceClass and claim go in with the real kubectl (in upstream's form: `kubedra
convert`), upstream's kube-scheduler places the pod, and kubedra reads the result; then a
claim that cannot fit, which kube-scheduler leaves pending and `kubedra explain` explains.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kubedra.api.core import Node, Pod
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from tests.conftest import REPO
from tests.e2e.conftest import run_kubedra

SEED = REPO / "examples" / "seed"

TOO_BIG = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: nine-gpus, namespace: default}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: high-memory-gpu, count: 9}
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: default}
spec:
  resourceClaims: [{name: gpus, resourceClaimName: nine-gpus}]
  containers:
  - name: main
    image: vllm/vllm-openai:latest
    resources: {claims: [{name: gpus}]}
"""


@pytest.fixture(scope="module")
def seeded(cluster: DevCluster) -> DevCluster:
    """Nodes and slices from `kubedra cluster create`, then the seed through kubectl."""
    created = run_kubedra(cluster, "cluster", "create", "--node-profile", "h100x8=1",
                          "--node-profile", "l4x4=1")
    assert created.returncode == 0, created.stderr
    assert "2 node(s) created: h100x8-0, l4x4-0" in created.stdout
    converted = run_kubedra(cluster, "convert", "-f", str(SEED))
    assert converted.returncode == 0, converted.stderr
    cluster.kubectl("apply", "-f", "-", input=converted.stdout)
    return cluster


def wait_for(what: str, check: object, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_cluster_create_publishes_slices_owned_by_ready_nodes(seeded: DevCluster) -> None:
    nodes = json.loads(seeded.kubectl("get", "nodes", "-o", "json"))["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    for name in ("h100x8-0", "l4x4-0"):
        ready = [c for c in by_name[name]["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        assert int(by_name[name]["status"]["allocatable"]["pods"]) > 0
    slices = json.loads(seeded.kubectl("get", "resourceslices", "-o", "json"))["items"]
    gpu = [s for s in slices if s["spec"]["nodeName"] == "h100x8-0"
           and s["spec"]["driver"] == "gpu.nvidia.com"]
    assert len(gpu) == 1 and len(gpu[0]["spec"]["devices"]) == 8
    (owner,) = gpu[0]["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Node", "h100x8-0", by_name["h100x8-0"]["metadata"]["uid"]
    )
    assert gpu[0]["spec"]["pool"]["resourceSliceCount"] == 1


def test_kube_scheduler_places_the_seed_pod_and_kubedra_reads_it(
    seeded: DevCluster, kube: KubeStore
) -> None:
    wait_for("kube-scheduler to bind the seed pod",
             lambda: kube.get(Pod, "vllm-inference").spec.node_name)
    pod = kube.get(Pod, "vllm-inference")
    assert pod.spec.node_name == "h100x8-0"  # the only node with GPUs over 40Gi
    claim = kube.get(ResourceClaim, "vllm-gpu-claim")
    assert claim.status is not None and claim.status.allocation is not None
    (result,) = claim.status.allocation.devices.results
    assert (result.driver, result.pool) == ("gpu.nvidia.com", "h100x8-0")
    assert [r.uid for r in claim.status.reserved_for] == [pod.metadata.uid]
    assert "resource.kubernetes.io/delete-protection" in claim.metadata.finalizers

    table = run_kubedra(seeded, "get", "rc", "-o", "wide")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("vllm-gpu-claim"))
    assert "allocated,reserved" in row and f"h100x8-0/{result.device}" in row

    explained = run_kubedra(seeded, "explain", "pod", "vllm-inference")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith("pod default/vllm-inference: bound to h100x8-0")
    assert f"  vllm-gpu-claim/gpu: gpu.nvidia.com/h100x8-0/{result.device} (" in explained.stdout

    held = run_kubedra(seeded, "devices", "--node", "h100x8-0", "-o", "json")
    holders = {d["device"]: d["heldBy"] for d in json.loads(held.stdout)}
    assert holders[result.device] == ["default/vllm-gpu-claim"]
    assert [h for d, h in holders.items() if d != result.device] == [None] * (len(holders) - 1)


def test_a_claim_that_cannot_fit_stays_pending_and_kubedra_says_why(
    seeded: DevCluster, kube: KubeStore
) -> None:
    seeded.kubectl("apply", "-f", "-", input=TOO_BIG)

    def refused() -> bool:
        events = json.loads(seeded.kubectl(
            "get", "events", "--field-selector", "involvedObject.name=too-big", "-o", "json"))
        return any(e["reason"] == "FailedScheduling" for e in events["items"])

    wait_for("kube-scheduler to refuse the 9-GPU pod", refused)
    assert not kube.get(Pod, "too-big").spec.node_name
    claim = kube.get(ResourceClaim, "nine-gpus")
    assert claim.status is None or claim.status.allocation is None

    explained = run_kubedra(seeded, "explain", "pod", "too-big")
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0] == "pod default/too-big: pending"
    h100 = next(i for i, line in enumerate(lines) if "[h100x8-0]" in line)
    # Eight GPUs match the class, one holds the seed claim: 7 free, 9 wanted.
    assert "cannot allocate" in lines[h100]
    assert lines[h100 + 1].strip() == (
        "blocked: default/nine-gpus gpus: class high-memory-gpu admits 8 of the node's 12 "
        "device(s), 9 needed"
    )
    assert lines[h100 + 2].strip() == (
        "gpus (need 9): 12 in pools -> 8 class selectors -> 8 request selectors "
        "-> 8 untainted -> 7 free -> 7 fit"
    )
    l4 = next(line for line in lines if "[l4x4-0]" in line)
    assert "cannot allocate" in l4


def test_kubedra_and_kubectl_agree_on_the_inventory(seeded: DevCluster, kube: KubeStore) -> None:
    slices = kube.list(ResourceSlice)
    listed = json.loads(seeded.kubectl("get", "resourceslices", "-o", "json"))["items"]
    assert sorted(s.name for s in slices) == sorted(s["metadata"]["name"] for s in listed)
    assert {n.name for n in kube.list(Node)} >= {"h100x8-0", "l4x4-0"}


WHAT_IF = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: what-if, namespace: default}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: high-memory-gpu, count: %d}
"""


def test_allocate_and_lint_against_the_live_cluster(
    seeded: DevCluster, kube: KubeStore, tmp_path: Path
) -> None:
    """What-if on live state: the seed's claim holds one GPU, so 7 fit and 8 do not; no
    claim is created. lint --cluster sees the NICs the unguarded selector fails on."""
    wait_for("the seed pod to be bound", lambda: kube.get(Pod, "vllm-inference").spec.node_name)
    claims_before = {c.name for c in kube.list(ResourceClaim)}
    for count, fits in ((7, True), (8, False)):
        path = tmp_path / f"what-if-{count}.yaml"
        path.write_text(WHAT_IF % count)
        done = run_kubedra(seeded, "allocate", "-f", str(path), "--cluster", "-o", "json")
        assert done.returncode == (0 if fits else 1), done.stderr
        report = json.loads(done.stdout)
        assert report["node"] == ("h100x8-0" if fits else None)
        if not fits:
            h100 = next(g for g in report["nodeGroups"] if g["nodes"] == ["h100x8-0"])
            assert h100["requests"][0]["funnel"]["free"] == 7
    assert {c.name for c in kube.list(ResourceClaim)} == claims_before
    unguarded = tmp_path / "class.yaml"
    unguarded.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: big}\nspec:\n"
        "  selectors:\n  - cel: {expression: 'device.capacity[\"gpu.nvidia.com\"].memory"
        ".isGreaterThan(quantity(\"40Gi\"))'}\n"
    )
    linted = run_kubedra(seeded, "lint", "--cluster", str(unguarded))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "a selector fails at run time on 4 of 16 devices in the cluster" in linted.stdout
