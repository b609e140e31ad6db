"""`allocate --cluster` and `lint --cluster`: manifests checked against a store's current
state (the embedded store here; tests/e2e does the same on a real API server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubedra.cluster import SqliteStore
from tests.cli.test_lint import kubedra

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: more, namespace: default}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: nvidia, count: %d}
"""
CLASSES = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nvidia}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.nvidia.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: held, namespace: default}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: nvidia, count: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: holder, namespace: default}
spec:
  resourceClaims: [{name: gpus, resourceClaimName: held}]
  containers: [{name: main, image: busybox, resources: {claims: [{name: gpus}]}}]
"""


@pytest.fixture
def store(tmp_path: Path) -> str:
    """One H100 node (8 GPUs, 4 NICs) with 3 GPUs held by a scheduled pod."""
    path = str(tmp_path / "state.db")
    (tmp_path / "classes.yaml").write_text(CLASSES)
    for args in (("cluster", "create", "--node-profile", "h100x8=1"),
                 ("apply", "-f", str(tmp_path / "classes.yaml")), ("schedule",)):
        done = kubedra("--store", path, *args)
        assert done.returncode == 0, done.stderr
    return path


def claim_file(tmp_path: Path, count: int) -> str:
    path = tmp_path / f"claim-{count}.yaml"
    path.write_text(CLAIM % count)
    return str(path)


def test_what_fits_now_uses_the_free_devices_and_writes_nothing(store: str, tmp_path: Path) -> None:
    before = SqliteStore(store).resource_version()
    done = kubedra("--store", store, "allocate", "-f", claim_file(tmp_path, 5), "--cluster",
                   "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["node"] == "h100x8-0"
    (claim,) = report["claims"]
    devices = [r["device"] for r in claim["allocation"]["devices"]["results"]]
    # First fit in slice order, after the three the held claim took.
    assert devices == ["gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    assert claim["reason"] == "allocated on node h100x8-0"
    assert SqliteStore(store).resource_version() == before


def test_what_does_not_fit_says_why_per_node_group(store: str, tmp_path: Path) -> None:
    done = kubedra("--store", store, "allocate", "-f", claim_file(tmp_path, 6), "--cluster",
                   "-o", "json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["node"] is None and report["claims"][0]["allocation"] is None
    (group,) = report["nodeGroups"]
    assert group["nodes"] == ["h100x8-0"] and not group["fits"]
    (request,) = group["requests"]
    assert request["wanted"] == 6
    assert request["funnel"] == {"in pools": 12, "class selectors": 8, "request selectors": 8,
                                 "untainted": 8, "free": 5, "fit": 5}
    table = kubedra("--store", store, "allocate", "-f", claim_file(tmp_path, 6), "--cluster")
    assert "gpus (need 6): 12 in pools -> 8 class selectors" in table.stdout


def test_objects_other_than_claims_are_ignored_with_a_warning(store: str, tmp_path: Path) -> None:
    both = tmp_path / "both.yaml"
    both.write_text(CLAIM % 1 + "---\n" + CLASSES.split("---")[0])
    done = kubedra("--store", store, "allocate", "-f", str(both), "--cluster")
    assert done.returncode == 0, done.stderr
    assert "warning: DeviceClass nvidia ignored: with --cluster" in done.stderr


def lint_lines(store: str, path: Path, text: str) -> list[str]:
    path.write_text(text)
    done = kubedra("--store", store, "lint", "--cluster", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "in the cluster" in line]


def test_lint_names_a_class_that_admits_no_device(store: str, tmp_path: Path) -> None:
    tpu = yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                          "metadata": {"name": "tpu"},
                          "spec": {"selectors": [{"cel": {"expression": 'device.driver == "tpu.google.com"'}}]}})
    (line,) = lint_lines(store, tmp_path / "tpu.yaml", tpu)
    assert line == (
        f"{tmp_path / 'tpu.yaml'}:7: DeviceClass tpu: spec.selectors: warning: DeviceClass tpu "
        "admits no device in the cluster (12 devices: dra.net 4, gpu.nvidia.com 8)"
    )


def test_lint_names_a_selector_that_fails_at_run_time_on_some_devices(
    store: str, tmp_path: Path
) -> None:
    """The unguarded portable form of the seed: NICs have no `memory` (upstream's scheduler
    fails the whole node on that error)."""
    unguarded = yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                "metadata": {"name": "big"}, "spec": {"selectors": [{"cel": {
                                    "expression": 'device.capacity["gpu.nvidia.com"].memory'
                                                  '.isGreaterThan(quantity("40Gi"))'}}]}})
    (line,) = lint_lines(store, tmp_path / "big.yaml", unguarded)
    assert "DeviceClass big: a selector fails at run time on 4 of 12 devices in the cluster" in line
    assert "(e.g. dra.net/h100x8-0/pci-0000-10-1b-0: no such key: memory)" in line


def test_lint_checks_each_request_with_its_class_from_the_files_or_the_cluster(
    store: str, tmp_path: Path
) -> None:
    claim = yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": "c", "namespace": "default"},
                            "spec": {"devices": {"requests": [
                                {"name": "big", "exactly": {"deviceClassName": "nvidia", "selectors": [
                                    {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].architecture == "Blackwell"'}}]}},
                                {"name": "ok", "exactly": {"deviceClassName": "nvidia"}},
                                {"name": "gone", "exactly": {"deviceClassName": "nope"}}]}}})
    lines = lint_lines(store, tmp_path / "claim.yaml", claim)
    assert [line.split(": ", 2)[2] for line in lines] == [
        "spec.devices.requests[0].exactly: warning: request 'big' (class nvidia) admits no "
        "device in the cluster (12 devices: dra.net 4, gpu.nvidia.com 8)",
        "spec.devices.requests[2].exactly.deviceClassName: warning: DeviceClass nope: no "
        "such DeviceClass in the files or in the cluster",
    ]


def test_lint_without_cluster_reads_no_store(tmp_path: Path) -> None:
    """Plain lint must not open (or create) a store."""
    path = tmp_path / "c.yaml"
    path.write_text(CLAIM % 1)
    done = kubedra("--store", str(tmp_path / "never.db"), "lint", str(path))
    assert done.returncode == 0, done.stdout
    assert not (tmp_path / "never.db").exists()
