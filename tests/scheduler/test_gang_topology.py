"""The topology domain of a gang, packed node by node: a domain with enough free devices
but too few nodes that take a whole member is not chosen; devices count only when they
pass the request's own selectors; a domain where the gang failed at placement is left
out of its next choice; `kubedra explain podgroup` and the condition say the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Node, Pod
from kubedra.api.quantity import Quantity
from kubedra.api.resource import ResourceClaim, ResourceClaimStatus
from kubedra.cluster import SqliteStore
from kubedra.scheduler.explain import explain_gang
from kubedra.scheduler.plugins.gang import topology
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store, user_claim
from tests.scheduler.test_gang import Clock, Events, bound, condition, pod_group
from tests.scheduler.test_gang_claims import member
from tests.scheduler.test_verify import results

RACK = "example.com/rack"
BIG_MEMORY = 'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))'


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return new_store(tmp_path)


def rack_node(store: SqliteStore, name: str, rack: str, **extra: Any) -> None:
    gpu_node(store, name, gpus=8, labels={RACK: rack}, **extra)


def busy_pod(store: SqliteStore, name: str, node: str, cpu: str) -> None:
    """A pod of someone else's bound to `node`, requesting `cpu`."""
    store.create(decode_object({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [
            {"name": "main", "resources": {"requests": {"cpu": cpu}}}]}}).obj)  # fmt: skip


def asking(store: SqliteStore, name: str, group: str, template: str, **requests: str) -> None:
    """A member of `group` (its claim from `template`) with these container requests."""
    resources: dict[str, Any] = {"claims": [{"name": "gpus"}], "requests": requests}
    gpu_pod(store, name, template=template, schedulingGroup={"podGroupName": group},
            containers=[{"name": "main", "resources": resources}])


def hold(store: SqliteStore, node: str, count: int) -> None:
    """`count` of the node's GPUs held by a claim of someone else's."""
    name = f"held-{node}"
    user_claim(store, name, count)
    claim = store.get(ResourceClaim, name)
    allocation = results(*(f"{node}/gpu-{i}" for i in range(count)))
    store.update_status(msgspec.structs.replace(
        claim, status=ResourceClaimStatus(allocation=allocation)))


def fragmented_racks(store: SqliteStore, scale: int = 1) -> None:
    """rack-a: 60 whole nodes and 22 with 3 GPUs free (546 free); rack-b: 72 whole nodes
    (576 free). 64 pods of 8 GPUs: rack-a has the devices (and fewer spare) but not the
    nodes."""
    for i in range(60 // scale):
        rack_node(store, f"a{i:03}", "rack-a")
    for i in range(22 // scale):
        rack_node(store, f"h{i:03}", "rack-a")
        hold(store, f"h{i:03}", 5)
    for i in range(72 // scale):
        rack_node(store, f"b{i:03}", "rack-b")


def test_a_domain_with_the_devices_but_not_the_nodes_is_not_chosen(store: SqliteStore) -> None:
    fragmented_racks(store)
    gpu_template(store, "eight", 8)
    pod_group(store, "big", 64, key=RACK)
    for i in range(64):
        member(store, f"w{i:02}", "big", "eight")
    scheduler = Scheduler(store)
    scheduler.refresh()
    pods = [p for p in store.list(Pod)]
    choice = topology.choose(scheduler, pods, RACK)
    assert choice.fits["rack-a"].free["gpu"] == 546
    assert choice.fits["rack-a"].members == 60  # 546 free, room for 60 pods of 8
    assert choice.fits["rack-b"].members == 64 and choice.fits["rack-b"].free["gpu"] == 576
    assert choice.domain == "rack-b"
    # rack-b gone: the refusal names the fragmentation
    only_a = topology.choose(scheduler, pods, RACK, failed={"rack-b": 576})
    assert only_a.domain is None
    assert only_a.reason == (
        "needs 512 device(s) of class gpu in one example.com/rack; the largest rack has "
        "576 free (rack-b); failed at placement: rack-b")


def test_the_scheduler_places_a_gang_where_its_pods_fit_not_where_its_devices_do(
    store: SqliteStore,
) -> None:
    # rack-a: 6 whole nodes + 2 with 3 free = 54 free; rack-b: 7 whole = 56; 7 pods x 8
    for i in range(6):
        rack_node(store, f"a{i}", "rack-a")
    for i in range(2):
        rack_node(store, f"h{i}", "rack-a")
        hold(store, f"h{i}", 5)
    rack_node(store, "a6", "rack-a")
    hold(store, "a6", 6)  # 2 more free: 56 in rack-a, as in rack-b, 7 whole nodes there
    for i in range(8):
        rack_node(store, f"b{i}", "rack-b")
    gpu_template(store, "eight", 8)
    pod_group(store, "g", 7, key=RACK)
    for i in range(7):
        member(store, f"w{i}", "g", "eight")
    Scheduler(store).run_once()
    placed = bound(store)
    assert len(placed) == 7 and all(n.startswith("b") for n in placed.values())


def big_memory_template(store: SqliteStore, name: str, count: int) -> None:
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu", "count": count,
            "selectors": [{"cel": {"expression": BIG_MEMORY}}]}}]}}}}).obj)  # fmt: skip


