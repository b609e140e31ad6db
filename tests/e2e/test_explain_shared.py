"""`kubedra explain` says what kubedra's scheduler does beside kube-scheduler: a node where
kube-scheduler's pods hold devices is one kubedra leaves alone, and explain names it as the
blocker there instead of reporting that the pod fits (it said "fits" while the scheduler
placed nothing: the README's flow on a shared cluster)."""

from __future__ import annotations

import json
import time

from kubedra.api.core import Pod
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import claim_pod, create_all, gpu_nodes, gpu_template
from tests.e2e.conftest import run_kubedra
from tests.e2e.scheduler_process import gpu_store


def test_a_node_shared_with_kube_scheduler_is_named_as_the_blocker(cluster: DevCluster) -> None:
    with gpu_store(cluster) as kube:
        (node,) = gpu_nodes(kube, 1, prefix="shared")
        kube.create(gpu_template("one-gpu", 1))
        create_all(kube, [claim_pod("theirs", "one-gpu", "default-scheduler", node=node),
                          claim_pod("ours", "one-gpu", "kubedra", node=node)])  # fmt: skip
        _wait_bound(kube, "theirs")
        run = run_kubedra(cluster, "explain", "pod", "ours", "-o", "json")
        assert run.returncode == 0, run.stderr
        groups = {n: g for g in json.loads(run.stdout)["nodeGroups"] for n in g["nodes"]}
        assert groups[node]["fits"] is False
        (blocker,) = groups[node]["blockers"]
        assert blocker["detail"].startswith("default-scheduler allocates devices on this node: kubedra leaves it alone")
        text = run_kubedra(cluster, "explain", "pod", "ours").stdout
        assert "default-scheduler allocates devices on this node" in text


def _wait_bound(kube: KubeStore, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not kube.get(Pod, name).spec.node_name:
        assert time.monotonic() < deadline, f"{name} was not bound"
        time.sleep(0.2)
