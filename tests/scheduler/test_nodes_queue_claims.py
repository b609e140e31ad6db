"""Scheduler building blocks: node filters, the queue's order and backoff, generated claims."""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Node, Pod
from kubedra.api.resource import ResourceClaimTemplate
from kubedra.scheduler.claims import (
    POD_CLAIM_NAME_ANNOTATION,
    generated_claim,
    recorded_claim_name,
    with_claim_status,
)
from kubedra.scheduler.nodes import add_requests, filter_node, pod_requests
from kubedra.scheduler.queue import SchedulingQueue, pod_key
from tests.api.manifests import pod_doc, template_doc


def node(name: str = "n1", labels: dict[str, str] | None = None, taints: list[Any] | None = None,
         cpu: str = "8", memory: str = "32Gi", unschedulable: bool = False) -> Node:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": labels or {}},
                           "spec": {"taints": taints or []},
                           "status": {"allocatable": {"cpu": cpu, "memory": memory}}}
    if unschedulable:
        doc["spec"]["unschedulable"] = True
    obj = decode_object(doc).obj
    assert isinstance(obj, Node)
    return obj


def pod(**spec: Any) -> Pod:
    doc = pod_doc()
    doc["spec"].update(spec)
    obj = decode_object(doc).obj
    assert isinstance(obj, Pod)
    return obj


def requests(cpu: str, memory: str) -> list[dict[str, Any]]:
    return [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory},
                                          "claims": [{"name": "gpus"}]}}]


@pytest.mark.parametrize(("the_pod", "the_node", "reason"), [
    (pod(), node(), ""),
    (pod(nodeName="n2"), node(), "node(s) didn't match the requested node name"),
    (pod(nodeSelector={"zone": "a"}), node(labels={"zone": "b"}),
     "node(s) didn't match Pod's node affinity/selector"),
    (pod(nodeSelector={"zone": "a"}), node(labels={"zone": "a"}), ""),
    (pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
                              {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}),
     node(), ""),
    (pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}),
     node(), "node(s) didn't match Pod's node affinity/selector"),
    (pod(), node(taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
     "node(s) had untolerated taint {nvidia.com/gpu: NoSchedule}"),
    (pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
     node(taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]), ""),
    (pod(), node(taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]), ""),
    (pod(), node(unschedulable=True),
     "node(s) had untolerated taint {node.kubernetes.io/unschedulable: NoSchedule}"),
    (pod(containers=requests("16", "1Gi")), node(cpu="8"), "Insufficient cpu"),
    (pod(containers=requests("1", "64Gi")), node(memory="32Gi"), "Insufficient memory"),
])
def test_filter_node(the_pod: Pod, the_node: Node, reason: str) -> None:
    assert filter_node(the_pod, the_node, {}).reason == reason


def test_requests_count_against_what_bound_pods_use() -> None:
    used: dict[str, Any] = {}
    bound = pod(containers=requests("6", "1Gi"))
    add_requests(used, bound)
    assert str(used["cpu"]) == "6"
    assert filter_node(pod(containers=requests("2", "1Gi")), node(cpu="8"), used).fits
    assert filter_node(pod(containers=requests("3", "1Gi")), node(cpu="8"), used).reason == "Insufficient cpu"


def test_init_containers_count_by_their_maximum() -> None:
    p = pod(containers=requests("1", "1Gi"),
            initContainers=[{"name": "init", "resources": {"requests": {"cpu": "4"}}}])
    assert str(pod_requests(p)["cpu"]) == "4"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def named(name: str, priority: int = 0, created: str = "2026-01-01T00:00:00Z") -> Pod:
    doc = pod_doc()
    doc["metadata"].update(name=name, creationTimestamp=created)
    doc["spec"]["priority"] = priority
    obj = decode_object(doc).obj
    assert isinstance(obj, Pod)
    return obj


def test_queue_takes_priority_then_age() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add(named("old-low", 0, "2026-01-01T00:00:00Z"))
    q.add(named("new-high", 100, "2026-01-02T00:00:00Z"))
    q.add(named("old-high", 100, "2026-01-01T00:00:00Z"))
    order = [p.name for p in iter(q.pop, None)]
    assert order == ["old-high", "new-high", "old-low"]


def test_backoff_doubles_caps_and_expires() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    p = named("p")
    q.add(p)
    assert q.pop() == p
    waits = [q.unschedulable(p) for _ in range(6)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert q.pop() is None
    clock.now = 9.9
    assert q.pop() is None
    clock.now = 10.0
    assert q.pop() == p
    # A pod retried after every release may fail thousands of times: the wait stays capped.
    assert {q.unschedulable(p) for _ in range(3000)} == {10.0}


def test_relevant_change_wakes_backed_off_pods() -> None:
    q = SchedulingQueue(clock=Clock())
    p = named("p")
    q.add(p)
    q.pop()
    q.unschedulable(p)
    assert q.pop() is None and q.waiting == 1
    assert q.wake_all() == 1
    assert q.pop() == p
    q.scheduled(pod_key(p))
    assert len(q) == 0


def test_generated_claim_follows_upstream_naming_and_ownership() -> None:
    template = decode_object(template_doc()).obj
    assert isinstance(template, ResourceClaimTemplate)
    doc = pod_doc()
    doc["metadata"]["uid"] = "pod-uid-1"
    p = decode_object(doc).obj
    assert isinstance(p, Pod)
    entry = p.spec.resource_claims[0]
    claim = generated_claim(p, entry, template)
    assert claim.metadata.generate_name == "trainer-gpus-"
    assert claim.metadata.namespace == "default"
    assert claim.metadata.annotations[POD_CLAIM_NAME_ANNOTATION] == "gpus"
    assert claim.metadata.labels == {"app": "train"}
    (owner,) = claim.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "trainer", "pod-uid-1", True)
    assert claim.spec == template.spec.spec
    assert recorded_claim_name(p, entry) is None
    recorded = with_claim_status(p, "gpus", "trainer-gpus-x7k2p")
    assert recorded_claim_name(recorded, entry) == "trainer-gpus-x7k2p"


def test_long_names_leave_room_for_the_suffix() -> None:
    template = decode_object(template_doc()).obj
    assert isinstance(template, ResourceClaimTemplate)
    doc = pod_doc()
    doc["metadata"]["name"] = "p" * 60
    p = decode_object(doc).obj
    assert isinstance(p, Pod)
    entry = p.spec.resource_claims[0]
    prefix = generated_claim(p, entry, template).metadata.generate_name or ""
    assert len(prefix) + 5 <= 63
    # As upstream's controller: both names cut in proportion, the entry's kept in part.
    pod_part, _, entry_part = prefix.rpartition("-")
    assert pod_part and set(pod_part) == {"p"} and entry_part and entry.name.startswith(entry_part)
