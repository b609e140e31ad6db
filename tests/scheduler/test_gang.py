"""Gang scheduling of PodGroups on a real SqliteStore: all or nothing, no deadlock between
gangs, members arriving over time, the Permit timeout, topology domains (best fit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.api.scheduling import INITIALLY_SCHEDULED, PodGroup
from kubedra.cluster import SqliteStore
from kubedra.cluster.events import Event
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Events:
    """A recorder that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return new_store(tmp_path)


def pod_group(store: SqliteStore, name: str, min_count: int | None, key: str = "") -> None:
    spec: dict[str, Any] = {"schedulingPolicy": (
        {"gang": {"minCount": min_count}} if min_count else {"basic": {}})}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    store.create(decode_object({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}).obj)


def member(store: SqliteStore, name: str, group: str, template: str) -> None:
    gpu_pod(store, name, template=template, schedulingGroup={"podGroupName": group})


def bound(store: SqliteStore) -> dict[str, str]:
    return {p.name: p.spec.node_name for p in store.list(Pod) if p.spec.node_name}


def allocated(store: SqliteStore) -> list[str]:
    return [c.name for c in store.list(ResourceClaim)
            if c.status is not None and c.status.allocation is not None]


def condition(store: SqliteStore, group: str) -> tuple[str, str, str]:
    pg = store.get(PodGroup, group)
    assert pg.status is not None
    (c,) = [c for c in pg.status.conditions if c.type == INITIALLY_SCHEDULED]
    return c.status, c.reason or "", c.message or ""


def test_a_gang_that_fits_is_placed_entirely(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 4)
    for i in range(4):
        member(store, f"w{i}", "g", "two")
    events = Events()
    Scheduler(store, recorder=events).run_once()
    assert bound(store) == {f"w{i}": "n1" for i in range(4)}
    assert len(allocated(store)) == 4
    status, reason, _ = condition(store, "g")
    assert (status, reason) == ("True", "Scheduled")
    assert [(e.regarding.name, e.reason) for e in events.events
            if isinstance(e.regarding, PodGroup)] == [("g", "Scheduled")]


def test_a_gang_bigger_than_the_room_holds_nothing(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "four", 4)
    gpu_template(store, "eight", 8)
    pod_group(store, "g", 3)
    for i in range(3):
        member(store, f"w{i}", "g", "four")
    gpu_pod(store, "single", template="eight")  # after the gang: it needs all 8 GPUs
    Scheduler(store).run_once()
    assert bound(store) == {"single": "n1"}
    (claim,) = allocated(store)
    assert claim.startswith("single-")
    status, reason, message = condition(store, "g")
    assert (status, reason) == ("False", "Unschedulable") and "cannot be placed" in message


def test_two_gangs_that_fit_alone_but_not_together_never_deadlock(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=10)
    gpu_template(store, "two", 2)
    pod_group(store, "a", 4)
    pod_group(store, "b", 4)
    for i in range(4):  # created interleaved: the queue still takes each gang as a whole
        member(store, f"a{i}", "a", "two")
        member(store, f"b{i}", "b", "two")
    clock = Clock()
    scheduler = Scheduler(store, clock=clock)
    for _ in range(3):
        scheduler.run_once()
        clock.now += 20
    assert bound(store) == {f"a{i}": "n1" for i in range(4)}
    assert len(allocated(store)) == 4 and not scheduler.waiting
    assert condition(store, "a")[0] == "True"
    status, reason, _ = condition(store, "b")
    assert (status, reason) == ("False", "Unschedulable")
    b0 = store.get(Pod, "b0")
    assert b0.status is not None and b0.status.conditions[0].status == "False"


def test_a_gang_arriving_over_time_holds_nothing_until_min_count_exist(
    store: SqliteStore,
) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 3)
    member(store, "w0", "g", "two")
    member(store, "w1", "g", "two")
    scheduler = Scheduler(store)
    outcomes = scheduler.run_once()
    assert {o.result for o in outcomes} == {"waiting"}
    assert "minCount pods from a gang to appear" in outcomes[0].message
    assert bound(store) == {} and allocated(store) == [] and not scheduler.waiting
    member(store, "w2", "g", "two")
    scheduler.run_once()
    assert bound(store) == {"w0": "n1", "w1": "n1", "w2": "n1"}


