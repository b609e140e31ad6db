"""Gangs beside a resourceclaim controller that makes each member's claim a moment after
the member (claim_controller=False, as on a cluster), on a real embedded store with a real
Scheduler; the test plays kube-controller-manager. A gang is tried only once every pending
member's claims exist (upstream's queue gates a pod group while DynamicResources' PreEnqueue
gates any of its pods), and at once then, woken by the last claim's events: no member is
placed early on what the gang will not need (another gang's room, the wrong topology
domain) to fail the gang when the last member comes and send it into backoff. That was the
1 s to placement the gangs-vs-kube bench measured now and then in its one-rack and
competing scenarios.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaimTemplate
from kubedra.cluster import SqliteStore
from kubedra.scheduler.claims import generated_claim, with_claim_status
from kubedra.scheduler.feed import LogFeed
from kubedra.scheduler.runner import RunConfig, SchedulerRunner
from kubedra.scheduler.scheduler import FEED_KINDS, Outcome, Scheduler
from tests.scheduler.cluster import gpu_node, gpu_template, new_store
from tests.scheduler.test_gang import Clock, bound, member, pod_group

RACK = "example.com/rack"


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_template(store, "four", 4)
    return store


def controller_makes_claim(store: SqliteStore, pod_name: str) -> None:
    """kube-controller-manager's resourceclaim controller: the claim from the pod's
    template, then its name in the pod's status."""
    pod = store.get(Pod, pod_name)
    entry = pod.spec.resource_claims[0]
    template = store.get(ResourceClaimTemplate, entry.resource_claim_template_name or "")
    claim = store.create(generated_claim(pod, entry, template))
    store.update_status(with_claim_status(pod, entry.name, claim.name))


def cluster_scheduler(store: SqliteStore, clock: Clock) -> Scheduler:
    """The scheduler as `kubedra scheduler run` has it on a cluster: not the claim
    controller, and no ResourceClaimTemplates in its feed (`runner.py` watches them only
    where it makes claims from them)."""
    kinds = [k for k in FEED_KINDS if k is not ResourceClaimTemplate]
    return Scheduler(store, claim_controller=False, clock=clock, feed=LogFeed(store, kinds))


def test_two_competing_gangs_whose_claims_come_late_place_one_without_a_backoff(
    store: SqliteStore,
) -> None:
    """Through `kubedra scheduler run`'s loop (in line on the embedded store): before,
    each gang had two members reserved (all 16 GPUs) when the last claims came, both
    gangs failed and were rejected, and the winner was placed after the 1 s backoff."""
    gpu_node(store, "n1", gpus=8)
    gpu_node(store, "n2", gpus=8)  # 16 GPUs: room for one gang of 3 x 4
    pod_group(store, "a", 3)
    pod_group(store, "b", 3)
    for i in range(3):  # created interleaved, as the bench's scenario does
        member(store, f"a{i}", "a", "four")
        member(store, f"b{i}", "b", "four")
    config = RunConfig(scheduler_name="default-scheduler", leader_elect=False)
    runner = SchedulerRunner(store, config, background=False)  # claim_controller False
    scheduler = runner.scheduler

    def turn() -> list[Outcome]:
        """One turn of the runner's loop: the feed, then every pod that is due."""
        before = len(runner.outcomes)
        scheduler.refresh()
        runner._turn()
        return runner.outcomes[before:]

    turn()
    for pod in ("a0", "b0"):
        controller_makes_claim(store, pod)
    turn()
    assert bound(store) == {} and not scheduler.waiting  # nothing reserved yet
    assert turn() == []  # parked until a claim comes: no retry loop
    for pod in ("a1", "b1"):
        controller_makes_claim(store, pod)
    turn()
    assert bound(store) == {} and not scheduler.waiting
    for pod in ("a2", "b2"):
        controller_makes_claim(store, pod)
    turn()  # woken by the last claims: gang a as a whole, then b finds no room
    turn()  # the members Permit allowed are bound at the next turn
    runner.pool.shutdown()
    runner.recorder.close()
    got = bound(store)
    assert sorted(got) == ["a0", "a1", "a2"], got


def test_a_topology_gang_whose_claims_come_late_goes_to_the_domain_that_takes_it(
    store: SqliteStore,
) -> None:
    gpu_node(store, "a1", gpus=8, labels={RACK: "rack-a"})  # 8 GPUs: too small
    gpu_node(store, "b1", gpus=8, labels={RACK: "rack-b"})  # 16 GPUs: takes 3 x 4
    gpu_node(store, "b2", gpus=8, labels={RACK: "rack-b"})
    pod_group(store, "g", 3, key=RACK)
    for i in range(3):
        member(store, f"g{i}", "g", "four")
    clock = Clock()
    scheduler = cluster_scheduler(store, clock)
    controller_makes_claim(store, "g0")
    scheduler.run_once()
    # g0 alone would fit rack-a (the best fit for 4 GPUs): it must not be placed before
    # the others' claims say what the gang needs
    assert bound(store) == {} and not scheduler.waiting
    controller_makes_claim(store, "g1")
    controller_makes_claim(store, "g2")
    scheduler.run_once()
    got = bound(store)
    assert sorted(got) == ["g0", "g1", "g2"] and set(got.values()) <= {"b1", "b2"}, got


def test_a_member_whose_claim_name_is_recorded_before_the_claim_exists_holds_the_gang(
    store: SqliteStore,
) -> None:
    """The pod's status and its claim come in two events, in either order: a recorded
    name without the claim in the cache is not ready either."""
    gpu_node(store, "n1", gpus=8)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 2)
    member(store, "w0", "g", "two")
    member(store, "w1", "g", "two")
    controller_makes_claim(store, "w0")
    pod = store.get(Pod, "w1")
    entry = pod.spec.resource_claims[0]
    template = store.get(ResourceClaimTemplate, "two")
    made = generated_claim(pod, entry, template)
    claim = msgspec.structs.replace(  # the name the API server would have generated
        made, metadata=msgspec.structs.replace(made.metadata, name="w1-gpus-x1y2z"))
    store.update_status(with_claim_status(pod, entry.name, claim.name))  # name first
    scheduler = cluster_scheduler(store, Clock())
    outcomes = scheduler.run_once()
    assert bound(store) == {} and not scheduler.waiting
    assert any(f'waiting for resource claim "{claim.name}" to be created' in o.message
               for o in outcomes), outcomes
    store.create(claim)  # then the claim
    scheduler.run_once()
    assert bound(store) == {"w0": "n1", "w1": "n1"}


def test_a_gang_whose_claims_exist_is_placed_in_one_pass(store: SqliteStore) -> None:
    """Nothing held when every claim is there: the gang goes at the first pass."""
    gpu_node(store, "n1", gpus=8)
    pod_group(store, "g", 2)
    member(store, "w0", "g", "four")
    member(store, "w1", "g", "four")
    controller_makes_claim(store, "w0")
    controller_makes_claim(store, "w1")
    scheduler = cluster_scheduler(store, Clock())
    scheduler.run_once()
    assert bound(store) == {"w0": "n1", "w1": "n1"}
