"""The same commands print the same thing on the embedded store and on a real cluster.

One scenario is built twice, with the same commands: `cluster create`, then `apply` of a
class, a claim and a pod that no scheduler serves (so both stay as written). Every
read-only command and the write commands' own output are compared line by line; only
what cannot be equal is masked (ages, uids, resourceVersions, timestamps).
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kubedra.devcluster.harness import DevCluster
from tests.conftest import REPO
from tests.e2e.conftest import run_kubedra

MANIFESTS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nvidia-gpu}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.nvidia.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two-gpus, namespace: default, labels: {team: infer}}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: nvidia-gpu, count: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: waits, namespace: default}
spec:
  schedulerName: nobody
  resourceClaims: [{name: gpus, resourceClaimName: two-gpus}]
  containers:
  - name: main
    image: busybox
    resources: {claims: [{name: gpus}]}
"""

SETUP = [
    ("cluster", "create", "--node-profile", "h100x8=1"),
    ("apply", "-f", "{manifests}"),
    ("apply", "-f", "{manifests}"),
]
READS = [
    ("get", "nodes"),
    ("get", "deviceclasses"),
    ("get", "rc", "-o", "wide"),
    ("get", "rc", "two-gpus", "-o", "yaml"),
    ("get", "pods"),
    ("describe", "deviceclass", "nvidia-gpu"),
    ("describe", "rc", "two-gpus"),
    ("devices",),
    ("devices", "--free", "-o", "json"),
    ("explain", "pod", "waits"),
    ("explain", "claim", "two-gpus"),
    ("lint", "--cluster", "{manifests}"),
]
WRITES = [("delete", "pod", "waits"), ("get", "pods")]

# What differs between any two stores: when and under which ids things were written.
MASKS = [
    (re.compile(r"(?m)^(\S+(?:\s{3,}\S+)*?\s{3,})(\d+[smhd])$"), r"\1<age>"),
    (re.compile(r"\b\d+[smhd](?=\s{3}|$)"), "<age>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "<time>"),
    (re.compile(r"(resourceVersion|Resource Version):\s*[\"']?\d+[\"']?"), r"\1: <rv>"),
    (re.compile(r"(?m)^(\s*)(creationTimestamp|Creation Timestamp): .*$"), r"\1\2: <time>"),
    (re.compile(r"(?<=\S) {2,}"), "  "),  # column widths follow the ages' lengths
]


def masked(text: str) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def run_all(kubedra: object, manifests: Path) -> list[tuple[str, str]]:
    outputs = []
    for args in [*SETUP, *READS, *WRITES]:
        argv = [a.format(manifests=manifests) for a in args]
        done = kubedra(*argv)  # type: ignore[operator]
        assert done.returncode == 0, (argv, done.stderr)
        outputs.append((" ".join(args), masked(done.stdout)))
    return outputs


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("embedded")
    (folder / "m.yaml").write_text(MANIFESTS)
    store = str(folder / "state.db")

    def kubedra(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kubedra", "--store", store, *args],
                              capture_output=True, text=True, cwd=REPO, timeout=300)

    return run_all(kubedra, folder / "m.yaml")


@pytest.fixture(scope="module")
def live(cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("live")
    (folder / "m.yaml").write_text(MANIFESTS)
    return run_all(lambda *args: run_kubedra(cluster, *args), folder / "m.yaml")


@pytest.mark.parametrize("index", range(len(SETUP) + len(READS) + len(WRITES)))
def test_the_same_output_on_both_backends(
    embedded: list[tuple[str, str]], live: list[tuple[str, str]], index: int
) -> None:
    (command, ours), (_, theirs) = embedded[index], live[index]
    diff = difflib.unified_diff(ours.splitlines(), theirs.splitlines(), "embedded", "cluster",
                                lineterm="")
    assert theirs == ours, f"{command}:\n" + "\n".join(diff)
