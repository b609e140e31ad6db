"""Explanations that point the right way (issue 38): "nearest" is the node with what the
claim needs (devices passing its selectors, then free ones), not the largest pool; each
number says what it counts; a claim no node could ever hold says so first, with the kind of
node that would. On real stores, through `explain_claims`, the FailedScheduling event and
the demo's entry point; the ranking itself on hand-made blockers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubedra.allocator import Blocker
from kubedra.api.codec import decode_object
from kubedra.api.resource import ResourceClaim
from kubedra.cli.cluster import create_nodes
from kubedra.cluster import SqliteStore
from kubedra.scheduler.explain import explain_claims, group_json, pod_claims, what_would_fit
from kubedra.scheduler.hints import hints
from kubedra.scheduler.scheduler import Scheduler
from tests.cli.test_lint import kubedra
from tests.scheduler.cluster import gpu_node, gpu_pod, new_store, user_claim
from tests.scheduler.test_cluster_mode import Events

H100 = 'device.attributes["gpu.nvidia.com"].productName.contains("H100")'


def _create(store: SqliteStore, doc: dict[str, Any]) -> None:
    store.create(decode_object(doc).obj)


def _claim(store: SqliteStore, name: str, cls: str, count: int, *selectors: str) -> None:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    _create(store, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}})


def _hints_for(store: SqliteStore, claim: str) -> list[str]:
    scheduler = Scheduler(store)
    return what_would_fit(explain_claims(scheduler, [store.get(ResourceClaim, claim)]))


def test_nearest_is_the_node_whose_devices_pass_the_selectors(tmp_path: Path) -> None:
    """Nine H100s: the A100 MIG node has as many GPUs of the class as an H100 node (8), but
    none is an H100; the H100 node is nearest, in `explain` and in the event alike."""
    store = new_store(tmp_path)
    create_nodes(store, [("h100x8", 1), ("a100-40x8-mig", 1), ("l4x4", 1)])
    _create(store, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nvidia-gpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com" && '
                                        'device.attributes["gpu.nvidia.com"].type == "gpu"'}}]}})
    _claim(store, "h100x9", "nvidia-gpu", 9, H100)
    scheduler = Scheduler(store)
    groups = explain_claims(scheduler, [store.get(ResourceClaim, "h100x9")])
    a100 = next(g for g in groups if g.nodes == ("a100-40x8-mig-0",))
    (b,) = a100.blockers
    assert b.detail == ("class nvidia-gpu admits 8 of the node's 212 device(s), 0 pass the "
                        "request's selectors, 9 needed")
    assert b.short == "8 devices of class nvidia-gpu, 0 pass the selectors, 9 needed"
    assert (b.matching, b.needed) == (0, 9)
    assert what_would_fit(groups) == [
        "default/h100x9: no node of the cluster can hold it, even with all devices free: it needs "
        "a node with 9 devices of class nvidia-gpu matching its selectors; nearest: h100x8-0: "
        "gpus: 8 devices of class nvidia-gpu, 9 needed"]
    # The scheduler diagnoses the same nodes: its event names the same nearest node.
    _create(store, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimName": "h100x9"}],
                             "containers": [{"name": "c", "resources": {"claims": [{"name": "gpus"}]}}]}})
    events = Events()
    Scheduler(store, recorder=events).run_once()
    (event,) = events.events
    assert event.note.endswith(
        "; nearest: h100x8-0: default/h100x9 gpus: 8 devices of class nvidia-gpu, 9 needed"), event.note
    assert "(gpus: 8 devices of class nvidia-gpu, 0 pass the selectors, 9 needed)" in event.note


def test_a_claim_no_node_could_hold_says_so_first_and_names_the_free_nearest(tmp_path: Path) -> None:
    """Sixteen GPUs on nodes of eight: said first, with the kind of node that would; of the
    two alike nodes the one with all eight free is nearest. JSON carries the same."""
    store = new_store(tmp_path)
    gpu_node(store, "n1")
    gpu_node(store, "n2")
    user_claim(store, "one")
    gpu_pod(store, "small", claim="one", nodeSelector={"kubernetes.io/hostname": "n1"})
    Scheduler(store).run_once()
    user_claim(store, "sixteen", count=16)
    scheduler = Scheduler(store)
    groups = explain_claims(scheduler, [store.get(ResourceClaim, "sixteen")])
    assert what_would_fit(groups) == [
        "default/sixteen: no node of the cluster can hold it, even with all devices free: it needs "
        "a node with 16 devices of class gpu; nearest: n2: gpus: 8 devices on the node, 16 needed"]
    blockers = {g.nodes: group_json(g)["blockers"] for g in groups}
    assert [(b["devicesMatching"], b["devicesUsable"], b["devicesNeeded"]) for b in blockers[("n1",)]] == [(8, 7, 16)]
    (n2,) = blockers[("n2",)]
    assert n2["fitsWithAllDevicesFree"] is False and n2["limit"] == "8 devices on the node, 16 needed"


def test_pod_filters_leave_nodes_unjudged_so_no_node_is_not_claimed(tmp_path: Path) -> None:
    """A node the pod's filters exclude was not asked about the claim: "nearest", not "no
    node of the cluster"."""
    from kubedra.api.core import Pod

    store = new_store(tmp_path)
    gpu_node(store, "n1")
    gpu_node(store, "n2", gpus=4)
    user_claim(store, "sixteen", count=16)
    gpu_pod(store, "p", claim="sixteen", nodeSelector={"kubernetes.io/hostname": "n2"})
    scheduler = Scheduler(store)
    pod = store.get(Pod, "p")
    assert what_would_fit(explain_claims(scheduler, pod_claims(scheduler, pod), pod)) == [
        "nearest: n2: default/sixteen gpus: 4 devices on the node, 16 needed"]