def test_devices_count_only_when_they_pass_the_requests_selectors(store: SqliteStore) -> None:
    rack_node(store, "a1", "rack-a")  # 80Gi GPUs: 16 in rack-a
    rack_node(store, "a2", "rack-a")
    rack_node(store, "b1", "rack-b", memory="40Gi")  # 8, the best fit by class alone
    big_memory_template(store, "two", 2)
    pod_group(store, "g", 4, key=RACK)
    for i in range(4):
        member(store, f"w{i}", "g", "two")
    scheduler = Scheduler(store)
    scheduler.refresh()
    choice = topology.choose(scheduler, store.list(Pod), RACK)
    assert choice.fits["rack-b"].free["gpu"] == 0 and choice.domain == "rack-a"
    assert explain_gang(scheduler, "default", "g").verdict == (
        "pending: fits in rack rack-a (best fit): needs 8 device(s) of class gpu "
        "(memory > 40Gi) in one example.com/rack; it has 16 free")
    scheduler.run_once()
    assert set(bound(store).values()) <= {"a1", "a2"} and len(bound(store)) == 4


def test_a_refusal_reads_the_same_in_the_condition_and_in_explain(store: SqliteStore) -> None:
    rack_node(store, "a1", "rack-a")
    rack_node(store, "b1", "rack-b", memory="40Gi")
    big_memory_template(store, "six", 6)
    pod_group(store, "g", 2, key=RACK)  # 12 big GPUs: rack-a has 8
    for i in range(2):
        member(store, f"w{i}", "g", "six")
    scheduler = Scheduler(store)
    why = ("needs 12 device(s) of class gpu (memory > 40Gi) in one example.com/rack; "
           "the largest rack has 8 free (rack-a)")
    assert explain_gang(scheduler, "default", "g").verdict == f"unschedulable: {why}"
    scheduler.run_once()
    assert condition(store, "g") == (
        "False", "Unschedulable", f"a pod of the pod group cannot be placed: {why}")


def test_a_domain_that_fails_at_placement_is_left_for_the_next(store: SqliteStore) -> None:
    """rack-b is the best fit by devices, but a request's constraint (the allocator's, not
    the packing's) fails there: the gang fails there once, and its next attempt goes to
    rack-a."""
    rack_node(store, "a1", "rack-a")  # 2 NVLink domains of 4 GPUs
    rack_node(store, "a2", "rack-a")
    rack_node(store, "b1", "rack-b", domains=8)  # 8 GPUs, each its own NVLink domain
    gpu_template(store, "four", 4, constraint="gpu.nvidia.com/nvlinkDomain")
    pod_group(store, "g", 2, key=RACK)
    for i in range(2):
        member(store, f"w{i}", "g", "four")
    clock = Clock()
    scheduler = Scheduler(store, clock=clock)
    scheduler.run_once()
    assert bound(store) == {}
    assert condition(store, "g")[0] == "False"
    for _ in range(5):
        clock.now += 60
        scheduler.run_once()
        if bound(store):
            break
    assert set(bound(store)) == {"w0", "w1"} and set(bound(store).values()) <= {"a1", "a2"}


