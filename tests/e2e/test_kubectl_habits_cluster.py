"""kubectl's day-one habits (issue 38) with kubedra on upstream's control plane, through the
KubeStore seam, each compared with what kubectl itself prints on the same cluster."""

from __future__ import annotations

import json
import threading
import time

import pytest

from kubedra.devcluster.harness import DevCluster
from tests.e2e.conftest import run_kubedra

OBJECTS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: habits-gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: habits-a, labels: {app: a}}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: habits-gpu}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: habits-b, labels: {app: b}}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: habits-gpu}}]}}
"""


def kubedra(cluster: DevCluster, *args: str, input: str | None = None) -> str:
    done = run_kubedra(cluster, *args, input=input)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def claims(cluster: DevCluster) -> DevCluster:
    kubedra(cluster, "apply", "-f", "-", input=OBJECTS)
    return cluster


@pytest.mark.parametrize("output", [
    "jsonpath={.items[*].metadata.name}",
    'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.metadata.labels.app}{"\\n"}{end}',
    "custom-columns=NAME:.metadata.name,APP:.metadata.labels.app,REQ:.spec.devices.requests[*].name",
    "name",
])
def test_output_formats_print_what_kubectl_prints(claims: DevCluster, output: str) -> None:
    args = ["get", "resourceclaims", "-l", "app in (a,b)", "-o", output]
    assert kubedra(claims, *args) == claims.kubectl(*args)


def test_several_kinds_group_qualified_names_and_labels(claims: DevCluster) -> None:
    names = kubedra(claims, "get", "deviceclasses.resource.k8s.io,resourceclaim.resource.k8s.io",
                    "-o", "name")
    assert "deviceclass.resource.k8s.io/habits-gpu\n" in names
    assert "resourceclaim.resource.k8s.io/habits-a\n" in names
    table = kubedra(claims, "get", "rc", "habits-a", "--show-labels").splitlines()
    assert table[0].split() == ["NAME", "STATE", "AGE", "LABELS"] and table[1].endswith("app=a")


def test_get_events_reads_the_api_servers(claims: DevCluster) -> None:
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
             "metadata": {"name": "habits-a.1", "namespace": "default"},
             "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "kubedra",
             "reportingInstance": "kubedra-0", "action": "Binding", "reason": "HabitsTest",
             "type": "Normal", "note": "a note",
             "regarding": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "namespace": "default", "name": "habits-a"}}
    claims.kubectl("create", "-f", "-", input=json.dumps(event))
    ours = [line.split() for line in kubedra(claims, "get", "events").splitlines()]
    assert ["Normal", "HabitsTest", "resourceclaim/habits-a", "a", "note"] in [r[1:] for r in ours]
    listed = json.loads(kubedra(claims, "get", "events", "-o", "json"))
    assert "habits-a.1" in [e["metadata"]["name"] for e in listed["items"]]


def test_describe_without_a_name_and_delete_by_selector(claims: DevCluster) -> None:
    described = kubedra(claims, "describe", "rc", "-l", "app in (a,b)")
    assert described.count("Name:         habits-") == 2
    deleted = kubedra(claims, "delete", "rc", "-l", "app=b")
    assert deleted == 'resourceclaim.resource.k8s.io "habits-b" deleted from default namespace\n'
    assert kubedra(claims, "delete", "rc", "-l", "app=nothing") == "No resources found\n"


def test_apply_n_and_delete_all(cluster: DevCluster) -> None:
    cluster.kubectl("create", "namespace", "habits")
    claim = OBJECTS.split("---")[1]
    assert kubedra(cluster, "apply", "-n", "habits", "-f", "-", input=claim) == (
        "resourceclaim.resource.k8s.io/habits-a created\n")
    assert cluster.kubectl("get", "resourceclaims", "-n", "habits", "-o", "name") == "resourceclaim.resource.k8s.io/habits-a\n"
    assert kubedra(cluster, "delete", "rc", "--all", "-n", "habits") == (
        'resourceclaim.resource.k8s.io "habits-a" deleted from habits namespace\n')


def test_delete_waits_for_finalizers_as_kubectl(claims: DevCluster) -> None:
    claims.kubectl("patch", "resourceclaim", "habits-a", "--type=merge",
                   "-p", '{"metadata":{"finalizers":["example.com/keep"]}}')
    timed_out = run_kubedra(claims, "delete", "rc", "habits-a", "--timeout=1s")
    assert timed_out.returncode == 1
    assert timed_out.stderr == "error: timed out waiting for the condition on resourceclaims/habits-a\n"
    warned = run_kubedra(claims, "apply", "-f", "-", input=OBJECTS)
    assert "Warning: Detected changes to resource habits-a which is currently being deleted." in warned.stderr

    def release() -> None:
        time.sleep(2)
        claims.kubectl("patch", "resourceclaim", "habits-a", "--type=json",
                       "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')

    releaser = threading.Thread(target=release)
    releaser.start()
    started = time.monotonic()
    kubedra(claims, "delete", "rc", "habits-a")
    releaser.join()
    assert time.monotonic() - started >= 1.5  # it waited for the finalizer to go
    assert claims.kubectl("get", "resourceclaims", "habits-a", check=False) == ""


@pytest.mark.parametrize("path", ["resourceclaim.spec.devices", "resourceclaim.spec.devices.requests.exactly.count",
                                  "deviceclass.spec", "resourceslice.spec.devices.capacity",
                                  "pod.spec.nodeName", "pod.spec.resourceClaims.name"])
def test_explain_fields_reads_as_kubectl_explain(cluster: DevCluster, path: str) -> None:
    """The same layout as kubectl explain: group, kind, version, the field and its type,
    every subfield with its type and required mark, in order. The descriptions are
    kubedra's own words, so only their presence is checked."""
    ours, theirs = kubedra(cluster, "explain", path), cluster.kubectl("explain", path)
    assert layout(ours) == layout(theirs)
    assert descriptions(ours)


def layout(text: str) -> list[str]:
    """Everything but the prose: lines not indented as a description (4 spaces)."""
    return [line.rstrip() for line in text.splitlines()
            if line.strip() and not line.startswith("    ")]


def descriptions(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("    ") and line.strip()]
