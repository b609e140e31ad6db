"""Churn on a full cluster, the way a real cluster's scheduler sees it: the binding cycle
runs in the background, and the pod it bound can be deleted, and its claim freed by the
claim controller, before the scheduler has handled the binding's answer (upstream's
scheduler_perf SteadyStateClusterResourceClaimTemplate/full: a bound pod is deleted at once
and replaced). The freed device must be seen free, and the pending pods woken, at once:
not left taken by a late answer to the write (a device lost for good), nor waiting for a
backoff timer."""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec
import pytest

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster import SqliteStore
from kubedra.errors import NotFound
from kubedra.scheduler.schedule_one import Plan
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store
from tests.scheduler.test_cluster_mode import controller_creates_claim


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=1, domains=1)  # the cluster's one free device
    gpu_template(store, "one", 1)
    return store


def pending(store: SqliteStore, name: str) -> None:
    gpu_pod(store, name, template="one")
    controller_creates_claim(store, name)


def claim_of(store: SqliteStore, pod: str) -> ResourceClaim:
    (claim,) = [c for c in store.list(ResourceClaim) if c.name.startswith(f"{pod}-")]
    return claim


def controller_frees(store: SqliteStore, pod: str, delete: bool) -> None:
    """kube-controller-manager's resourceclaim controller after the pod is gone: the
    reservation and the allocation go, then the finalizer, then (a generated claim) the claim."""
    claim = claim_of(store, pod)
    claim = store.update_status(msgspec.structs.replace(claim, status=None))
    if delete:
        meta = msgspec.structs.replace(claim.metadata, finalizers=())
        claim = store.update(msgspec.structs.replace(claim, metadata=meta))
        with contextlib.suppress(NotFound):  # gone with its finalizer
            store.delete(ResourceClaim, claim.name, claim.namespace)


def bind_in_background(scheduler: Scheduler) -> Plan:
    """The runner's split on a cluster: plan, then the writes (another thread there), with
    `finish` left for later."""
    scheduler.refresh()
    pod = scheduler.queue.pop()
    assert pod is not None
    plan = scheduler.plan(pod)
    assert isinstance(plan, Plan)
    return plan


@pytest.mark.parametrize("delete", [True, False], ids=["claim-deleted", "claim-deallocated"])
def test_a_device_freed_while_its_binding_is_answered_is_free_and_wakes_the_pending(
    store: SqliteStore, delete: bool
) -> None:
    clock = Clock()
    scheduler = Scheduler(store, claim_controller=False, clock=clock)
    pending(store, "a")
    plan = bind_in_background(scheduler)
    pending(store, "b")
    scheduler.refresh()
    (failed,) = scheduler.run_once()  # the only device is a's (assumed): b backs off
    assert failed.pod == "default/b" and failed.result == "unschedulable"
    written = scheduler.write(plan)
    assert not written.stage and store.get(Pod, "a").spec.node_name == "n1"
    # a is deleted as soon as it is bound, and its device freed, before the scheduler handles
    # the binding's answer: the feed brings all of it first
    store.delete(Pod, "a")
    controller_frees(store, "a", delete)
    scheduler.refresh()
    placed = scheduler.finish(plan, written)
    assert placed.node == "n1"
    # the device is free in the view, and b is due now, not after its backoff
    assert scheduler.queue.waiting == 0
    pod = scheduler.queue.pop()
    assert pod is not None and pod.name == "b"
    outcome = scheduler.schedule(pod)
    assert outcome.node == "n1", outcome.message
    assert store.get(Pod, "b").spec.node_name == "n1"


def test_a_pod_deleted_while_its_binding_is_answered_does_not_come_back(
    store: SqliteStore,
) -> None:
    scheduler = Scheduler(store, claim_controller=False, clock=Clock())
    pending(store, "a")
    plan = bind_in_background(scheduler)
    written = scheduler.write(plan)
    store.delete(Pod, "a")
    controller_frees(store, "a", delete=True)
    scheduler.refresh()
    scheduler.finish(plan, written)
    assert ("default", "a") not in scheduler.cache.of(Pod)
    assert scheduler.cache.of(ResourceClaim) == {}
    pending(store, "c")  # its device is free: nothing assumed lingers
    (placed,) = scheduler.run_once()
    assert placed.pod == "default/c" and placed.node == "n1", placed.message
