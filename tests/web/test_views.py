"""The dashboard's views on real stores: device states, filters, explanations, fragmentation."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Namespace, Pod
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cli.cluster import create_nodes
from kubedra.cluster import SqliteStore
from kubedra.errors import NotFound
from kubedra.scheduler.scheduler import Scheduler
from kubedra.web.facts import Facts
from kubedra.web.fleet import fleet_view
from kubedra.web.fragmentation import History, measure
from kubedra.web.mirror import Mirror
from kubedra.web.pending import pending_view
from kubedra.web.snapshot import ReadOnly, SnapshotStore
from kubedra.web.workloads import claim_view, claims_view, pods_view
from tests.cli.test_lint import kubedra
from tests.conftest import REPO
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store

H100 = "NVIDIA H100 80GB HBM3"


def facts(store: SqliteStore) -> Facts:
    return Facts(Mirror(store).sync().snapshot())


def devices(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for g in view["groups"] for n in g["nodes"] for d in n["devices"]]


def create(store: SqliteStore, doc: dict[str, Any]) -> Any:
    return store.create(decode_object(doc).obj)


def allocate_by_hand(store: SqliteStore, name: str, results: list[dict[str, Any]]) -> None:
    """A claim whose status holds `results` (as a scheduler or controller would write it)."""
    claim = create(store, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
    })
    status = decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "status": {"allocation": {"devices": {"results": results}}},
    }).obj
    assert isinstance(status, ResourceClaim)
    store.update_status(msgspec.structs.replace(claim, status=status.status))


@pytest.fixture
def catalog(tmp_path: Path) -> SqliteStore:
    """Two H100 nodes and one A100 MIG node from the catalog, two pods placed."""
    store = new_store(tmp_path)
    create_nodes(store, [("h100x8", 2), ("a100-40x8-mig", 1)])
    gpu_template(store, "two", 2)
    gpu_pod(store, "a", template="two", nodeSelector={"node.kubernetes.io/instance-type": "p5.48xlarge"})
    gpu_pod(store, "b", template="two", nodeSelector={"node.kubernetes.io/instance-type": "p5.48xlarge"})
    Scheduler(store).run_once()
    return store


def test_fleet_counts_every_device_once_and_the_held_ones_as_the_claims_say(catalog: SqliteStore) -> None:
    view = fleet_view(facts(catalog))
    held = {f"{r.driver}/{r.pool}/{r.device}" for c in catalog.list(ResourceClaim)
            for r in (c.status.allocation.devices.results if c.status and c.status.allocation else ())}
    in_slices = sum(len(s.spec.devices) for s in catalog.list(ResourceSlice))
    shown = devices(view)
    assert len(held) == 4 and view["summary"]["devices"] == len(shown) == in_slices
    assert {f"{d['driver']}/{d['pool']}/{d['name']}" for d in shown if d["state"] == "allocated"} == held
    assert view["summary"]["allocated"] == 4 and view["summary"]["free"] == in_slices - 4
    assert [g["name"] for g in view["groups"]] == [
        "NVIDIA A100-SXM4-40GB · p4d.24xlarge", f"{H100} · p5.48xlarge"]
    assert all(d["holders"] for d in shown if d["state"] == "allocated")


def test_class_filter_admits_exactly_what_its_cel_admits(catalog: SqliteStore) -> None:
    create(catalog, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h100"},
                     "spec": {"selectors": [{"cel": {"expression": f'device.attributes["gpu.nvidia.com"].productName == "{H100}"'}}]}})
    view = fleet_view(facts(catalog), class_name="h100")
    admitted = [d for d in devices(view) if d["admitted"]]
    assert view["summary"]["admitted"] == len(admitted) == 16
    assert {d["product"] for d in admitted} == {H100}
    # the NICs have no gpu.nvidia.com attributes: the selector fails on them (counted, not admitted)
    nics = sum(d["kind"] == "nic" for d in devices(view))
    assert view["filter"] == {"label": "DeviceClass h100", "error": None, "deviceErrors": nics} and nics == 12
    assert all(d["admitted"] is None for d in devices(fleet_view(facts(catalog))))


def test_class_filter_reports_a_bad_class_instead_of_failing(catalog: SqliteStore) -> None:
    create(catalog, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "broken"},
                     "spec": {"selectors": [{"cel": {"expression": "device.nope("}}]}})
    broken = fleet_view(facts(catalog), class_name="broken")
    assert broken["filter"]["error"].startswith("CEL: ") and broken["summary"]["admitted"] == 0
    missing = fleet_view(facts(catalog), class_name="absent")
    assert missing["filter"]["error"] == "DeviceClass absent not found"


def test_pod_filter_admits_the_devices_its_requests_select(catalog: SqliteStore) -> None:
    gpu_template(catalog, "nine", 9)
    gpu_pod(catalog, "big", template="nine")
    view = fleet_view(facts(catalog), pod="default/big")
    admitted = [d for d in devices(view) if d["admitted"]]
    # the class `gpu` selects every gpu.nvidia.com device: the H100s and the MIG node's devices
    assert {d["driver"] for d in admitted} == {"gpu.nvidia.com"}
    assert sum(d["state"] == "allocated" for d in admitted) == 4  # refused: held by a and b
    assert fleet_view(facts(catalog), pod="default/ghost")["filter"]["error"] == 'Pod "ghost" not found'


def test_a_mig_slice_blocks_its_whole_gpu_and_overlapping_slices(catalog: SqliteStore) -> None:
    slices = [s for s in catalog.list(ResourceSlice) if s.spec.node_name == "a100-40x8-mig-0"
              and any(d.consumes_counters for d in s.spec.devices)]
    pool = slices[0].spec.pool.name
    allocate_by_hand(catalog, "mig", [{"request": "r", "driver": "gpu.nvidia.com", "pool": pool,
                                        "device": "gpu-0-mig-1g5gb-19-0"}])
    view = fleet_view(facts(catalog))
    node = next(n for g in view["groups"] for n in g["nodes"] if n["name"] == "a100-40x8-mig-0")
    by_name = {d["name"]: d for d in node["devices"]}
    assert by_name["gpu-0-mig-1g5gb-19-0"]["state"] == "allocated"
    assert by_name["gpu-0"]["state"] == "blocked"  # the whole GPU needs every memory slice
    assert by_name["gpu-0-mig-7g40gb-0-0"]["state"] == "blocked"
    assert by_name["gpu-0-mig-1g5gb-19-1"]["state"] == "free"  # another memory slice
    assert by_name["gpu-1"]["state"] == "free"
    parent = by_name["gpu-0"]["parent"]
    assert 0 < node["partitions"][parent] < 1 and node["partitions"][by_name["gpu-1"]["parent"]] == 0
    assert 0 < node["fill"] < 1 / 8


def test_fleet_counts_what_an_operator_counts(catalog: SqliteStore) -> None:
    """The header used to count device entries: every MIG placement a device, NICs too
    (496 devices / 463 free on a 72-GPU cluster). Accelerators count once each, a MIG
    GPU too, as the fragmentation page counts them; MIG partitions in use and NICs apart."""
    slices = [s for s in catalog.list(ResourceSlice) if s.spec.node_name == "a100-40x8-mig-0"
              and any(d.consumes_counters for d in s.spec.devices)]
    pool = slices[0].spec.pool.name
    allocate_by_hand(catalog, "mig", [{"request": "r", "driver": "gpu.nvidia.com", "pool": pool,
                                        "device": "gpu-0-mig-1g5gb-19-0"}])
    allocate_by_hand(catalog, "whole", [{"request": "r", "driver": "gpu.nvidia.com", "pool": pool, "device": "gpu-1"}])
    f = facts(catalog)
    s = fleet_view(f)["summary"]
    assert s["devices"] > 200  # the slices' entries: 8 A100s offer dozens of placements each
    assert s["accelerators"] == {"total": 24, "gpu": 24, "tpu": 0, "allocated": 5, "partial": 1,
                                 "free": 18, "tainted": 0, "unhealthy": 0}
    assert (s["partitionsInUse"], s["partitionable"]) == (1, 8)
    assert s["nics"] == {"total": 12, "inUse": 0}
    assert measure(f)["accelerators"] == s["accelerators"]["total"]
    node = next(n for g in fleet_view(f)["groups"] for n in g["nodes"] if n["name"] == "a100-40x8-mig-0")
    assert (node["accelerators"], node["inUse"]) == (8, 2)


def test_an_extended_resource_claim_names_its_pod(catalog: SqliteStore) -> None:
    """`nvidia.com/gpu: 1` served by a DeviceClass: the claim the scheduler made for it is
    in the pod's status, not its spec; both lists tie them."""
    from kubedra.api.loader import load_paths

    for loaded in load_paths([str(REPO / "examples" / "extended-resource" / "manifests.yaml")]).objects:
        catalog.create(loaded.obj)
    Scheduler(catalog).run_once()
    f = facts(catalog)
    claim = next(c for c in claims_view(f)["claims"] if c["name"].startswith("legacy-cuda-job-extended-resources-"))
    assert claim["pods"] == ["legacy-cuda-job"] and claim["extendedResources"] is True
    pod = next(p for p in pods_view(f)["pods"] if p["name"] == "legacy-cuda-job")
    assert pod["claims"] == [claim["name"]]
    page = claim_view(f, "default", claim["name"])
    assert page["pods"] == ["legacy-cuda-job"] and page["extendedResources"] is True
    assert all(c["extendedResources"] is False for c in claims_view(f)["claims"] if c["name"] != claim["name"])