def test_a_rack_with_the_gpus_but_not_the_cpu_is_not_chosen(store: SqliteStore) -> None:
    """rack-a has the GPUs (and the fewest spare: the best fit by devices) but its nodes
    lack the CPU: a1 has 32 CPUs, a2 64 of which a bound pod requests 56. The gang goes to
    rack-b at its first attempt, with no failure in between."""
    rack_node(store, "a1", "rack-a", cpu="32")
    rack_node(store, "a2", "rack-a")
    busy_pod(store, "busy", "a2", cpu="56")
    for i in range(3):
        rack_node(store, f"b{i}", "rack-b")
    gpu_template(store, "two", 2)
    pod_group(store, "g", 4, key=RACK)
    for i in range(4):
        member(store, f"w{i}", "g", "two", cpu="16")
    events = Events()
    scheduler = Scheduler(store, recorder=events)
    scheduler.refresh()
    members = [p for p in store.list(Pod) if p.name.startswith("w")]
    choice = topology.choose(scheduler, members, RACK)
    rack_a = choice.fits["rack-a"]
    assert rack_a.free["gpu"] == 16 and rack_a.members == 2  # a1 takes 2; a2 none
    assert rack_a.short["Insufficient cpu"] > 0
    assert choice.fits["rack-b"].members == 4 and choice.domain == "rack-b"
    scheduler.run_once()
    placed = bound(store)
    assert len(placed) == 5 and {placed[f"w{i}"][0] for i in range(4)} == {"b"}
    assert [e.reason for e in events.events if e.type == "Warning"] == []
    assert any(e.reason == "Scheduled" for e in events.events)
    assert condition(store, "g")[0] == "True"


def test_a_cpu_shortfall_is_refused_with_the_cpu(store: SqliteStore) -> None:
    """Both racks have the GPUs for 4 pods of 2 GPUs; neither has 4 x 16 CPUs: the refusal
    names the CPU, in explain and in the PodGroup's condition alike."""
    rack_node(store, "a1", "rack-a", cpu="32")  # 2 pods of 16 CPUs
    rack_node(store, "b1", "rack-b", cpu="16")  # 1
    gpu_template(store, "two", 2)
    pod_group(store, "g", 4, key=RACK)
    for i in range(4):
        member(store, f"w{i}", "g", "two", cpu="16")
    scheduler = Scheduler(store)
    why = "needs 4 pod(s) of 16 CPU in one example.com/rack; the largest rack takes 2 (rack-a)"
    assert explain_gang(scheduler, "default", "g").verdict == f"unschedulable: {why}"
    scheduler.run_once()
    assert bound(store) == {}
    assert condition(store, "g") == (
        "False", "Unschedulable", f"a pod of the pod group cannot be placed: {why}")


def test_a_gang_without_devices_is_packed_by_its_cpu(store: SqliteStore) -> None:
    """Pods that claim no devices still need their CPU in one rack: rack-a's node takes
    two of 16 CPUs, rack-b's one; three are refused with the CPU."""
    rack_node(store, "a1", "rack-a", cpu="32")
    rack_node(store, "b1", "rack-b", cpu="16")
    pod_group(store, "g", 3, key=RACK)
    for i in range(3):
        store.create(decode_object({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"w{i}", "namespace": "default"},
            "spec": {"schedulingGroup": {"podGroupName": "g"}, "containers": [
                {"name": "main", "resources": {"requests": {"cpu": "16"}}}]}}).obj)  # fmt: skip
    scheduler = Scheduler(store)
    scheduler.refresh()
    pods = store.list(Pod)
    assert topology.choose(scheduler, pods[:2], RACK).domain == "rack-a"
    choice = topology.choose(scheduler, pods, RACK)
    why = "needs 3 pod(s) of 16 CPU in one example.com/rack; the largest rack takes 2 (rack-a)"
    assert choice.domain is None and choice.reason == why
    # explain says the same, although the gang claims no devices
    assert explain_gang(scheduler, "default", "g").verdict == f"unschedulable: {why}"


def test_a_device_shortfall_keeps_the_device_wording_when_cpu_is_short_too(
    store: SqliteStore,
) -> None:
    """No rack has the GPUs (12 wanted, 8 per rack): the devices are named, not the CPU
    that is short as well."""
    rack_node(store, "a1", "rack-a", cpu="16")
    rack_node(store, "b1", "rack-b", cpu="16")
    gpu_template(store, "six", 6)
    pod_group(store, "g", 2, key=RACK)
    for i in range(2):
        member(store, f"w{i}", "g", "six", cpu="16")
    scheduler = Scheduler(store)
    assert explain_gang(scheduler, "default", "g").verdict == (
        "unschedulable: needs 12 device(s) of class gpu in one example.com/rack; the "
        "largest rack has 8 free (rack-b)")


