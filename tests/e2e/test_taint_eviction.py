"""`kubedra controller run` on upstream's control plane: kube-scheduler places the pods,
kube-controller-manager generates their claims, and kubedra's device taint eviction
controller evicts (the dev cluster's kube-controller-manager does not run upstream's
`device-taint-eviction-controller`: see CONTROLLERS in kubedra.devcluster.harness)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import DeviceTaintRule
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import CONTROLLERS, DevCluster
from kubedra.devcluster.workload import claim_pod, gpu_class, gpu_nodes, gpu_template
from tests.conftest import REPO
from tests.e2e.scheduler_process import wait_for


@pytest.fixture
def controller(cluster: DevCluster, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    env.pop("KUBEDRA_STORE", None)
    log = (tmp_path / "controller.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubedra", "controller", "run", "--interval", "0.2"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
    yield proc
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    log.close()
    assert proc.returncode == 0, (tmp_path / "controller.log").read_text()


def tolerating_template(kube: KubeStore) -> None:
    kube.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "tolerant", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu", "count": 1,
            "tolerations": [{"key": "example.com/broken", "operator": "Exists",
                             "effect": "NoExecute"}]}}]}}}}).obj)


def disrupted(pod: Pod) -> bool:
    conditions = pod.status.conditions if pod.status else ()
    return any(c.type == "DisruptionTarget" and c.reason == "DeletionByDeviceTaintManager"
               and c.status == "True" for c in conditions)


def test_a_noexecute_rule_evicts_the_pods_that_do_not_tolerate_it(
    cluster: DevCluster, kube: KubeStore, controller: subprocess.Popen[str]
) -> None:
    assert "device-taint-eviction-controller" not in CONTROLLERS
    kube.create(gpu_class())
    (node,) = gpu_nodes(kube, 1, prefix="taint")
    kube.create(gpu_template("one", 1))
    tolerating_template(kube)
    kube.create(claim_pod("plain", "one", "default-scheduler", node=node))
    kube.create(claim_pod("tolerant", "tolerant", "default-scheduler", node=node))
    for name in ("plain", "tolerant"):
        wait_for(f"{name} bound", lambda n=name: kube.get(Pod, n).spec.node_name == node)
    kube.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": "broken-node"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": node},
                 "taint": {"key": "example.com/broken", "effect": "NoExecute"}}}).obj)
    # Deleted with the grace period: a kubelet-less node never confirms, so it stays
    # terminating, with the condition that says why.
    wait_for("plain evicted", lambda: kube.get(Pod, "plain").metadata.deletion_timestamp)
    assert disrupted(kube.get(Pod, "plain"))
    time.sleep(1.0)
    tolerant = kube.get(Pod, "tolerant")
    assert not tolerant.metadata.deletion_timestamp and not disrupted(tolerant)
    notes = json.loads(cluster.kubectl(
        "get", "events", "--field-selector", "involvedObject.name=plain", "-o", "json"))["items"]
    assert any(e["reason"] == "DeviceTaintManagerEviction"
               and e["message"] == "Marking for deletion"
               for e in notes), notes

    def condition() -> tuple[str, str]:
        rule = kube.get(DeviceTaintRule, "broken-node")
        found = [c for c in (rule.status.conditions if rule.status else ())
                 if c.type == "EvictionInProgress"]
        return (found[0].reason or "", found[0].message or "") if found else ("", "")

    wait_for("the rule's status", lambda: condition()[0] in ("PodsPendingEviction", "Completed"))
    wait_for("the rule completed", lambda: condition() == (
        "Completed", "1 pod evicted since starting the controller."), 60)
