"""`kubedra explain podgroup NAME`: the gang's verdict in one line with the numbers (live,
from the GangScheduling plugin's own functions), its pods, its PodGroup's condition."""

from __future__ import annotations

import json
from pathlib import Path

from kubedra.api.codec import decode_object
from kubedra.cluster import SqliteStore
from kubedra.scheduler.explain import summarise_selector
from kubedra.scheduler.scheduler import Scheduler
from tests.cli.test_lint import kubedra
from tests.scheduler.cluster import gpu_template, new_store
from tests.scheduler.test_gang import member, pod_group, rack_node

RACK = "example.com/rack"
BIG_MEMORY = 'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))'


def racks(tmp_path: Path) -> SqliteStore:
    """rack-a: two nodes of 8 GPUs (16), rack-b: one (8)."""
    store = new_store(tmp_path)
    rack_node(store, "a1", "rack-a")
    rack_node(store, "a2", "rack-a")
    rack_node(store, "b1", "rack-b")
    return store


def big_memory_template(store: SqliteStore, name: str, count: int) -> None:
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu", "count": count,
            "selectors": [{"cel": {"expression": BIG_MEMORY}}]}}]}}}}).obj)  # fmt: skip


def explain(tmp_path: Path, *args: str) -> list[str]:
    run = kubedra("--store", str(tmp_path / "state.db"), "explain", *args)
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def test_a_gang_too_big_for_any_rack_says_so_with_the_numbers(tmp_path: Path) -> None:
    store = racks(tmp_path)
    big_memory_template(store, "six", 6)
    pod_group(store, "big", 3, key=RACK)  # 18 GPUs: no rack has them
    for i in range(3):
        member(store, f"w{i}", "big", "six")
    lines = explain(tmp_path, "podgroup", "big")
    assert lines[0] == (
        "podgroup default/big: unschedulable: needs 18 device(s) of class gpu "
        "(memory > 40Gi) in one example.com/rack; the largest rack has 16 free (rack-a)"
    )
    assert lines[1] == "pods: 3 (minCount 3, all in one example.com/rack)"
    assert lines[2:5] == ["  w0: pending", "  w1: pending", "  w2: pending"]
    assert lines[5] == "condition: none yet (the scheduler has not tried it)"
    # the scheduler agrees, and the condition it writes is shown
    Scheduler(store).run_once()
    lines = explain(tmp_path, "pg", "big")
    assert lines[0].startswith("podgroup default/big: unschedulable: needs 18 device(s)")
    assert lines[-1] == (
        "condition: PodGroupInitiallyScheduled=False (Unschedulable): a pod of the pod group "
        "cannot be placed: needs 18 device(s) of class gpu (memory > 40Gi) in one "
        "example.com/rack; the largest rack has 16 free (rack-a)"
    )
    report = json.loads("\n".join(explain(tmp_path, "podgroups", "big", "-o", "json")))
    assert report["state"] == "unschedulable" and report["minCount"] == 3
    assert [m["pod"] for m in report["members"]] == ["w0", "w1", "w2"]


def test_a_gang_that_fits_names_its_domain_then_where_it_was_bound(tmp_path: Path) -> None:
    store = racks(tmp_path)
    gpu_template(store, "two", 2)
    pod_group(store, "g", 4, key=RACK)  # 8 GPUs: rack-b is the best fit
    for i in range(4):
        member(store, f"w{i}", "g", "two")
    assert explain(tmp_path, "podgroup", "g")[0] == (
        "podgroup default/g: pending: fits in rack rack-b (best fit): needs 8 device(s) of "
        "class gpu in one example.com/rack; it has 8 free"
    )
    Scheduler(store).run_once()
    lines = explain(tmp_path, "podgroup", "g")
    assert lines[0] == (
        "podgroup default/g: scheduled: 4 of minCount 4 pod(s) bound in example.com/rack "
        "rack-b, on b1"
    )
    assert lines[2:6] == [f"  w{i}: on b1" for i in range(4)]
    assert lines[6] == (
        "condition: PodGroupInitiallyScheduled=True (Scheduled): 4 pod(s) of the pod group "
        "bound (minCount 4)"
    )


def test_a_gang_without_topology_counts_the_clusters_free_devices(tmp_path: Path) -> None:
    store = racks(tmp_path)
    gpu_template(store, "six", 6)
    pod_group(store, "huge", 5)  # 30 GPUs of 24
    for i in range(5):
        member(store, f"w{i}", "huge", "six")
    assert explain(tmp_path, "podgroup", "huge")[0] == (
        "podgroup default/huge: unschedulable: needs 30 device(s) of class gpu; "
        "the cluster has 24 free"
    )


def test_a_gang_short_of_pods_or_of_its_podgroup_waits(tmp_path: Path) -> None:
    store = racks(tmp_path)
    gpu_template(store, "two", 2)
    pod_group(store, "few", 3)
    member(store, "f0", "few", "two")
    member(store, "o0", "ghost", "two")
    assert explain(tmp_path, "podgroup", "few")[:3] == [
        "podgroup default/few: waiting for pods: has 1 of minCount 3 pod(s)",
        "pods: 1 (minCount 3)",
        "  f0: pending",
    ]
    assert explain(tmp_path, "pg", "ghost") == [
        "podgroup default/ghost: waiting for its PodGroup: 1 pod(s) name pod group ghost, "
        "which does not exist",
        "pods: 1 (no PodGroup)",
        "  o0: pending",
    ]


def test_a_missing_podgroup_is_an_error_naming_it(tmp_path: Path) -> None:
    racks(tmp_path)
    run = kubedra("--store", str(tmp_path / "state.db"), "explain", "podgroup", "nope")
    assert run.returncode == 1
    assert 'PodGroup "nope" not found' in run.stderr
    run = kubedra("--store", str(tmp_path / "state.db"), "explain", "node", "a1")
    assert run.returncode != 0 and "podgroup, pg" in run.stderr


def test_request_selectors_are_summarised() -> None:
    assert summarise_selector(BIG_MEMORY) == ["memory > 40Gi"]
    assert summarise_selector(
        'device.capacity["memory"].compareTo(quantity("80Gi")) >= 0 && '
        'device.attributes["gpu.nvidia.com"].productName == "H100"'
    ) == ["memory >= 80Gi", 'productName == "H100"']
    assert summarise_selector('device.driver == "gpu.nvidia.com"') == [
        'device.driver == "gpu.nvidia.com"'
    ]
