"""The blocker, the same everywhere: `explain pod|claim` (text and JSON), `schedule`, the
PodScheduled condition and `allocate --cluster`, through the real entry point on the
catalog's profiles. The two reproductions of issue 21: four GPUs on one PCIe root of an
H100 node (two GPUs per root), and GPU+NIC pairs on a B200 node (one NIC per root)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_lint import kubedra

ROOT = "resource.kubernetes.io/pcieRoot"


def _doc(kind: str, name: str, spec: dict[str, Any], api: str = "resource.k8s.io/v1") -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _class(name: str, expression: str) -> dict[str, Any]:
    doc = _doc("DeviceClass", name, {"selectors": [{"cel": {"expression": expression}}]})
    del doc["metadata"]["namespace"]
    return doc


def _claim(name: str, requests: list[tuple[str, str, int]], match: list[str] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [
        {"name": n, "exactly": {"deviceClassName": c, "count": k}} for n, c, k in requests]}
    if match is not None:
        devices["constraints"] = [{"requests": match, "matchAttribute": ROOT}] if match else [{"matchAttribute": ROOT}]
    return _doc("ResourceClaim", name, {"devices": devices})


def _pod(name: str, claim: str, **spec: Any) -> dict[str, Any]:
    return _doc("Pod", name, {
        "resourceClaims": [{"name": "devices", "resourceClaimName": claim}],
        "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "devices"}]}}],
        **spec}, api="v1")


CLASSES = [
    _class("nvidia-gpu", 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"'),
    _class("rdma-nic", 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true'),
]
FOUR_ON_ONE_ROOT = _claim("four-on-one-root", [("gpus", "nvidia-gpu", 4)], match=[])
PAIRS = _claim("pairs", [("gpu", "nvidia-gpu", 2), ("nic", "rdma-nic", 2)], match=["gpu", "nic"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> str:
    """h100x8 and b200x8 nodes; a pod needing four GPUs on one root, one pinned away from
    every node, the pairs claim, and six of the b200's GPUs held by another claim. The
    holder is created first: the queue orders by creation second, then name, so it goes
    before p1 whether or not the apply crosses a second."""
    tmp = tmp_path_factory.mktemp("blockers")
    store = str(tmp / "s.db")
    docs = [*CLASSES, FOUR_ON_ONE_ROOT, PAIRS,
            _claim("six", [("gpus", "nvidia-gpu", 6)]), _pod("holder", "six", nodeSelector={"kubernetes.io/hostname": "b200x8-0"}),
            _pod("p1", "four-on-one-root"),
            _claim("other-four", [("gpus", "nvidia-gpu", 4)]),
            _pod("pinned", "other-four", nodeSelector={"pool": "nowhere"})]
    (tmp / "all.yaml").write_text(yaml.safe_dump_all(docs))
    for args in (["cluster", "create", "--node-profile", "h100x8=1", "--node-profile", "b200x8=1"],
                 ["apply", "-f", str(tmp / "all.yaml")]):
        run = kubedra("--store", store, *args)
        assert run.returncode == 0, run.stderr
    return store


def _schedule(store: str) -> dict[str, str]:
    run = kubedra("--store", store, "schedule")
    assert run.returncode == 0, run.stderr
    return dict(line.split(" ", 1) for line in run.stdout.splitlines())


def test_four_gpus_on_one_root_named_in_explain_schedule_and_condition(cluster: str) -> None:
    out = _schedule(cluster)
    # The b200's GPUs went to the holder first: there, fewer are free than needed.
    assert out["pod/p1"] == (
        "unschedulable: 0/2 nodes are available: 1 cannot allocate all claims (gpus: 2 of 8 "
        "matching devices free, 4 needed), 1 cannot allocate all claims (gpus: at most 2 devices "
        f"share one {ROOT}, 4 needed).")
    assert out["pod/holder"].startswith("-> b200x8-0")
    got = json.loads(kubedra("--store", cluster, "get", "pod", "p1", "-o", "json").stdout)
    pod = got["items"][0] if "items" in got else got
    (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["message"] == out["pod/p1"].removeprefix("unschedulable: ")
    text = kubedra("--store", cluster, "explain", "pod", "p1").stdout.splitlines()
    assert (f"    blocked: default/four-on-one-root gpus: matchAttribute {ROOT}: at most 2 of the "
            "4 devices share one value (pci0000:10), 4 needed") in text
    # Two GPUs per root on both nodes: no node could ever hold it, said first, with the kind
    # of node that would; the nearest is the one with the most of it free (not the b200).
    assert (f"  default/four-on-one-root: no node of the cluster can hold it, even with all devices "
            f"free: it needs a node with 4 devices of class nvidia-gpu sharing one {ROOT}; nearest: "
            f"h100x8-0: gpus: at most 2 devices share one {ROOT}, 4 needed") in text


def test_gpu_nic_pairs_blocker_in_json(cluster: str) -> None:
    run = kubedra("--store", cluster, "explain", "claim", "pairs", "-o", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["object"], report["state"]) == ("claim default/pairs", "not allocated")
    h100 = next(g for g in report["nodeGroups"] if g["nodes"] == ["h100x8-0"])
    (blocker,) = h100["blockers"]
    assert {k: blocker[k] for k in ("kind", "claim", "request", "have", "need")} == {
        "kind": "matchAttribute", "claim": "default/pairs", "request": "gpu,nic", "have": 3, "need": 4}
    assert "(pci0000:10: gpu 2 of 2, nic 1 of 2)" in blocker["detail"]
    assert [r["funnel"]["fit"] for r in h100["requests"]] == [8, 4]


def test_held_devices_name_the_claim_to_release(cluster: str) -> None:
    _schedule(cluster)
    what = json.loads(kubedra("--store", cluster, "explain", "claim", "other-four", "-o", "json").stdout)
    b200 = next(g for g in what["nodeGroups"] if g["nodes"] == ["b200x8-0"])
    (blocker,) = b200["blockers"]
    assert (blocker["kind"], blocker["have"], blocker["need"]) == ("free", 2, 4)
    assert blocker["heldBy"] == {"default/six": 6} and blocker["fitsIfReleased"] == ["default/six"]
    # The h100 node fits the claim, so nothing needs releasing; the pod is pinned away.
    assert what["whatWouldFit"] == []
    pinned = json.loads(kubedra("--store", cluster, "explain", "pod", "pinned", "-o", "json").stdout)
    assert {b["kind"] for g in pinned["nodeGroups"] for b in g["blockers"]} == {"node"}


def test_allocate_on_cluster_reason_and_what_would_fit(cluster: str, tmp_path: Path) -> None:
    claim = _claim("eight-on-b200", [("gpus", "nvidia-gpu", 8)])
    claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName.contains("B200")'}}]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(claim))
    _schedule(cluster)
    run = kubedra("--store", cluster, "allocate", "--cluster", "-f", str(tmp_path / "c.yaml"), "-o", "json")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert "default/eight-on-b200 gpus: 2 of 8 matching device(s) free, 8 needed" in report["claims"][0]["reason"]
    assert report["whatWouldFit"] == [
        "default/eight-on-b200 gpus: fits on b200x8-0 if claim(s) default/six were released"]