def test_memory_and_extended_resources_count_too(store: SqliteStore) -> None:
    """Memory (512Gi per node) and an extended resource only b1 offers: two members asking
    300Gi each need two nodes, so not rack-c's one (the best fit by devices); a member
    asking example.com/nic fits only on b1, so only in rack-b."""
    for name, rack in (("a1", "rack-a"), ("a2", "rack-a"), ("b1", "rack-b"), ("b2", "rack-b")):
        rack_node(store, name, rack)
    rack_node(store, "c1", "rack-c")
    node = store.get(Node, "b1")
    assert node.status is not None
    allocatable = {**node.status.allocatable, "example.com/nic": Quantity.parse("1")}
    store.update_status(msgspec.structs.replace(
        node, status=msgspec.structs.replace(node.status, allocatable=allocatable)))
    gpu_template(store, "two", 2)
    pod_group(store, "big", 2, key=RACK)
    for i in range(2):
        asking(store, f"m{i}", "big", "two", memory="300Gi")
    pod_group(store, "nic", 2, key=RACK)
    asking(store, "n0", "nic", "two", **{"example.com/nic": "1"})
    asking(store, "n1", "nic", "two")
    scheduler = Scheduler(store)
    scheduler.refresh()
    pods = {p.name: p for p in store.list(Pod)}
    big = topology.choose(scheduler, [pods["m0"], pods["m1"]], RACK)
    assert big.fits["rack-c"].members == 1 and big.fits["rack-c"].short["Insufficient memory"]
    assert big.domain == "rack-a"
    nic = topology.choose(scheduler, [pods["n0"], pods["n1"]], RACK)
    assert nic.fits["rack-c"].members == 1 and nic.fits["rack-a"].members == 1
    assert nic.fits["rack-a"].short["Insufficient example.com/nic"] > 0
    assert nic.domain == "rack-b"
    scheduler.run_once()
    placed = bound(store)
    assert placed["n0"] == "b1" and placed["n1"] in {"b1", "b2"}
    assert {placed["m0"], placed["m1"]} == {"a1", "a2"}


def all_template(store: SqliteStore, name: str) -> None:
    """One request for all the node's GPUs of more than 40Gi (`allocationMode: All`)."""
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu", "allocationMode": "All",
            "selectors": [{"cel": {"expression": BIG_MEMORY}}]}}]}}}}).obj)  # fmt: skip


def test_an_all_request_needs_every_matching_device_of_a_node_free(store: SqliteStore) -> None:
    """Members asking for all of a node's big GPUs: a1 has one held (it cannot take one),
    rack-c's GPUs are too small (none matching: none taken); rack-b's two whole nodes take
    both members, one each."""
    rack_node(store, "a1", "rack-a")
    hold(store, "a1", 1)
    rack_node(store, "a2", "rack-a")
    rack_node(store, "b1", "rack-b")
    rack_node(store, "b2", "rack-b")
    rack_node(store, "c1", "rack-c", memory="40Gi")
    rack_node(store, "c2", "rack-c", memory="40Gi")
    all_template(store, "all")
    pod_group(store, "g", 2, key=RACK)
    for i in range(2):
        member(store, f"w{i}", "g", "all")
    scheduler = Scheduler(store)
    scheduler.refresh()
    choice = topology.choose(scheduler, store.list(Pod), RACK)
    assert choice.fits["rack-a"].members == 1  # a2 only: a1's 7 free are not all
    assert choice.fits["rack-a"].free["gpu"] == 15
    assert choice.fits["rack-c"].members == 0
    assert choice.fits["rack-b"].members == 2 and choice.domain == "rack-b"
    assert explain_gang(scheduler, "default", "g").verdict == (
        "pending: fits in rack rack-b (best fit): needs all device(s) of class gpu "
        "(memory > 40Gi) on each of 2 node(s) in one example.com/rack; it has 16 free")
    refused = topology.choose(scheduler, store.list(Pod), RACK, failed={"rack-b": 16})
    assert refused.domain is None and refused.reason == (
        "needs all device(s) of class gpu (memory > 40Gi) on each of 2 node(s) in one "
        "example.com/rack; the largest rack has 16 free (rack-b); failed at placement: rack-b")
    scheduler.run_once()
    assert sorted(bound(store).values()) == ["b1", "b2"]


def test_claims_each_named_by_one_member_are_their_own(store: SqliteStore) -> None:
    """Two members, each naming a claim of its own (not a template): the gang needs 4 GPUs
    on each of two nodes, not 8 on one (a claim is shared only when several members name
    it)."""
    rack_node(store, "n1", "rack-a")
    rack_node(store, "n2", "rack-a")
    hold(store, "n1", 4)
    hold(store, "n2", 4)
    pod_group(store, "pair", 2, key=RACK)
    for i in (1, 2):
        user_claim(store, f"own-{i}", 4)
        gpu_pod(store, f"w{i}", claim=f"own-{i}", schedulingGroup={"podGroupName": "pair"})
    scheduler = Scheduler(store)
    scheduler.run_once()
    assert sorted(bound(store)) == ["w1", "w2"]
    assert sorted(bound(store).values()) == ["n1", "n2"]
