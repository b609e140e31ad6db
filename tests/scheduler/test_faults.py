"""The scheduler when the cluster changes under it: pods deleted, re-created or changed
between its claim writes and its binding (upstream: the binding's uid precondition, then
Unreserve), and claims being deleted.

The guard for the class: whatever happens to the pod in that window, `run_once` never
raises, no claim stays reserved for a pod that is gone, and no device is held twice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.cluster import SqliteStore
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import GPU_CLASS, gpu_node, gpu_pod, gpu_template, user_claim
from tests.scheduler.invariants import always, settled


class WindowStore(SqliteStore):
    """A real store where something happens just before the scheduler's first binding
    (as another process would do it: a separate write)."""

    meanwhile: Callable[[SqliteStore], None] | None = None

    def bind(self, pod: Pod, node: str) -> Pod:
        action, self.meanwhile = self.meanwhile, None
        if action is not None:
            action(self)
        return super().bind(pod, node)


def deleted(store: SqliteStore) -> None:
    store.delete(Pod, "victim")


def recreated(store: SqliteStore) -> None:
    store.delete(Pod, "victim")
    gpu_pod(store, "victim", template="two")


def recreated_asking_more(store: SqliteStore) -> None:
    store.delete(Pod, "victim")
    gpu_pod(store, "victim", template="four")


def being_deleted(store: SqliteStore) -> None:
    pod = store.get(Pod, "victim")
    meta = msgspec.structs.replace(pod.metadata, finalizers=("example.com/hold",))
    store.update(msgspec.structs.replace(pod, metadata=meta))
    store.delete(Pod, "victim")


def bound_elsewhere(store: SqliteStore) -> None:
    store.bind(store.get(Pod, "victim"), "n2")


WINDOW = {
    "deleted": deleted,
    "recreated": recreated,
    "recreated-asking-more": recreated_asking_more,
    "being-deleted": being_deleted,
    "bound-elsewhere": bound_elsewhere,
}


@pytest.fixture
def store(tmp_path: Path) -> WindowStore:
    store = WindowStore(tmp_path / "state.db")
    store.create(decode_object(GPU_CLASS).obj)
    gpu_node(store, "n1", gpus=4)
    gpu_node(store, "n2", gpus=4)
    gpu_template(store, "two", 2)
    gpu_template(store, "four", 4)
    return store


@pytest.mark.parametrize("event", sorted(WINDOW))
def test_whatever_happens_before_the_binding_no_reservation_outlives_its_pod(store: WindowStore, event: str) -> None:
    gpu_pod(store, "victim", template="two")
    store.meanwhile = WINDOW[event]
    scheduler = Scheduler(store)
    first = scheduler.run_once()  # never raises
    assert first[0].node is None and "binding refused" in first[0].message
    scheduler.run_once()
    assert settled(store) == []
    if event == "bound-elsewhere":  # bound by someone who allocated nothing: not ours to fix
        assert [c.status for c in store.list(ResourceClaim)] == [None]  # but nothing of ours is held
    else:
        assert always(store) == []


def test_a_pod_deleted_before_its_binding_gives_its_claim_back(store: WindowStore) -> None:
    gpu_pod(store, "victim", template="two")
    store.meanwhile = deleted
    (outcome,) = Scheduler(store).run_once()
    assert outcome.message.startswith('binding refused, retried: Pod "victim" not found')
    assert store.list(ResourceClaim) == []  # generated for it: deleted with it once freed
    gpu_pod(store, "next", template="four")
    (placed,) = Scheduler(store).run_once()
    assert placed.node == "n1"  # all four GPUs of n1 are free again


def test_a_pod_recreated_under_its_name_is_scheduled_for_itself(store: WindowStore) -> None:
    gpu_pod(store, "victim", template="two")
    old_uid = store.get(Pod, "victim").metadata.uid
    store.meanwhile = recreated
    refused, placed = Scheduler(store).run_once()
    assert "Precondition failed: UID in precondition" in refused.message
    assert placed.pod == "default/victim" and placed.node == "n1"
    pod = store.get(Pod, "victim")
    assert pod.metadata.uid != old_uid and pod.spec.node_name == "n1"
    (claim,) = store.list(ResourceClaim)  # the old pod's claim is gone
    assert claim.status is not None and [r.uid for r in claim.status.reserved_for] == [pod.metadata.uid]
    assert claim.metadata.owner_references[0].uid == pod.metadata.uid
    assert always(store) == [] and settled(store) == []


def test_a_shared_claim_keeps_its_other_pods_when_one_is_deleted_before_binding(store: WindowStore) -> None:
    user_claim(store, "shared")
    gpu_pod(store, "first", claim="shared")
    scheduler = Scheduler(store)
    assert scheduler.run_once()[0].node == "n1"
    gpu_pod(store, "victim", claim="shared")
    store.meanwhile = deleted
    scheduler.run_once()
    claim = store.get(ResourceClaim, "shared")
    assert claim.status is not None and claim.status.allocation is not None
    assert [r.name for r in claim.status.reserved_for] == ["first"]
    assert always(store) == [] and settled(store) == []


def test_a_claim_being_deleted_is_not_allocated_and_is_freed_once_unheld(store: WindowStore) -> None:
    user_claim(store, "mine")
    gpu_pod(store, "user", claim="mine")
    scheduler = Scheduler(store)
    assert scheduler.run_once()[0].node == "n1"
    store.delete(ResourceClaim, "mine")  # in use: the scheduler's finalizer holds it
    assert store.get(ResourceClaim, "mine").metadata.deletion_timestamp
    gpu_pod(store, "late", claim="mine")
    (late,) = scheduler.run_once()
    assert late.node is None and late.message == 'resource claim "mine" is being deleted'
    store.delete(Pod, "user")
    store.delete(Pod, "late")
    scheduler.run_once()
    assert store.list(ResourceClaim) == []  # unheld: deallocated, finalizer gone, deleted


def test_a_scheduler_killed_before_binding_leaves_nothing_reserved_once_the_pod_is_gone(store: WindowStore) -> None:
    """The claim-controller side of the same guard: reservations written by a scheduler
    that died are dropped by the next one when their pod is gone."""
    gpu_pod(store, "victim", template="two")
    store.meanwhile = lambda s: (_ for _ in ()).throw(SystemExit("killed"))
    with pytest.raises(SystemExit):
        Scheduler(store).run_once()
    (claim,) = store.list(ResourceClaim)
    assert claim.status is not None and claim.status.reserved_for
    store.delete(Pod, "victim")
    assert store.get(ResourceClaim, claim.name).metadata.deletion_timestamp  # held by the finalizer
    Scheduler(store).run_once()
    assert store.list(ResourceClaim) == [] and settled(store) == []


def test_a_binding_another_scheduler_completed_from_our_reservations_is_kept(store: WindowStore) -> None:
    """Regression: a second scheduler that finds the claims reserved for a pending pod binds
    it (crash recovery); the first one's binding is then refused as "already assigned", and
    dropping the reservations then would leave a bound pod without its devices."""
    gpu_pod(store, "victim", template="two")
    store.meanwhile = lambda s: Scheduler(s).run_once() and None
    (outcome,) = Scheduler(store).run_once()
    assert outcome.message == "bound to n1 by another scheduler"
    assert store.get(Pod, "victim").spec.node_name == "n1"
    assert always(store) == [] and settled(store) == []
