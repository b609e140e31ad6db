"""Workloads and PodGroups on the embedded store, as a 1.37 API server with kubedra's gates
holds them: defaults, the Priority admission of a new group, fields of gates that are off
dropped, the status subresource, the update rules; and the gang example through the CLI
(apply, get, describe, delete). tests/e2e/test_scheduling_differential.py checks the same
against kube-apiserver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object, to_dict
from kubedra.api.meta import KubeObject
from kubedra.api.scheduling import PodGroup, PodGroupStatus, Workload
from kubedra.cluster import SqliteStore
from kubedra.errors import ValidationError
from tests.api.manifests import DELETE, mutate, pod_group_doc, workload_doc
from tests.api.test_scheduling_validation import CONDITION
from tests.cli.test_lint import kubedra
from tests.conftest import REPO


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def obj(doc: dict[str, Any]) -> KubeObject:
    return decode_object(doc).obj


def test_a_new_pod_group_as_the_server_stores_it(store: SqliteStore) -> None:
    doc = mutate(mutate(pod_group_doc(), "spec.disruptionMode", DELETE),
                 "spec.preemptionPolicy", "Never")
    doc["status"] = {"conditions": [CONDITION]}
    created = store.create(obj(doc))
    spec = to_dict(created)["spec"]
    assert spec["disruptionMode"] == {"single": {}}  # the default
    assert spec["priority"] == 0  # Priority admission, no class
    assert "preemptionPolicy" not in spec  # PodGroupPreemptionPolicy is off: dropped
    assert isinstance(created, PodGroup) and created.status == PodGroupStatus()  # status reset
    assert created.metadata.generation is None  # upstream tracks no generation here
    assert store.get(PodGroup, "trainer-workers") == created


@pytest.mark.parametrize(("priority", "class_name", "message"), [
    (5, None, "Forbidden: priority set in the pod group (5) must match the priority computed "
              "(0) based on the priority class set in the spec"),
    (None, "system-node-critical", "Invalid value: 2000001000: must be less than or equal to "
                                   "1000000000"),
    (2_000_000_000, "system-cluster-critical", "Invalid value: 2000000000: must be less than or "
                                               "equal to 1000000000"),
])
def test_priority_admission_refuses(store: SqliteStore, priority: int | None,
                                    class_name: str | None, message: str) -> None:
    doc = pod_group_doc()
    doc["spec"] |= {k: v for k, v in (("priority", priority), ("priorityClassName", class_name))
                    if v is not None}
    with pytest.raises(ValidationError) as info:
        store.create(obj(doc))
    assert (info.value.first.path, info.value.first.message) == ("spec.priority", message)
    assert store.list(PodGroup) == []


def test_a_class_kubedra_cannot_resolve_is_kept_without_a_priority(store: SqliteStore) -> None:
    created = store.create(obj(mutate(pod_group_doc(), "spec.priorityClassName", "training")))
    assert isinstance(created, PodGroup)
    assert (created.spec.priority_class_name, created.spec.priority) == ("training", None)


def test_status_is_written_through_the_subresource_only(store: SqliteStore) -> None:
    created = store.create(obj(pod_group_doc()))
    status = msgspec.convert({"conditions": [CONDITION]}, PodGroupStatus)
    written = store.update_status(msgspec.structs.replace(created, status=status))
    grown = mutate(to_dict(written), "spec.schedulingPolicy.gang.minCount", 8)
    grown["status"] = {}
    updated = store.update(obj(grown))
    assert isinstance(updated, PodGroup) and updated.status == status  # an update keeps it
    assert updated.spec.scheduling_policy.gang is not None
    assert updated.spec.scheduling_policy.gang.min_count == 8


@pytest.mark.parametrize(("base", "path", "value", "where"), [
    (pod_group_doc, "spec.schedulingConstraints.topology.0.key", "zone", "spec.schedulingConstraints"),
    (pod_group_doc, "spec.schedulingPolicy", {"basic": {}}, "spec.schedulingPolicy.basic"),
    (workload_doc, "spec.podGroupTemplates.1", DELETE, "spec.podGroupTemplates"),
    (workload_doc, "spec.controllerRef.kind", "JobSet", "spec.controllerRef"),
])
def test_update_rules(store: SqliteStore, base: Any, path: str, value: Any, where: str) -> None:
    created = store.create(obj(base()))
    with pytest.raises(ValidationError) as info:
        store.update(obj(mutate(to_dict(created), path, value)))
    assert where in [p.path for p in info.value.problems]
    assert store.get(type(created), created.name) == created


def test_a_workload_keeps_its_templates_and_drops_composite_ones(store: SqliteStore) -> None:
    doc = mutate(workload_doc(), "spec.compositePodGroupTemplates",
                 [{"name": "all", "schedulingPolicy": {"basic": {}}}])
    created = store.create(obj(doc))
    assert isinstance(created, Workload)
    assert to_dict(created)["spec"] == workload_doc()["spec"]
    reordered = mutate(to_dict(created), "spec.podGroupTemplates",
                       list(reversed(workload_doc()["spec"]["podGroupTemplates"])))
    assert store.update(obj(reordered)).metadata.resource_version != created.metadata.resource_version


def test_the_gang_example_through_the_cli(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    example = str(REPO / "examples" / "gang-training")
    assert kubedra("lint", example).stdout == ""
    applied = kubedra("--store", db, "apply", "-f", example)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "deviceclass.resource.k8s.io/nvidia-gpu created",
        "resourceclaimtemplate.resource.k8s.io/two-gpus created",
        "workload.scheduling.k8s.io/trainer created",
        "podgroup.scheduling.k8s.io/trainer-workers created",
        *(f"pod/trainer-{i} created" for i in range(4)),
    ]
    again = kubedra("--store", db, "apply", "-f", example)
    assert again.stdout.count(" unchanged") == 8, again.stdout
    groups = kubedra("--store", db, "get", "pg", "-o", "wide").stdout.splitlines()
    assert groups[0].split() == ["NAME", "POLICY", "WORKLOAD", "STATUS", "AGE", "MIN", "TOPOLOGY"]
    row = groups[1].split()
    assert row[:4] == ["trainer-workers", "Gang", "trainer", "Pending"]
    assert row[5:] == ["4", "kubernetes.io/hostname"]
    workloads = kubedra("--store", db, "get", "workloads.v1beta1.scheduling.k8s.io")
    assert workloads.returncode == 0 and "trainer" in workloads.stdout, workloads.stderr
    described = kubedra("--store", db, "describe", "podgroup", "trainer-workers").stdout
    assert "Min Count:" in described and "kubernetes.io/hostname" in described, described
    pod = kubedra("--store", db, "get", "pod", "trainer-0", "-o",
                  "jsonpath={.spec.schedulingGroup.podGroupName}")
    assert pod.stdout == "trainer-workers"
    deleted = kubedra("--store", db, "delete", "-f", example)
    assert deleted.returncode == 0, deleted.stderr
    assert kubedra("--store", db, "get", "podgroups,workloads").stdout == ""
