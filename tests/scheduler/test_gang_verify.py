"""Claims reserved for a PodGroup (KEP-5729) in the allocation checker and in the
other-schedulers bookkeeping: one `reservedFor` entry for the whole group stands for its
pods."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kubedra.allocator import DeviceRef
from kubedra.api.core import Pod
from kubedra.api.resource import (
    AllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
)
from kubedra.api.scheduling import PodGroup
from kubedra.cluster import SqliteStore
from kubedra.scheduler.queue import pod_key
from kubedra.scheduler.scheduler import Scheduler
from kubedra.scheduler.sharing import OtherSchedulers
from kubedra.scheduler.verify import check_allocations
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store, user_claim
from tests.scheduler.test_gang_claims import SHARED, group_claims, member, pod_group
from tests.scheduler.test_verify import results


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    gpu_node(store, "n2", gpus=4)
    return store


def on(node: str) -> AllocationResult:
    selector = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return msgspec.convert(
        {**msgspec.to_builtins(results(f"{node}/gpu-0")), "nodeSelector": selector},
        AllocationResult)


def reserve_for_group(store: SqliteStore, claim: str, group: str, node: str) -> None:
    pg = store.get(PodGroup, group)
    ref = ResourceClaimConsumerReference(
        api_group="scheduling.k8s.io", resource="podgroups", name=group,
        uid=pg.metadata.uid or "")
    current = store.get(ResourceClaim, claim)
    store.update_status(msgspec.structs.replace(
        current, status=ResourceClaimStatus(allocation=on(node), reserved_for=(ref,))))


def group_pod(store: SqliteStore, name: str, group: str, claim: str, **extra: object) -> None:
    gpu_pod(store, name, claim=claim, schedulingGroup={"podGroupName": group}, **extra)


def test_what_the_scheduler_writes_for_a_group_claim_is_valid(store: SqliteStore) -> None:
    gpu_template(store, "two", 2)
    pod_group(store, "g", 3, SHARED)
    for i in range(3):
        member(store, f"w{i}", "g", "two")
    Scheduler(store).run_once()
    (claim,) = group_claims(store, "g")
    assert claim.status is not None and [r.resource for r in claim.status.reserved_for] == [
        "podgroups"]
    assert check_allocations(store) == []


def test_a_group_reservation_stands_for_its_bound_pods(store: SqliteStore) -> None:
    user_claim(store, "c")
    pod_group(store, "g", 2, [{"name": "gpus", "resourceClaimName": "c"}])
    for i in range(2):
        group_pod(store, f"w{i}", "g", "c")
    reserve_for_group(store, "c", "g", "n1")
    for i in range(2):
        store.bind(store.get(Pod, f"w{i}"), "n1")
    assert check_allocations(store) == []


def test_a_group_pod_bound_where_the_allocation_is_not_available(store: SqliteStore) -> None:
    user_claim(store, "c")
    pod_group(store, "g", 2, [{"name": "gpus", "resourceClaimName": "c"}])
    for i in range(2):
        group_pod(store, f"w{i}", "g", "c")
    reserve_for_group(store, "c", "g", "n1")
    store.bind(store.get(Pod, "w0"), "n1")
    store.bind(store.get(Pod, "w1"), "n2")
    assert check_allocations(store) == [
        "pod default/w1 on n2: claim c's allocation does not admit the node"]


def test_a_reservation_for_a_pod_group_that_is_gone(store: SqliteStore) -> None:
    user_claim(store, "c")
    pod_group(store, "g", 1, [{"name": "gpus", "resourceClaimName": "c"}])
    reserve_for_group(store, "c", "g", "n1")
    store.delete(PodGroup, "g")
    assert check_allocations(store) == ["claim default/c: reserved for pod group g, which is gone"]


def test_a_reservation_for_another_group_does_not_stand_for_the_pod(store: SqliteStore) -> None:
    user_claim(store, "c")
    pod_group(store, "g", 1, [{"name": "gpus", "resourceClaimName": "c"}])
    pod_group(store, "h", 1)
    reserve_for_group(store, "c", "g", "n1")
    group_pod(store, "p", "h", "c")
    store.bind(store.get(Pod, "p"), "n1")
    assert "pod default/p on n1: claim c is not reserved for it" in check_allocations(store)


def test_devices_reserved_for_another_schedulers_group_mark_its_node(store: SqliteStore) -> None:
    """Their gang's claim, reserved for their PodGroup, holds devices on n1 while their pods
    are still pending: n1 is theirs. A group of this scheduler's pods is not."""
    user_claim(store, "theirs")
    user_claim(store, "ours")
    pod_group(store, "g", 1, [{"name": "gpus", "resourceClaimName": "theirs"}])
    pod_group(store, "k", 1, [{"name": "gpus", "resourceClaimName": "ours"}])
    group_pod(store, "t0", "g", "theirs", schedulerName="default-scheduler")
    group_pod(store, "k0", "k", "ours", schedulerName="kubedra")
    reserve_for_group(store, "theirs", "g", "n1")
    reserve_for_group(store, "ours", "k", "n2")
    others = OtherSchedulers(names=("kubedra",), clock=lambda: 0.0, refuse=True)
    pods = {pod_key(p): p for p in store.list(Pod)}

    def node_of(ref: DeviceRef) -> str | None:
        return ref.pool

    found = others.nodes(pods, store.list(ResourceClaim), node_of, lambda pod: ())
    assert found == {"n1": "default-scheduler"}