def _b(kind: str, have: int, need: int, short: str, **measures: Any) -> Blocker:
    return Blocker(kind, "c", "gpus", have, need, short, short, **measures)


def test_nearest_ranks_by_what_the_claim_needs_not_by_pool_size() -> None:
    big_pool = _b("in pools", 200, 201, "on the node", matching=0, usable=0, needed=9, fits_free=False)
    wrong_kind = _b("class selectors", 8, 9, "a100", matching=0, usable=0, needed=9, fits_free=False)
    busy = _b("class selectors", 8, 9, "h100 busy", matching=8, usable=7, needed=9, fits_free=False)
    free = _b("class selectors", 8, 9, "h100 free", matching=8, usable=8, needed=9, fits_free=False)
    nodes = [("big", [big_pool]), ("a100", [wrong_kind]), ("busy", [busy]), ("free", [free])]
    assert hints(nodes) == ["nearest: free: c gpus: h100 free"]
    # A node that could hold the claim once its devices are free beats any that never could.
    later = _b("free", 1, 9, "later", matching=9, usable=1, needed=9, fits_free=True)
    assert hints([*nodes, ("later", [later])]) == ["nearest: later: c gpus: later"]
    # Given every node, and none could ever: said first, with what it needs of a node.
    never = [(n, [_b(b.kind, b.have, b.need, b.short, matching=b.matching, usable=b.usable,
                     needed=9, fits_free=False, wants="9 devices of class gpu")]) for n, (b,) in nodes]
    assert hints(never, every_node=True) == [
        "c: no node of the cluster can hold it, even with all devices free: it needs a node with "
        "9 devices of class gpu; nearest: free: gpus: h100 free"]


def test_demo_train_16_names_the_node_with_all_eight_free(tmp_path: Path) -> None:
    run = kubedra("--store", str(tmp_path / "demo.db"), "demo")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    hint = lines[lines.index("what would make it fit:") + 1]
    assert hint.startswith("  default/train-16-gpus: no node of the cluster can hold it"), hint
    assert hint.endswith("; nearest: h100x8-1: gpus: 12 devices on the node, 8 of class "
                         "high-memory-gpu, 16 needed"), hint
    train = next(line for line in lines if line.startswith("train-16 "))
    assert "of 16 devices" not in train and "12 devices on the node, 8 of class" in train
