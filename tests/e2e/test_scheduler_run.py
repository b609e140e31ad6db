"""`kubedra scheduler run` on upstream's control plane, next to kube-scheduler.

Its pods get the claims kube-controller-manager generates (never a second one), the writes
upstream's DynamicResources plugin makes (finalizer, allocation + reservedFor, binding),
kube-scheduler's events and condition (with kubedra's explanation when nothing fits), and
its metrics and health answer; kube-scheduler's pods are left to kube-scheduler, and a node
where kube-scheduler allocated devices is left to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import GPU_CLASS, claim_pod, create_all, gpu_nodes, gpu_template
from kubedra.scheduler.binding import FINALIZER
from kubedra.scheduler.claims import POD_CLAIM_NAME_ANNOTATION
from kubedra.scheduler.verify import check_allocations
from tests.e2e.scheduler_process import KubedraScheduler, gpu_store, lease_holder, wait_for


@pytest.fixture(scope="module")
def gpus(cluster: DevCluster) -> Iterator[KubeStore]:
    with gpu_store(cluster) as store:
        gpu_nodes(store, 2, prefix="gpu")
        store.create(gpu_template("one", 1))
        store.create(gpu_template("nine", 9))
        yield store


@pytest.fixture(scope="module")
def kubedra(cluster: DevCluster, gpus: KubeStore, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubedraScheduler]:
    with KubedraScheduler(cluster, tmp_path_factory.mktemp("run") / "kubedra.log") as sched:
        sched.wait_ready()
        yield sched


def events_of(cluster: DevCluster, pod: str) -> list[dict[str, str]]:
    out = cluster.kubectl("get", "events", "--field-selector", f"involvedObject.name={pod}",
                          "-o", "json")
    return json.loads(out)["items"]  # type: ignore[no-any-return]


def test_its_pods_are_placed_with_the_claims_the_controller_generated(
    cluster: DevCluster, gpus: KubeStore, kubedra: KubedraScheduler
) -> None:
    create_all(gpus, [claim_pod(f"k{i}", "one", "kubedra") for i in range(6)])
    wait_for("6 pods bound", lambda: all(gpus.get(Pod, f"k{i}").spec.node_name for i in range(6)))
    owned = [c for c in gpus.list(ResourceClaim, "default")
             if c.metadata.owner_references and c.metadata.owner_references[0].name[0] == "k"]
    claims = {c.metadata.owner_references[0].name: c for c in owned}
    assert len(owned) == 6 and sorted(claims) == [f"k{i}" for i in range(6)]  # one each
    assert all(c.metadata.annotations[POD_CLAIM_NAME_ANNOTATION] == "gpus" for c in owned)
    devices = set()
    for i in range(6):
        pod = gpus.get(Pod, f"k{i}")
        claim = claims[f"k{i}"]
        assert claim.metadata.owner_references[0].uid == pod.metadata.uid
        assert FINALIZER in claim.metadata.finalizers
        assert claim.status is not None and claim.status.allocation is not None
        assert [r.uid for r in claim.status.reserved_for] == [pod.metadata.uid]
        (result,) = claim.status.allocation.devices.results
        assert result.pool == pod.spec.node_name
        devices.add((result.pool, result.device))
        (event,) = [e for e in events_of(cluster, f"k{i}") if e["reason"] == "Scheduled"]
        assert event["reportingComponent"] == "kubedra"
        assert event["message"] == f"Successfully assigned default/k{i} to {pod.spec.node_name}"
    assert len(devices) == 6
    assert kubedra.metric("kubedra_scheduler_schedule_attempts_total", profile="kubedra",
                          result="scheduled") >= 6
    assert check_allocations(gpus) == []


def test_a_pod_that_fits_nowhere_says_why_on_its_condition_and_event(
    cluster: DevCluster, gpus: KubeStore, kubedra: KubedraScheduler
) -> None:
    gpus.create(claim_pod("too-big", "nine", "kubedra"))

    def failed() -> list[dict[str, str]]:
        return [e for e in events_of(cluster, "too-big") if e["reason"] == "FailedScheduling"]

    wait_for("FailedScheduling", failed)
    (event,) = failed()
    assert event["reportingComponent"] == "kubedra" and event["type"] == "Warning"
    # kube-scheduler's form, with kubedra's blocker in brackets (upstream: the summary alone).
    summary = (f"0/2 nodes are available: 2 cannot allocate all claims (gpus: 8 devices of class "
               f"{GPU_CLASS}, 9 needed).")
    assert event["message"].startswith(f"{summary} kubedra: on node gpu-000")
    assert "gpus (need 9): 12 in pools -> 8 class selectors" in event["message"]
    pod = gpus.get(Pod, "too-big")
    (condition,) = [c for c in pod.status.conditions if c.type == "PodScheduled"]  # type: ignore[union-attr]
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert condition.message == summary
    described = cluster.kubectl("describe", "pod", "too-big")
    assert "FailedScheduling" in described and "kubedra: on node" in described


def test_kube_schedulers_pods_are_its_own_and_their_node_is_left_to_it(
    cluster: DevCluster, gpus: KubeStore, kubedra: KubedraScheduler
) -> None:
    gpus.create(claim_pod("theirs", "one", "default-scheduler"))
    wait_for("kube-scheduler's binding", lambda: gpus.get(Pod, "theirs").spec.node_name)
    theirs = gpus.get(Pod, "theirs").spec.node_name
    (event,) = [e for e in events_of(cluster, "theirs") if e["reason"] == "Scheduled"]
    assert event["reportingComponent"] == "default-scheduler"
    create_all(gpus, [claim_pod(f"after{i}", "one", "kubedra") for i in range(2)])
    wait_for("2 pods bound", lambda: all(gpus.get(Pod, f"after{i}").spec.node_name for i in range(2)))
    assert {gpus.get(Pod, f"after{i}").spec.node_name for i in range(2)} == {"gpu-0000", "gpu-0001"} - {theirs}
    assert f"node {theirs}: default-scheduler allocates devices here too; kubedra leaves" in (
        kubedra.log.read_text())
    assert kubedra.metric("kubedra_scheduler_shared_nodes") == 1
    assert check_allocations(gpus) == []


def test_health_metrics_and_the_lease(cluster: DevCluster, gpus: KubeStore,
                                      kubedra: KubedraScheduler) -> None:
    assert kubedra.get("/healthz")[0] == 200 and kubedra.get("/readyz")[0] == 200
    assert kubedra.metric("kubedra_scheduler_leader") == 1
    assert lease_holder(gpus) == kubedra.identity
    assert kubedra.metric("kubedra_scheduler_pending_pods", queue="backoff") == 1  # too-big
    assert "kubedra_scheduler_api_errors_total" in kubedra.get("/metrics")[1]
    assert kubedra.stop() == 0
    assert lease_holder(gpus) == ""  # released on a clean stop: a standby takes over at once


def test_schedule_once_on_a_cluster_leaves_claims_to_the_controller(
    cluster: DevCluster, gpus: KubeStore, tmp_path: Path
) -> None:
    from tests.e2e.conftest import run_kubedra

    # The node kubedra shares with kube-scheduler's pod is refused, and the other one may be
    # full (first-fit filled it with k0-k5, after0 and after1): make room there first.
    cluster.kubectl("delete", "pod", "after0", "after1", "--grace-period=0", "--force")
    wait_for("their claims gone", lambda: not [
        c for c in gpus.list(ResourceClaim, "default")
        if c.metadata.owner_references and c.metadata.owner_references[0].name.startswith("after")])
    gpus.create(claim_pod("once", "one", "kubedra"))
    wait_for("the generated claim", lambda: gpus.get(Pod, "once").status
             and gpus.get(Pod, "once").status.resource_claim_statuses)  # type: ignore[union-attr]
    done = run_kubedra(cluster, "schedule")
    assert done.returncode == 0, done.stderr
    assert "pod/once -> gpu-000" in done.stdout and "pod/too-big unschedulable" in done.stdout
    assert "theirs" not in done.stdout  # kube-scheduler's pods are not kubedra's
    assert len([c for c in gpus.list(ResourceClaim, "default") if c.name.startswith("once-")]) == 1