def test_taint_rules_and_slice_taints_mark_devices_tainted(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    create(store, {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "bad"},
                   "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-2"},
                            "taint": {"key": "health", "value": "xid-79", "effect": "NoSchedule"}}})
    view = fleet_view(facts(store))
    tainted = [d for d in devices(view) if d["tainted"]]
    assert [d["name"] for d in tainted] == ["gpu-2"] and view["summary"]["tainted"] == 1
    assert tainted[0]["taints"] == ["health=xid-79:NoSchedule"] and tainted[0]["state"] == "free"


def test_shared_device_fill_is_its_consumed_capacity(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4, memory="80Gi")
    allocate_by_hand(store, "s1", [{"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0",
                                    "shareID": "a", "consumedCapacity": {"memory": "20Gi"}}])
    allocate_by_hand(store, "s2", [{"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0",
                                    "shareID": "b", "consumedCapacity": {"memory": "40Gi"}}])
    f = facts(store)
    gpu0 = next(d for d in devices(fleet_view(f)) if d["name"] == "gpu-0")
    assert gpu0["state"] == "shared" and gpu0["fill"] == 0.75
    assert sorted(gpu0["holders"]) == ["default/s1", "default/s2"]
    # FGD with no pods: one whole-GPU task; the shared GPU's free quarter is what it cannot use
    now = measure(f)
    assert now["accelerators"] == 4
    assert now["allocation"] == pytest.approx(750 / 4000)
    assert now["fragmentation"] == pytest.approx(250 / 4000)
    assert now["mix"] == [{"devices": 1, "milli": 1000, "cpuMilli": 0, "share": 1.0}]


