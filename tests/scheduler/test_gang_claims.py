"""PodGroup-level ResourceClaims (KEP-5729) and PodGroups in the scheduler's feed, on a real
SqliteStore with a real Scheduler: one claim for the whole group, made once from the
template, reserved for the PodGroup, allocated once, kept where its devices are, released
when the group ends; a PodGroup created after its pods wakes them at once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod, PodStatus
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaim
from kubedra.api.scheduling import PodGroup
from kubedra.cluster import SqliteStore
from kubedra.errors import NotFound
from kubedra.scheduler.feed import LogFeed, WatchFeed
from kubedra.scheduler.scheduler import FEED_KINDS, Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return new_store(tmp_path)


def pod_group(store: SqliteStore, name: str, min_count: int | None,
              claims: list[dict[str, str]] | None = None) -> None:
    spec: dict[str, Any] = {"schedulingPolicy": (
        {"gang": {"minCount": min_count}} if min_count else {"basic": {}})}
    if claims:
        spec["resourceClaims"] = claims
    store.create(decode_object({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}).obj)


def member(store: SqliteStore, name: str, group: str, template: str, cpu: str = "") -> None:
    """A pod of `group` whose entry "gpus" matches the group's (template `template`)."""
    resources: dict[str, Any] = {"claims": [{"name": "gpus"}]}
    if cpu:
        resources["requests"] = {"cpu": cpu}
    gpu_pod(store, name, template=template, schedulingGroup={"podGroupName": group},
            containers=[{"name": "main", "resources": resources}])


def plain_node(store: SqliteStore, name: str, cpu: str = "64") -> None:
    store.create(decode_object({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "512Gi"}}}).obj)


def bound(store: SqliteStore) -> dict[str, str]:
    return {p.name: p.spec.node_name for p in store.list(Pod) if p.spec.node_name}


def group_claims(store: SqliteStore, group: str) -> list[ResourceClaim]:
    return [c for c in store.list(ResourceClaim)
            if any(o.kind == "PodGroup" and o.name == group for o in c.metadata.owner_references)]


def end(store: SqliteStore, name: str) -> None:
    pod = store.get(Pod, name)
    store.update_status(msgspec.structs.replace(
        pod, status=msgspec.structs.replace(pod.status or PodStatus(), phase="Succeeded")))


SHARED = [{"name": "gpus", "resourceClaimTemplateName": "two"}]


def test_a_group_claim_is_made_once_shared_reserved_for_the_group_allocated_once(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 4, SHARED)
    for i in range(4):
        member(store, f"w{i}", "g", "two")
    gpu_pod(store, "solo", template="two")  # not in the group: a claim of its own
    allocations: list[str] = []
    update_status = store.update_status

    def counting(obj: KubeObject) -> KubeObject:
        if isinstance(obj, ResourceClaim) and obj.status and obj.status.allocation:
            before = store.get(ResourceClaim, obj.name)
            if before.status is None or before.status.allocation is None:
                allocations.append(obj.name)
        return update_status(obj)

    monkeypatch.setattr(store, "update_status", counting)
    Scheduler(store).run_once()
    assert bound(store) == {**{f"w{i}": "n1" for i in range(4)}, "solo": "n1"}
    (claim,) = group_claims(store, "g")
    pg = store.get(PodGroup, "g")
    # named and recorded as the resourceclaim controller does for a PodGroup
    assert claim.metadata.generate_name == "g-gpus-"
    assert pg.status is not None
    assert [(s.name, s.resource_claim_name) for s in pg.status.resource_claim_statuses] == [
        ("gpus", claim.name)]
    assert claim.status is not None and claim.status.allocation is not None
    (ref,) = claim.status.reserved_for  # one entry for the group, not one per pod
    assert (ref.api_group, ref.resource, ref.name, ref.uid) == (
        "scheduling.k8s.io", "podgroups", "g", pg.metadata.uid)
    # every member's status names the group's claim; no member has a claim of its own
    for i in range(4):
        pod = store.get(Pod, f"w{i}")
        assert pod.status is not None
        assert [s.resource_claim_name for s in pod.status.resource_claim_statuses] == [claim.name]
    claims = store.list(ResourceClaim)
    assert len(claims) == 2  # the group's and solo's
    assert sorted(allocations) == sorted(c.name for c in claims)  # each allocated once
    # the group's devices count once: 2 for the group + 2 for solo, all different
    held = [r.device for c in claims if c.status and c.status.allocation
            for r in c.status.allocation.devices.results]
    assert len(held) == len(set(held)) == 4


def test_a_gang_stays_on_the_node_of_its_group_claim(store: SqliteStore) -> None:
    plain_node(store, "a-cpu")  # first in name order, no devices
    gpu_node(store, "z-gpu", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 3, SHARED)
    for i in range(3):
        member(store, f"w{i}", "g", "two", cpu="1")
    Scheduler(store).run_once()
    assert bound(store) == {f"w{i}": "z-gpu" for i in range(3)}
    (claim,) = group_claims(store, "g")
    assert claim.status is not None and len(claim.status.reserved_for) == 1


def test_a_gang_that_cannot_follow_its_group_claim_is_refused_with_the_reason(
    store: SqliteStore,
) -> None:
    plain_node(store, "a-cpu")
    gpu_node(store, "z-gpu", gpus=8, cpu="1")  # the devices' node takes one member only
    gpu_template(store, "two", 2)
    pod_group(store, "g", 2, SHARED)
    for i in range(2):
        member(store, f"w{i}", "g", "two", cpu="1")
    outcomes = Scheduler(store, clock=Clock()).run_once()
    assert bound(store) == {}
    (claim,) = group_claims(store, "g")
    assert claim.status is None or claim.status.allocation is None  # nothing written
    messages = " ".join(o.message for o in outcomes)
    assert "allocation is not available on node a-cpu" in messages
    pg = store.get(PodGroup, "g")
    assert pg.status is not None
    (cond,) = [c for c in pg.status.conditions if c.type == "PodGroupInitiallyScheduled"]
    assert cond.status == "False" and "not available on node a-cpu" in (cond.message or "")