def test_a_pod_waits_quietly_for_its_pod_group(store: SqliteStore) -> None:
    gpu_node(store, "n1")
    gpu_template(store, "two", 2)
    member(store, "w0", "late", "two")
    (outcome,) = Scheduler(store).run_once()
    assert outcome.result == "waiting" and '"late"' in outcome.message
    pod = store.get(Pod, "w0")
    assert not pod.spec.node_name and not (pod.status and pod.status.conditions)


def test_reserved_members_are_given_back_when_the_gang_times_out(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 3)
    member(store, "w0", "g", "two")
    member(store, "w1", "g", "two")
    # the third member's claim does not exist: it waits for it, the others wait in Permit
    gpu_pod(store, "w2", claim="missing", schedulingGroup={"podGroupName": "g"})
    clock = Clock()
    scheduler = Scheduler(store, clock=clock, gang_timeout=5.0)
    scheduler.run_once()
    assert len(scheduler.waiting) == 2 and bound(store) == {} and allocated(store) == []
    gpu_pod(store, "other", template="two")  # devices held by the gang are not its
    clock.now += 6
    outcomes = scheduler.run_once()
    assert not scheduler.waiting
    results = {o.pod: o.result for o in outcomes}
    assert results["default/w0"] == results["default/w1"] == "unschedulable"
    assert bound(store) == {"other": "n1"} and len(allocated(store)) == 1
    # all 8 GPUs but the other pod's 2 are free again: a pod taking 6 fits
    gpu_template(store, "six", 6)
    gpu_pod(store, "six", template="six")
    scheduler.run_once()
    assert bound(store)["six"] == "n1"


def rack_node(store: SqliteStore, name: str, rack: str) -> None:
    gpu_node(store, name, gpus=8, labels={"example.com/rack": rack})


def test_topology_picks_the_domain_that_fits_best(store: SqliteStore) -> None:
    rack_node(store, "a1", "rack-a")  # rack-a: 16 free GPUs
    rack_node(store, "a2", "rack-a")
    rack_node(store, "b1", "rack-b")  # rack-b: 8, just enough
    gpu_template(store, "two", 2)
    pod_group(store, "g", 4, key="example.com/rack")
    for i in range(4):
        member(store, f"w{i}", "g", "two")
    Scheduler(store).run_once()
    assert bound(store) == {f"w{i}": "b1" for i in range(4)}


def test_topology_keeps_a_gang_in_one_domain_or_refuses_it_with_numbers(
    store: SqliteStore,
) -> None:
    rack_node(store, "a1", "rack-a")
    rack_node(store, "a2", "rack-a")
    rack_node(store, "b1", "rack-b")
    gpu_template(store, "six", 6)
    pod_group(store, "big", 3, key="example.com/rack")  # 18 GPUs: no rack has them
    for i in range(3):
        member(store, f"w{i}", "big", "six")
    pod_group(store, "two-racks-worth", 2, key="example.com/rack")  # 12: only rack-a
    for i in range(2):
        member(store, f"v{i}", "two-racks-worth", "six")
    outcomes = Scheduler(store).run_once()
    assert bound(store) == {"v0": "a1", "v1": "a2"}
    why = next(o.message for o in outcomes if o.pod == "default/w0")
    assert why == ("needs 18 device(s) of class gpu in one example.com/rack; "
                   "the largest rack has 16 free (rack-a)")
    assert condition(store, "big")[:2] == ("False", "Unschedulable")
    assert allocated(store) and all(c.startswith("v") for c in allocated(store))


def test_pods_without_a_group_are_placed_while_a_gang_waits(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 3)
    member(store, "w0", "g", "two")
    gpu_pod(store, "solo", template="two")
    Scheduler(store).run_once()
    assert bound(store) == {"solo": "n1"}


def test_a_basic_group_schedules_its_pods_one_by_one(store: SqliteStore) -> None:
    gpu_node(store, "n1", gpus=4)
    gpu_template(store, "two", 2)
    pod_group(store, "g", None)
    for i in range(3):
        member(store, f"w{i}", "g", "two")
    Scheduler(store).run_once()
    assert bound(store) == {"w0": "n1", "w1": "n1"}