def test_fragmentation_uses_the_pods_as_the_workload(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    gpu_template(store, "two", 2)
    gpu_pod(store, "p", template="two")
    Scheduler(store).run_once()
    now = measure(facts(store))
    # two GPUs left on the node: a two-GPU task fits there, so nothing is fragmented
    assert now["allocation"] == pytest.approx(0.5) and now["fragmentation"] == 0
    assert now["mix"] == [{"devices": 2, "milli": 1000, "cpuMilli": 0, "share": 1.0}]


def test_pending_pods_get_the_funnel_and_the_blocker(catalog: SqliteStore) -> None:
    gpu_template(catalog, "nine", 9)
    gpu_pod(catalog, "big", template="nine", nodeSelector={"node.kubernetes.io/instance-type": "p5.48xlarge"})
    gpu_pod(catalog, "orphan", claim="missing")
    view = pending_view(facts(catalog))
    pods = {p["name"]: p for p in view["pods"]}
    assert view["total"] == 2 and set(pods) == {"big", "orphan"}
    assert pods["orphan"]["error"] == 'ResourceClaim "missing" not found'
    big = pods["big"]
    assert big["fits"] == 0
    h100 = next(g for g in big["groups"] if "h100x8-0" in g["nodes"])
    assert set(h100["nodes"]) <= {"h100x8-0", "h100x8-1"}
    # the claim is not generated yet: named by its prefix, never "default/"
    assert h100["blocker"] == "default/big-gpus- gpus: class gpu admits 8 of the node's 12 device(s), 9 needed"
    assert [b["kind"] for b in h100["blockers"]] == ["class selectors"]
    mig = next(g for g in big["groups"] if g["nodes"] == ["a100-40x8-mig-0"])
    assert mig["blocker"] == mig["summary"] and "selector" in mig["summary"] and not mig["requests"]
    (gpus,) = h100["requests"]
    assert list(gpus["funnel"].items())[:2] == [("in pools", 12), ("class selectors", 8)]
    assert gpus["bottleneck"] == "class selectors"
    assert big["whatWouldFit"] and big["whatWouldFit"][0].startswith("nearest: h100x8-")
    limited = pending_view(facts(catalog), limit=1)
    assert limited["explained"] == 1 and "groups" not in limited["pods"][1]


def test_pending_pod_says_what_kubedra_explain_says(catalog: SqliteStore) -> None:
    """One source of truth: the dashboard's groups, blockers and hints are `kubedra explain
    pod -o json`'s, through the real entry point on the same store."""
    node = catalog.get(Pod, "a").spec.node_name
    assert node is not None
    gpu_template(catalog, "seven", 7)
    gpu_pod(catalog, "wide", template="seven", nodeSelector={"kubernetes.io/hostname": node})
    Scheduler(catalog).run_once()  # "a" (and maybe "b") holds 2 of the node's 8 GPUs: "wide" waits
    shown = {p["name"]: p for p in pending_view(facts(catalog))["pods"]}
    run = kubedra("--store", str(catalog.path), "explain", "pod", "wide", "-o", "json")
    assert run.returncode == 0, run.stderr
    said = json.loads(run.stdout)
    wide = shown["wide"]
    assert [{k: v for k, v in g.items() if k != "blocker"} for g in wide["groups"]] == said["nodeGroups"]
    assert wide["whatWouldFit"] == said["whatWouldFit"]
    assert re.fullmatch(rf"default/wide-gpus-\w+ gpus: fits on {node} if claim\(s\) "
                        r"default/a-gpus-\w+(, default/b-gpus-\w+)? were released", wide["whatWouldFit"][0]), wide
    (pinned,) = [g for g in wide["groups"] if g["nodes"] == [node]]
    assert [b["kind"] for b in pinned["blockers"]] == ["free"]
    assert re.search(r"gpus: [46] of 8 matching device\(s\) free, 7 needed$", pinned["blocker"]), pinned


def test_claim_page_has_requests_devices_with_attributes_and_pods(catalog: SqliteStore) -> None:
    f = facts(catalog)
    listed = claims_view(f)["claims"]
    assert {c["status"] for c in listed} == {"reserved"} and len(listed) == 2
    name = listed[0]["name"]
    page = claim_view(f, "default", name)
    assert page["requests"][0]["options"][0]["deviceClassName"] == "gpu"
    assert len(page["devices"]) == 2 and page["devices"][0]["attributes"]["productName"] == H100
    assert page["devices"][0]["node"] in ("h100x8-0", "h100x8-1")
    assert page["pods"] == [listed[0]["pods"][0]] and page["reservedFor"][0]["resource"] == "pods"
    with pytest.raises(NotFound):
        claim_view(f, "default", "nope")


def test_lists_filter_by_namespace_and_status(catalog: SqliteStore) -> None:
    catalog.create(Namespace(metadata=ObjectMeta(name="team-b")))
    gpu_template(catalog, "one", 1, namespace="team-b")
    gpu_pod(catalog, "waiting", template="one", namespace="team-b", nodeSelector={"no": "such-node"})
    f = facts(catalog)
    assert [p["name"] for p in pods_view(f, status="pending")["pods"]] == ["waiting"]
    assert [p["name"] for p in pods_view(f, namespace="default")["pods"]] == ["a", "b"]
    assert pods_view(f)["namespaces"] == ["default", "team-b"]
    assert claims_view(f, status="pending")["claims"] == []
    assert len(claims_view(f, namespace="default", status="reserved")["claims"]) == 2


def test_the_snapshot_store_refuses_every_write(catalog: SqliteStore) -> None:
    store = SnapshotStore(Mirror(catalog).sync().snapshot())
    pod = store.get(Pod, "a")
    for write in (lambda: store.create(pod), lambda: store.update(pod),
                  lambda: store.update_status(pod), lambda: store.delete(Pod, "a")):
        with pytest.raises(ReadOnly, match="read-only"):
            write()
    assert [n.name for n in store.list(ResourceSlice, field_selector="spec.nodeName=h100x8-1")] == [
        "h100x8-1-dra.net-0", "h100x8-1-gpu.nvidia.com-0"]
    assert catalog.get(Pod, "a").spec.node_name  # nothing changed underneath


def test_history_samples_once_per_version() -> None:
    versions = iter([1, 1, 2])
    history = History(lambda: {"version": next(versions), "fragmentation": 0.1, "allocation": 0.5},
                      clock=lambda: 7.0)
    for _ in range(3):
        history.record()
    assert history.points() == [
        {"time": 7.0, "version": 1, "fragmentation": 0.1, "allocation": 0.5},
        {"time": 7.0, "version": 2, "fragmentation": 0.1, "allocation": 0.5},
    ]


def test_an_unchanged_inventory_is_kept_and_a_changed_one_rebuilt(catalog: SqliteStore) -> None:
    mirror = Mirror(catalog).sync()
    first = Facts(mirror.snapshot())
    gpu_pod(catalog, "c", template="two")  # pods and claims change: the slices do not
    mirror.sync()
    second = Facts(mirror.snapshot(), previous=first)
    assert second.version > first.version
    assert second.scheduler.inventory() is first.scheduler.inventory()
    gpu_node(catalog, "extra", gpus=2)  # a new slice: the inventory must be built again
    mirror.sync()
    third = Facts(mirror.snapshot(), previous=second)
    assert third.scheduler.inventory() is not second.scheduler.inventory()
    assert {d.ref.pool for n in third.nodes for d in n.devices} >= {"extra"}
    assert sum(len(n.devices) for n in third.nodes) == sum(len(n.devices) for n in second.nodes) + 2
