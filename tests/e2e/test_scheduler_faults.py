"""Faults under `kubedra scheduler run` on upstream's control plane.

- kill -9 the leader in the middle of a burst of 500 pods: the standby takes over within
  the lease duration and finishes; every pod is bound once, and once things settle no
  claim holds devices for a pod that is not bound to a node its allocation admits;
- the API server restarted (after etcd's history was compacted) mid-run: the scheduler
  reconnects, lists again where its watch expired, carries on, allocates nothing twice;
- a claim deleted, a slice withdrawn, a device tainted NoExecute, with pods pending and
  bound: what upstream does (pending pods wait or go elsewhere; bound pods keep their
  devices: evicting them is the device-taint eviction controller's part, not the
  scheduler's, and that controller does not run in the dev cluster).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import (
    claim_pod,
    create_all,
    gpu_nodes,
    gpu_template,
)
from kubedra.errors import NotFound
from kubedra.scheduler.verify import check_allocations
from tests.e2e.scheduler_process import (
    FAST_LEASE,
    KubedraScheduler,
    gpu_store,
    lease_holder,
    wait_for,
)

BURST = int(os.environ.get("KUBEDRA_E2E_BURST", "500"))


@pytest.fixture(scope="module")
def kube(cluster: DevCluster) -> Iterator[KubeStore]:
    with gpu_store(cluster) as store:
        yield store


def namespace(kube: KubeStore, name: str) -> str:
    kube.create(decode_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": name}}).obj)
    kube.create(gpu_template("one", 1, namespace=name))
    return name


def bound_pods(kube: KubeStore, ns: str) -> list[Pod]:
    return [p for p in kube.list(Pod, ns) if p.spec.node_name]


def test_the_standby_finishes_a_burst_when_the_leader_is_killed(
    cluster: DevCluster, kube: KubeStore, tmp_path: Path
) -> None:
    ns = namespace(kube, "burst")
    gpu_nodes(kube, (BURST + 7) // 8, prefix="burst")
    replicas = [KubedraScheduler(cluster, tmp_path / f"replica-{i}.log", *FAST_LEASE)
                for i in range(2)]
    try:
        for r in replicas:
            r.wait_ready()
        wait_for("a leader", lambda: lease_holder(kube) in {r.identity for r in replicas})
        create_all(kube, [claim_pod(f"p{i:03d}", "one", "kubedra", namespace=ns)
                          for i in range(BURST)])
        wait_for("the burst under way", lambda: len(bound_pods(kube, ns)) >= BURST // 5, 300)
        leader = next(r for r in replicas if r.identity == lease_holder(kube))
        standby = next(r for r in replicas if r is not leader)
        leader.kill()
        at_kill = len(bound_pods(kube, ns))
        wait_for("the standby to lead", lambda: lease_holder(kube) == standby.identity, 30)
        wait_for(f"all {BURST} pods bound", lambda: len(bound_pods(kube, ns)) == BURST, 600)
        assert at_kill < BURST, "the burst ended before the kill: nothing was shown"
    finally:
        for r in replicas:
            r.stop()
    assert leader.process.returncode == -9
    claims = kube.list(ResourceClaim, ns)
    assert len(claims) == BURST  # one claim each: the standby generated none, allocated once
    for claim in claims:
        assert claim.status is not None and len(claim.status.reserved_for) == 1
    assert check_allocations(kube) == []


def test_an_api_server_restart_mid_run(cluster: DevCluster, kube: KubeStore,
                                      tmp_path: Path) -> None:
    ns = namespace(kube, "restart")
    gpu_nodes(kube, 25, prefix="restart")
    # One replica without election: with it, an outage longer than the renew deadline ends
    # the leader (as kube-scheduler); its supervisor would start it again.
    with KubedraScheduler(cluster, tmp_path / "kubedra.log", "--no-leader-elect") as sched:
        sched.wait_ready()
        create_all(kube, [claim_pod(f"r{i:03d}", "one", "kubedra", namespace=ns)
                          for i in range(200)])
        wait_for("the run under way", lambda: len(bound_pods(kube, ns)) >= 40, 300)
        cluster.compact_etcd()  # the watches' resume points are gone: they must list again
        cluster.restart_apiserver()
        wait_for("all 200 pods bound", lambda: len(bound_pods(kube, ns)) == 200, 600)
        assert sched.process.poll() is None, sched.tail()
        assert sched.get("/healthz")[0] == 200
        relists = sched.metric("kubedra_scheduler_relists")
    assert check_allocations(kube) == []
    assert relists >= 1  # the compacted history was listed again, not waited for


@pytest.fixture(scope="module")
def edge(cluster: DevCluster, kube: KubeStore, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[KubedraScheduler]:
    namespace(kube, "edge")
    gpu_nodes(kube, 2, prefix="edge")
    with KubedraScheduler(cluster, tmp_path_factory.mktemp("edge") / "kubedra.log",
                          "--no-leader-elect", "--node-selector",
                          "kubernetes.io/hostname in (edge-0000,edge-0001)") as sched:
        sched.wait_ready()
        yield sched


def user_claim(kube: KubeStore, name: str, count: int = 1) -> None:
    kube.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "edge"},
        "spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}},
    }).obj)


def user_pod(kube: KubeStore, name: str, claim: str, node: str | None = None) -> None:
    spec = {"schedulerName": "kubedra",
            "resourceClaims": [{"name": "gpus", "resourceClaimName": claim}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    kube.create(decode_object({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": name, "namespace": "edge"}, "spec": spec}).obj)


def condition(kube: KubeStore, pod: str) -> str:
    status = kube.get(Pod, pod, "edge").status
    found = [c for c in status.conditions if c.type == "PodScheduled"] if status else []
    return (found[0].message or "") if found else ""


def test_a_pending_pods_claim_deleted_and_made_again(kube: KubeStore, edge: KubedraScheduler) -> None:
    user_claim(kube, "c9", count=9)
    user_pod(kube, "waits", "c9")
    wait_for("unschedulable", lambda: "cannot allocate all claims" in condition(kube, "waits"))
    kube.delete(ResourceClaim, "c9", "edge")
    wait_for("waiting for the claim", lambda: condition(kube, "waits")
             == 'waiting for resource claim "c9" to be created')
    user_claim(kube, "c9", count=1)  # made again, now satisfiable: the pod is woken by it
    wait_for("bound", lambda: kube.get(Pod, "waits", "edge").spec.node_name)


def test_a_bound_pods_claim_deleted_is_kept_until_the_pod_goes(kube: KubeStore,
                                                               edge: KubedraScheduler) -> None:
    user_claim(kube, "held", count=8)
    user_pod(kube, "holder", "held", node="edge-0001")
    wait_for("bound", lambda: kube.get(Pod, "holder", "edge").spec.node_name)
    kube.delete(ResourceClaim, "held", "edge")
    claim = kube.get(ResourceClaim, "held", "edge")  # the delete-protection finalizer holds it
    assert claim.metadata.deletion_timestamp and claim.status and claim.status.allocation
    user_claim(kube, "next", count=8)
    user_pod(kube, "next", "next", node="edge-0001")
    wait_for("next unschedulable", lambda: "cannot allocate" in condition(kube, "next"))
    kube.delete(Pod, "holder", "edge", grace_period_seconds=0)
    # the claim controller drops the reservation, frees the claim, lets it go; the freed
    # devices wake the pending pod
    wait_for("the claim gone", lambda: _gone(kube, "held"))
    wait_for("next bound", lambda: kube.get(Pod, "next", "edge").spec.node_name == "edge-0001")


def test_a_withdrawn_slice_and_a_tainted_device(kube: KubeStore, edge: KubedraScheduler) -> None:
    (gpu_slice,) = [s for s in kube.list(ResourceSlice, field_selector="spec.nodeName=edge-0000")
                    if s.spec.driver == "gpu.nvidia.com"]
    user_claim(kube, "before")
    user_pod(kube, "before", "before", node="edge-0000")
    wait_for("bound", lambda: kube.get(Pod, "before", "edge").spec.node_name)
    kube.delete(ResourceSlice, gpu_slice.name)
    user_claim(kube, "after")
    user_pod(kube, "after", "after", node="edge-0000")
    wait_for("no devices", lambda: "cannot allocate all claims" in condition(kube, "after"))
    held = kube.get(ResourceClaim, "before", "edge")
    assert held.status and held.status.allocation  # upstream frees nothing when slices go
    rule = decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-edge-0000"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "edge-0000"},
                 "taint": {"key": "example.com/broken", "effect": "NoExecute"}}}).obj
    kube.create(rule)
    kube.create(msgspec.structs.replace(gpu_slice, metadata=msgspec.structs.replace(
        gpu_slice.metadata, resource_version=None, uid=None)))  # published again, tainted
    wait_for("the slice back", lambda: len(kube.list(
        ResourceSlice, field_selector="spec.nodeName=edge-0000")) == 2)
    time.sleep(5)  # the slice's return woke the pod: its devices are all tainted now
    assert kube.get(Pod, "after", "edge").spec.node_name is None
    assert kube.get(Pod, "before", "edge").spec.node_name == "edge-0000"  # not evicted here
    kube.delete(DeviceTaintRule, "drain-edge-0000")
    wait_for("bound once untainted", lambda: kube.get(Pod, "after", "edge").spec.node_name)
    assert check_allocations(kube) == []


def _gone(kube: KubeStore, claim: str) -> bool:
    try:
        kube.get(ResourceClaim, claim, "edge")
    except NotFound:
        return True
    return False