def test_the_group_claim_is_held_while_the_podgroup_exists_and_goes_with_it(
    store: SqliteStore,
) -> None:
    """As upstream's resourceclaim controller: a PodGroup's reservation stays while the
    PodGroup (that uid) exists, even once all its pods ended; it goes, the claim is
    deallocated and then deleted (owned by the PodGroup) when the PodGroup is deleted."""
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", None, SHARED)
    for i in range(4):
        member(store, f"w{i}", "g", "two")
    scheduler = Scheduler(store)
    scheduler.run_once()
    assert len(bound(store)) == 4
    for i in range(4):
        end(store, f"w{i}")
    scheduler.run_once()
    (claim,) = group_claims(store, "g")
    assert claim.status is not None and claim.status.allocation is not None
    assert [r.name for r in claim.status.reserved_for] == ["g"]
    store.delete(PodGroup, "g")
    scheduler.run_once()
    scheduler.run_once()
    assert group_claims(store, "g") == []  # gone with its PodGroup


def test_a_group_claim_is_made_as_upstreams_controller_makes_it(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 1, SHARED)
    member(store, "w0", "g", "two")
    Scheduler(store).run_once()
    (claim,) = group_claims(store, "g")
    assert claim.metadata.generate_name == "g-gpus-"
    assert claim.metadata.annotations["resource.kubernetes.io/pod-claim-name"] == "gpus"
    (owner,) = claim.metadata.owner_references
    pg = store.get(PodGroup, "g")
    assert (owner.api_version, owner.kind, owner.name, owner.uid, owner.controller) == (
        "scheduling.k8s.io/v1beta1", "PodGroup", "g", pg.metadata.uid, True)
    assert owner.block_owner_deletion is None


def test_generate_name_is_cut_in_proportion_as_upstream() -> None:
    from kubedra.scheduler.claims import claim_prefix

    assert claim_prefix("train", "gpus") == "train-gpus-"
    long = claim_prefix("p" * 60, "c" * 20)  # 82 characters: both cut, no hyphen
    assert long == "p" * 41 + "-" + "c" * 13 and len(long) <= 57


def test_a_pod_group_created_after_its_pods_wakes_them_at_once(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    for i in range(2):
        member(store, f"w{i}", "late", "two")
    clock = Clock()  # never advances: no backoff expires
    scheduler = Scheduler(store, clock=clock)
    outcomes = scheduler.run_once()
    assert {o.result for o in outcomes} == {"waiting"}
    assert scheduler.queue.parked == 2 and scheduler.queue.waiting == 2
    pod_group(store, "late", 2, SHARED)
    scheduler.refresh()
    assert scheduler.queue.parked == 0 and scheduler.queue.waiting == 0  # both active
    scheduler.run_once()
    assert bound(store) == {"w0": "n1", "w1": "n1"}
    assert len(group_claims(store, "late")) == 1


class NoPodGroups:
    """A store whose server does not serve scheduling.k8s.io/v1beta1."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def list(self, cls: type[KubeObject], *args: Any, **kwargs: Any) -> Any:
        if cls is PodGroup:
            raise NotFound("the server could not find the requested resource")
        return self.store.list(cls, *args, **kwargs)


def test_a_server_without_pod_groups_is_fed_without_them(store: SqliteStore) -> None:
    gpu_node(store, "n1")
    feed = LogFeed(NoPodGroups(store), FEED_KINDS)  # type: ignore[arg-type]
    assert {e.obj.KIND for e in feed.sync()} >= {"Node", "DeviceClass"}
    assert PodGroup not in feed.kinds
    watch = WatchFeed(NoPodGroups(store), FEED_KINDS, idle=0.05)  # type: ignore[arg-type]
    done = threading.Event()
    kinds: set[str] = set()

    def first() -> None:
        kinds.update(e.obj.KIND for e in watch.sync())
        done.set()

    threading.Thread(target=first, daemon=True).start()
    try:
        assert done.wait(10), "the feed waited for a kind the server does not serve"
        assert "Node" in kinds
    finally:
        watch.close()


def test_on_a_cluster_the_group_waits_for_the_controllers_claim(store: SqliteStore) -> None:
    """Without the claim controller's part, the group's pods wait quietly for the claim
    kube-controller-manager makes, and go as soon as the PodGroup records it."""
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 2, SHARED)
    for i in range(2):
        member(store, f"w{i}", "g", "two")
    scheduler = Scheduler(store, clock=Clock(), claim_controller=False)
    outcomes = scheduler.run_once()
    assert {o.result for o in outcomes} == {"waiting"} and group_claims(store, "g") == []
    assert scheduler.queue.parked == 2
    pg = store.get(PodGroup, "g")
    claim = store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "g-gpus-abcde", "namespace": "default", "ownerReferences": [{
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "g",
            "uid": pg.metadata.uid, "controller": True}]},
        "spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}}).obj)
    store.update_status(msgspec.json.decode(msgspec.json.encode({
        **msgspec.to_builtins(pg),
        "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": claim.name}]},
    }), type=PodGroup))
    scheduler.run_once()
    assert bound(store) == {"w0": "n1", "w1": "n1"}
    written = store.get(ResourceClaim, claim.name)
    assert written.status is not None and [r.name for r in written.status.reserved_for] == ["g"]
