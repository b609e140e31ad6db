"""The framework: profiles, extension points, and Permit's wait (with a toy gang plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster import SqliteStore
from kubedra.scheduler.framework import ALLOW, Candidate, CycleState, Handle, Verdict
from kubedra.scheduler.framework.interfaces import PermitPlugin, PreEnqueuePlugin
from kubedra.scheduler.plugins import DEFAULT_PROFILE
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return new_store(tmp_path)


class ToyGang(PreEnqueuePlugin, PermitPlugin):
    """Pods named `<gang>-<i>` are a gang of SIZE: none is tried before all exist, and
    each reserved one waits until the last is reserved (what a gang plugin will do with
    PodGroups)."""

    name = "ToyGang"
    SIZE = 3
    TIMEOUT = 30.0

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self.permits: list[str] = []

    @staticmethod
    def gang(pod: Pod) -> str:
        return pod.name.rsplit("-", 1)[0]

    def pre_enqueue(self, pod: Pod) -> str:
        gang = self.gang(pod)
        members = [k for k in self.handle.cache.of(Pod) if k[1].rsplit("-", 1)[0] == gang]
        missing = self.SIZE - len(members)
        return f"waiting for {missing} more pods of gang {gang}" if missing > 0 else ""

    def permit(self, state: CycleState, pod: Pod, candidate: Candidate) -> Verdict:
        self.permits.append(pod.name)
        gang = self.gang(pod)
        held = [k for k in self.handle.waiting if k[1].rsplit("-", 1)[0] == gang]
        if len(held) + 1 < self.SIZE:
            return Verdict(timeout=self.TIMEOUT)
        for key in held:
            self.handle.waiting.allow(key, self.name)
        return ALLOW


def gang_scheduler(store: SqliteStore, clock: list[float]) -> Scheduler:
    profile = list(DEFAULT_PROFILE)
    profile.insert(profile.index("DynamicResources"), ToyGang.name)
    return Scheduler(
        store, clock=lambda: clock[0], profile=profile, registry={ToyGang.name: ToyGang}
    )


def bound(store: SqliteStore) -> dict[str, str]:
    return {p.name: p.spec.node_name for p in store.list(Pod) if p.spec.node_name}


def test_the_default_profile_runs_each_plugin_at_its_extension_points(store: SqliteStore) -> None:
    fw = Scheduler(store).framework
    assert fw.names() == list(DEFAULT_PROFILE)
    names = lambda plugins: [p.name for p in plugins]  # noqa: E731
    assert fw.queue_sort is not None and fw.queue_sort.name == "PrioritySort"
    assert names(fw.filters) == ["NodeAffinity", "NodeResourcesFit", "DynamicResources"]
    assert fw.node_order is not None and fw.node_order.name == "PlacementPolicy"
    # GangScheduling's NodeFilter keeps a group in its topology domain, before allocating
    assert names(fw.node_filters) == ["GangScheduling", "DynamicResources"]
    assert names(fw.scorers) == ["DynamicResources", "PlacementPolicy"]  # preference first
    assert names(fw.reserves) == ["NodeResourcesFit", "GangScheduling", "DynamicResources"]
    assert names(fw.pre_binds) == ["DynamicResources"]
    assert names(fw.binders) == ["DefaultBinder"]
    assert names(fw.permits) == ["GangScheduling"]
    # a gang is held while DynamicResources holds any of its pods (a claim not made yet)
    assert names(fw.pre_enqueues) == ["GangScheduling", "DynamicResources"]


def test_a_profile_names_known_plugins_once(store: SqliteStore) -> None:
    with pytest.raises(KeyError, match="Gang"):
        Scheduler(store, profile=[*DEFAULT_PROFILE, "Gang"])
    with pytest.raises(ValueError, match="twice"):
        Scheduler(store, profile=[*DEFAULT_PROFILE, "NodeAffinity"])


def test_permit_holds_a_gang_until_its_last_pod_is_reserved(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=4)
    gpu_template(store, "one", 1)
    for i in range(3):
        gpu_pod(store, f"train-{i}", template="one")
    scheduler = gang_scheduler(store, [0.0])
    outcomes = scheduler.run_once()
    assert [(o.pod, o.result) for o in outcomes] == [
        ("default/train-0", "waiting"),
        ("default/train-1", "waiting"),
        ("default/train-2", "scheduled"),
        ("default/train-0", "scheduled"),
        ("default/train-1", "scheduled"),
    ]
    assert outcomes[0].message == "waiting for permit of ToyGang"
    assert bound(store) == {f"train-{i}": "n1" for i in range(3)}
    devices = {o.devices for o in outcomes if o.node}
    assert len(devices) == 3  # three different GPUs: the held pods kept theirs


def test_pre_enqueue_parks_an_incomplete_gang_quietly(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=4)
    gpu_template(store, "one", 1)
    for i in range(2):
        gpu_pod(store, f"train-{i}", template="one")
    clock = [0.0]
    scheduler = gang_scheduler(store, clock)
    outcomes = scheduler.run_once()
    assert {o.result for o in outcomes} == {"waiting"}
    assert outcomes[0].message == "waiting for 1 more pods of gang train"
    assert not store.list(ResourceClaim)  # not even its claims are generated
    assert all(not (p.status and p.status.conditions) for p in store.list(Pod))  # quiet
    gpu_pod(store, "train-2", template="one")
    clock[0] += 11.0  # the parked pods come back (the longest backoff)
    scheduler.run_once()
    assert sorted(bound(store)) == ["train-0", "train-1", "train-2"]


def test_a_gang_that_cannot_complete_gives_its_devices_back(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=2)
    gpu_template(store, "one", 1)
    for i in range(3):
        gpu_pod(store, f"train-{i}", template="one")
    clock = [0.0]
    scheduler = gang_scheduler(store, clock)
    first = scheduler.run_once()
    assert [o.result for o in first] == ["waiting", "waiting", "unschedulable"]
    assert len(scheduler.waiting) == 2
    clock[0] += ToyGang.TIMEOUT
    refused = scheduler.settle_waiting()
    assert [(o.pod, o.result) for o in refused] == [
        ("default/train-0", "unschedulable"),
        ("default/train-1", "unschedulable"),
    ]
    assert refused[0].message == "timed out waiting for permit of ToyGang"
    assert not bound(store)
    for claim in store.list(ResourceClaim):  # nothing was written for the held pods
        assert claim.status is None or claim.status.allocation is None
    assert scheduler.view().nodes["n1"].free() == 2  # and the view holds them no more
