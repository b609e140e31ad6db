"""Gangs on upstream's control plane (v1.37, the workload gates on, so the API serves
PodGroups and kube-controller-manager makes PodGroup claims): `kubedra scheduler run`
places a gang that fits entirely, nothing of a gang too big, a gang with a topology key in
the best-fit domain, a gang with a topology key in the one domain that takes all of it
while kube-controller-manager is still making its members' claims (without a failed
attempt), and a gang whose PodGroup claim kube-controller-manager made from a template with
one claim for the group, reserved for the PodGroup. kube-scheduler runs too:
these pods name kubedra, so they are kubedra's alone. The nodes are kubelet-less (their
slices published by the simulated driver)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.gates import WORKLOAD_FEATURE_GATES
from kubedra.api.resource import ResourceClaim
from kubedra.api.scheduling import PodGroup
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.binaries import Binaries
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import create_all, gpu_nodes, gpu_template
from kubedra.scheduler.claims import POD_CLAIM_NAME_ANNOTATION
from kubedra.scheduler.verify import check_allocations
from tests.e2e.scheduler_process import KubedraScheduler, gpu_store, wait_for

RACK = "example.com/rack"
POOL = "example.com/pool"


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, control_plane: Binaries
) -> Iterator[DevCluster]:
    folder = tmp_path_factory.mktemp("cluster")
    with DevCluster(folder, kube_scheduler=True, feature_gates=WORKLOAD_FEATURE_GATES) as running:
        yield running


@pytest.fixture(scope="module")
def gpus(cluster: DevCluster) -> Iterator[KubeStore]:
    """Pool `plain`: 2 nodes of 8 GPUs; pool `racks`: rack-a 2 nodes, rack-b 1; pool
    `late`: rack-c 1 node, rack-d 2 (racks of their own: a domain spans pools); pool
    `shared`: 1 node."""
    with gpu_store(cluster) as store:
        gpu_nodes(store, 2, prefix="plain", labels={POOL: "plain"})
        gpu_nodes(store, 2, prefix="ra", labels={POOL: "racks", RACK: "rack-a"})
        gpu_nodes(store, 1, prefix="rb", labels={POOL: "racks", RACK: "rack-b"})
        gpu_nodes(store, 1, prefix="lc", labels={POOL: "late", RACK: "rack-c"})
        gpu_nodes(store, 2, prefix="ld", labels={POOL: "late", RACK: "rack-d"})
        gpu_nodes(store, 1, prefix="shared", labels={POOL: "shared"})
        for name, count in (("two", 2), ("four", 4), ("nine", 9)):
            store.create(gpu_template(name, count))
        yield store


@pytest.fixture(scope="module")
def kubedra(cluster: DevCluster, gpus: KubeStore, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubedraScheduler]:
    with KubedraScheduler(cluster, tmp_path_factory.mktemp("run") / "kubedra.log") as sched:
        sched.wait_ready()
        yield sched


def pod_group(name: str, min_count: int, key: str = "",
              claims: list[dict[str, str]] | None = None) -> PodGroup:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    if claims:
        spec["resourceClaims"] = claims
    obj = decode_object({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}).obj
    assert isinstance(obj, PodGroup)
    return obj


def member(name: str, group: str, template: str, pool: str) -> Pod:
    obj = decode_object({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "kubedra",
            "schedulingGroup": {"podGroupName": group},
            "nodeSelector": {POOL: pool},
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": "gpus"}]}}]}}).obj
    assert isinstance(obj, Pod)
    return obj


def nodes_of(store: KubeStore, names: list[str]) -> dict[str, str]:
    return {n: store.get(Pod, n).spec.node_name or "" for n in names}


def condition(store: KubeStore, group: str) -> tuple[str, str, str]:
    pg = store.get(PodGroup, group)
    for c in pg.status.conditions if pg.status else ():
        if c.type == "PodGroupInitiallyScheduled":
            return c.status, c.reason or "", c.message or ""
    return "", "", ""


def test_a_gang_that_fits_is_placed_entirely(gpus: KubeStore, kubedra: KubedraScheduler) -> None:
    gpus.create(pod_group("fits", 4))
    names = [f"fits-{i}" for i in range(4)]
    create_all(gpus, [member(n, "fits", "two", "plain") for n in names])
    wait_for("the gang bound", lambda: all(nodes_of(gpus, names).values()), timeout=120)
    assert set(nodes_of(gpus, names).values()) <= {"plain-0000", "plain-0001"}
    wait_for("its condition", lambda: condition(gpus, "fits")[0] == "True", timeout=30)
    assert condition(gpus, "fits")[:2] == ("True", "Scheduled")
    assert check_allocations(gpus) == []


def test_a_gang_too_big_binds_nothing_and_allocates_nothing(
    gpus: KubeStore, kubedra: KubedraScheduler
) -> None:
    gpus.create(pod_group("toobig", 3))  # 3 pods of 9 GPUs: no node has 9
    names = [f"toobig-{i}" for i in range(3)]
    create_all(gpus, [member(n, "toobig", "nine", "plain") for n in names])
    wait_for("its refusal", lambda: condition(gpus, "toobig")[0] == "False", timeout=120)
    _, reason, message = condition(gpus, "toobig")
    assert reason == "Unschedulable" and "cannot be placed" in message, message
    assert not any(nodes_of(gpus, names).values())
    mine = [c for c in gpus.list(ResourceClaim, "default") if c.name.startswith("toobig-")]
    assert all(c.status is None or c.status.allocation is None for c in mine)


def test_a_gang_with_a_topology_key_goes_to_the_best_fit_domain(
    gpus: KubeStore, kubedra: KubedraScheduler
) -> None:
    gpus.create(pod_group("racked", 4, key=RACK))  # 8 GPUs: rack-b (8) is the best fit
    names = [f"racked-{i}" for i in range(4)]
    create_all(gpus, [member(n, "racked", "two", "racks") for n in names])
    wait_for("the gang bound", lambda: all(nodes_of(gpus, names).values()), timeout=120)
    assert set(nodes_of(gpus, names).values()) == {"rb-0000"}
    assert check_allocations(gpus) == []


def test_a_topology_gang_goes_whole_to_the_domain_that_takes_it_as_its_claims_are_made(
    cluster: DevCluster, gpus: KubeStore, kubedra: KubedraScheduler
) -> None:
    """3 pods of 4 GPUs made at once: kube-controller-manager makes each member's claim a
    moment later. Only rack-d (16 GPUs) takes the gang; rack-c (8) is the best fit for one
    member alone. The gang is tried once every member's claim exists, so no member is
    placed in rack-c first and no attempt fails (before: a member failed in rack-c, the
    gang was rejected and placed after the 1 s backoff, with FailedScheduling events)."""
    gpus.create(pod_group("late", 3, key=RACK))
    names = [f"late-{i}" for i in range(3)]
    create_all(gpus, [member(n, "late", "four", "late") for n in names])
    wait_for("the gang bound", lambda: all(nodes_of(gpus, names).values()), timeout=120)
    assert set(nodes_of(gpus, names).values()) <= {"ld-0000", "ld-0001"}
    failed = [(e["involvedObject"]["name"], e.get("note") or e.get("message"))
              for n in names for e in events_of(cluster, n) if e["reason"] == "FailedScheduling"]
    assert failed == []
    wait_for("its condition", lambda: condition(gpus, "late")[0] == "True", timeout=30)
    assert check_allocations(gpus) == []


def events_of(cluster: DevCluster, pod: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "events", "--field-selector", f"involvedObject.name={pod}",
                          "-o", "json")
    return json.loads(out)["items"]  # type: ignore[no-any-return]


def test_a_podgroup_claim_made_by_the_controller_is_used_once_for_the_group(
    gpus: KubeStore, kubedra: KubedraScheduler
) -> None:
    entry = [{"name": "gpus", "resourceClaimTemplateName": "two"}]
    gpus.create(pod_group("shared", 3, claims=entry))
    names = [f"shared-{i}" for i in range(3)]
    create_all(gpus, [member(n, "shared", "two", "shared") for n in names])
    wait_for("the gang bound", lambda: all(nodes_of(gpus, names).values()), timeout=120)
    pg = gpus.get(PodGroup, "shared")
    owned = [c for c in gpus.list(ResourceClaim, "default")
             if any(o.kind == "PodGroup" and o.name == "shared"
                    for o in c.metadata.owner_references)]
    (claim,) = owned  # one claim for the group, made by kube-controller-manager
    assert claim.metadata.generate_name == "shared-gpus-"
    assert claim.metadata.annotations[POD_CLAIM_NAME_ANNOTATION] == "gpus"
    assert pg.status is not None
    assert [(s.name, s.resource_claim_name) for s in pg.status.resource_claim_statuses] == [
        ("gpus", claim.name)]
    assert claim.status is not None and claim.status.allocation is not None
    assert len(claim.status.allocation.devices.results) == 2  # allocated once
    (ref,) = claim.status.reserved_for
    assert (ref.api_group, ref.resource, ref.name, ref.uid) == (
        "scheduling.k8s.io", "podgroups", "shared", pg.metadata.uid)
    # no pod of the group got a claim of its own
    assert not [c for c in gpus.list(ResourceClaim, "default")
                if any(o.kind == "Pod" and o.name in names for o in c.metadata.owner_references)]
    assert set(nodes_of(gpus, names).values()) == {"shared-0000"}
    assert check_allocations(gpus) == []
    assert kubedra.process.poll() is None, kubedra.tail()
