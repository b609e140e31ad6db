"""The scheduler names the blocker: in the PodScheduled condition (kube-scheduler's form,
the blocker in brackets) and in the FailedScheduling event (the nearest node's blockers,
and a node where releasing claims would make the pod fit), on a real embedded store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubedra.api.core import Pod
from kubedra.cluster import SqliteStore
from kubedra.scheduler.explain import explain_claims, pod_claims, what_would_fit
from kubedra.scheduler.plugins.dra import diagnosis as diagnosis_module
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store
from tests.scheduler.test_cluster_mode import Events

ROOT = "resource.kubernetes.io/pcieRoot"


def _condition(store: SqliteStore, pod: str) -> str:
    (c,) = [c for c in store.get(Pod, pod).status.conditions if c.type == "PodScheduled"]  # type: ignore[union-attr]
    return c.message or ""


def test_constraint_named_in_condition_and_event(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=8)
    gpu_node(store, "n2", gpus=4, labels={"pool": "other"})
    gpu_template(store, "root4", 4, constraint=ROOT)
    gpu_pod(store, "p", template="root4")
    events = Events()
    Scheduler(store, recorder=events).run_once()
    short = f"cannot allocate all claims (gpus: at most 2 devices share one {ROOT}, 4 needed)"
    assert _condition(store, "p") == f"0/2 nodes are available: 2 {short}."
    (event,) = events.events
    assert " kubedra: on node n1, default/p-gpus-" in event.note  # the generated claim
    assert f"gpus: matchAttribute {ROOT}: at most 2 of the 4 devices share one value" in event.note
    # the nearest-node hint, short, as `kubedra explain` words it
    assert re.search(rf"; nearest: n[12]: default/p-gpus-\w+ gpus: at most 2 devices share "
                     rf"one {ROOT}, 4 needed; no eligible node has 4 candidate devices sharing one value$",
                     event.note), event.note


def test_event_names_the_claim_whose_release_makes_it_fit(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    gpu_template(store, "two", 2)
    gpu_pod(store, "first", template="two")
    gpu_pod(store, "second", template="two")
    events = Events()
    scheduler = Scheduler(store, recorder=events)
    scheduler.run_once()
    assert _condition(store, "second") == (
        "0/1 nodes are available: 1 cannot allocate all claims (gpus: 0 of 2 matching devices free, 2 needed).")
    note = events.events[-1].note
    assert re.search(r"; default/second-gpus-\w+ gpus: fits on n1 if claim\(s\) default/first-gpus-\w+ were released$", note), note


def test_diagnosis_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past DIAGNOSED_NODES refused nodes, the rest keep upstream's words; the event
    diagnoses one more, the node that came closest, and names it nearest."""
    store = new_store(tmp_path)
    for i, gpus in enumerate((1, 1, 2)):
        gpu_node(store, f"n{i}", gpus=gpus)
    gpu_template(store, "three", 3)
    gpu_pod(store, "p", template="three")
    monkeypatch.setattr(diagnosis_module, "DIAGNOSED_NODES", 2)
    events = Events()
    Scheduler(store, recorder=events).run_once()
    assert _condition(store, "p") == (
        "0/3 nodes are available: 2 cannot allocate all claims (gpus: 1 device on the node, 3 needed), "
        "1 cannot allocate all claims.")
    (event,) = events.events
    assert re.search(r"kubedra: on node n2, .*; nearest: n2: default/p-gpus-\w+ gpus: 2 devices on the node, 3 needed$", event.note), event.note


def test_pod_over_the_results_limit_is_told_so_and_offered_no_node(tmp_path: Path) -> None:
    """No node or release lifts the per-claim results limit: its own blocker, no hint."""
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=40)
    gpu_template(store, "many", 33)
    gpu_pod(store, "p", template="many")
    scheduler = Scheduler(store, recorder=Events())
    scheduler.run_once()
    assert "exceeds the claim limit of 32" in _condition(store, "p")  # upstream's words
    pod = store.get(Pod, "p")
    (group,) = explain_claims(scheduler, pod_claims(scheduler, pod), pod)
    assert [(b.kind, b.request, b.have, b.need) for b in group.blockers] == [("results limit", "gpus", 32, 33)]
    assert what_would_fit([group]) == []
