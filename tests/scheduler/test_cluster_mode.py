"""The scheduling core as it runs beside a resourceclaim controller and other schedulers
(claim_controller=False), on a real embedded store: it waits for generated claims instead
of creating them, only unreserves, reports with events, and keeps off shared nodes."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kubedra.api.core import Node, Pod
from kubedra.api.resource import ResourceClaim, ResourceClaimTemplate
from kubedra.cluster import SqliteStore
from kubedra.cluster.events import Event
from kubedra.scheduler.claims import generated_claim, with_claim_status
from kubedra.scheduler.scheduler import Scheduler
from kubedra.scheduler.sharing import RACE_WINDOW_S
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store, user_claim
from tests.scheduler.test_faults import WindowStore, deleted


class Events:
    """A recorder that keeps the events (what the API recorder would write)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


def controller_creates_claim(store: SqliteStore, pod_name: str) -> ResourceClaim:
    """What kube-controller-manager's resourceclaim controller does for a template entry."""
    pod = store.get(Pod, pod_name)
    entry = pod.spec.resource_claims[0]
    template = store.get(ResourceClaimTemplate, entry.resource_claim_template_name or "")
    claim = store.create(generated_claim(pod, entry, template))
    store.update_status(with_claim_status(pod, entry.name, claim.name))
    return claim


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    gpu_node(store, "n2", gpus=2)
    gpu_template(store, "one", 1)
    return store


def test_a_pod_waits_quietly_for_its_generated_claim_and_is_tried_once_it_exists(
    store: SqliteStore,
) -> None:
    gpu_pod(store, "p", template="one")
    scheduler = Scheduler(store, claim_controller=False)
    (waiting,) = scheduler.run_once()
    assert waiting.result == "waiting" and "to be created from template" in waiting.message
    assert store.list(ResourceClaim) == []  # never created by the scheduler
    status = store.get(Pod, "p").status
    assert status is not None and status.conditions == ()  # no condition: a moment's wait
    assert scheduler.run_once() == []  # parked: not retried until the claim exists
    controller_creates_claim(store, "p")
    (placed,) = scheduler.run_once()  # woken by the claim, not by a backoff timer
    assert placed.node == "n1" and len(store.list(ResourceClaim)) == 1


def test_a_missing_user_claim_is_said_on_the_pod_and_wakes_it_when_created(
    store: SqliteStore,
) -> None:
    gpu_pod(store, "p", claim="mine")
    scheduler = Scheduler(store, claim_controller=False)
    (waiting,) = scheduler.run_once()
    assert waiting.result == "waiting"
    (condition,) = store.get(Pod, "p").status.conditions  # type: ignore[union-attr]
    assert condition.message == 'waiting for resource claim "mine" to be created'
    user_claim(store, "mine")
    (placed,) = scheduler.run_once()
    assert placed.node == "n1"


def test_unreserve_only_drops_the_reservation_and_leaves_freeing_to_the_controller(
    tmp_path: Path,
) -> None:
    store = WindowStore(tmp_path / "state.db")
    new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    user_claim(store, "c")
    gpu_pod(store, "victim", claim="c")
    store.meanwhile = deleted
    (outcome,) = Scheduler(store, claim_controller=False).run_once()
    assert "binding refused" in outcome.message
    claim = store.get(ResourceClaim, "c")
    assert claim.status is not None and claim.status.reserved_for == ()
    assert claim.status.allocation is not None  # upstream: the controller deallocates


def test_failed_scheduling_events_carry_the_explanation_once_per_reason(store: SqliteStore) -> None:
    gpu_template(store, "three", 3)
    gpu_pod(store, "big", template="three")
    events = Events()
    scheduler = Scheduler(store, recorder=events)
    scheduler.run_once()
    scheduler.queue.wake_all()
    scheduler.run_once()  # the same reason again: no second event
    (event,) = events.events
    assert (event.type, event.reason, event.action) == ("Warning", "FailedScheduling", "Scheduling")
    assert event.note.startswith(
        "0/2 nodes are available: 2 cannot allocate all claims "
        "(gpus: 2 devices on the node, 3 needed). kubedra: "
    )
    assert "gpus (need 3): 2 in pools -> 2 class selectors" in event.note
    gpu_pod(store, "small", template="one")
    scheduler.run_once()
    scheduled = events.events[-1]
    assert (scheduled.reason, scheduled.note) == ("Scheduled", "Successfully assigned default/small to n1")


@pytest.mark.parametrize(("mode", "node"), [("refuse", "n2"), ("warn", "n1")])
def test_a_node_where_another_scheduler_holds_devices(store: SqliteStore, mode: str, node: str) -> None:
    gpu_pod(store, "theirs", template="one", schedulerName="default-scheduler")
    Scheduler(store, scheduler_names=("default-scheduler",)).run_once()  # lands on n1
    gpu_pod(store, "mine", template="one", schedulerName="kubedra")
    scheduler = Scheduler(store, scheduler_names=("kubedra",), shared_nodes=mode)
    (outcome,) = scheduler.run_once()
    assert outcome.node == node
    assert scheduler.shared_nodes() == {"n1": "default-scheduler"}


def test_owned_nodes_only(store: SqliteStore) -> None:
    node = store.get(Node, "n2")
    labels = {**node.metadata.labels, "pool": "kubedra"}
    store.update(msgspec.structs.replace(node, metadata=msgspec.structs.replace(node.metadata, labels=labels)))
    gpu_pod(store, "p", template="one")
    (outcome,) = Scheduler(store, node_selector="pool=kubedra").run_once()
    assert outcome.node == "n2"


def test_a_node_where_another_schedulers_pending_pod_may_land_is_refused_for_a_while(
    store: SqliteStore,
) -> None:
    now = [0.0]
    gpu_pod(store, "theirs", template="one", schedulerName="default-scheduler",
            nodeSelector={"kubernetes.io/hostname": "n1"})  # being placed by its scheduler
    scheduler = Scheduler(store, scheduler_names=("kubedra",), clock=lambda: now[0])
    gpu_pod(store, "mine", template="one", schedulerName="kubedra")
    (outcome,) = scheduler.run_once()
    assert outcome.node == "n2"  # n1 is where the other scheduler is about to allocate
    now[0] += RACE_WINDOW_S  # its pod still pending after this long: not being placed now
    gpu_pod(store, "later", template="one", schedulerName="kubedra")
    (later,) = scheduler.run_once()
    assert later.node == "n1"


def test_a_pending_pod_does_not_share_a_node_with_itself(store: SqliteStore) -> None:
    """Explaining another scheduler's pending pod: its own pendency does not make the nodes
    it may land on "shared"; another pending pod of that scheduler still does."""
    gpu_pod(store, "theirs", template="one", schedulerName="default-scheduler",
            nodeSelector={"kubernetes.io/hostname": "n1"})
    scheduler = Scheduler(store, scheduler_names=("kubedra",))
    scheduler.refresh()
    theirs = store.get(Pod, "theirs")
    assert scheduler.shared_nodes() == {"n1": "default-scheduler"}
    assert scheduler.shared_nodes(besides=theirs) == {}
    assert scheduler.shared_nodes() == {"n1": "default-scheduler"}  # nothing kept of it
    gpu_pod(store, "other", template="one", schedulerName="default-scheduler",
            nodeSelector={"kubernetes.io/hostname": "n1"})
    scheduler.refresh()
    assert scheduler.shared_nodes(besides=theirs) == {"n1": "default-scheduler"}
