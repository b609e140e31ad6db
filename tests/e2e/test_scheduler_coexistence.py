"""kube-scheduler and kubedra at once, each with a burst of pods for the same devices.

Devices are no API objects: two schedulers that allocate from one node's slices can pick
the same device, each from a cache that has not seen the other's claim yet. Three set-ups
on one control plane, each on its own nodes (counted after the bursts settle):
- shared nodes, kubedra only warning (`--shared-nodes=warn`): the race as it is;
- shared nodes, kubedra refusing nodes where kube-scheduler holds devices or is placing
  pods with claims (the default): kubedra waits for kube-scheduler there, and what is left
  is the moment before kube-scheduler's new pod reaches kubedra's watch;
- the supported set-up: each scheduler its own node pool (kubedra `--node-selector`,
  kube-scheduler's pods a nodeSelector): no device can be held twice.
The counts are printed (`-s`) and recorded in docs/results.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import claim_pod, create_all, gpu_nodes, gpu_template
from kubedra.scheduler.verify import check_allocations
from tests.e2e.scheduler_process import KubedraScheduler, gpu_store

PODS = 120  # per scheduler and set-up
NODES = 20  # x 8 GPUs: 160 GPUs for 240 pods, so both compete for the last ones


@pytest.fixture(scope="module")
def kube(cluster: DevCluster) -> Iterator[KubeStore]:
    with gpu_store(cluster) as store:
        yield store


def burst(cluster: DevCluster, kube: KubeStore, tmp_path: Path, setup: str, *kubedra_args: str,
          kube_pool: str, kubedra_pool: str, nodes: tuple[str, ...]
          ) -> tuple[int, list[str], KubedraScheduler, set[str]]:
    """Both bursts at once in namespace `setup`; returns the pods bound once things settled,
    the checker's problems, the (stopped) kubedra scheduler and the nodes it used."""
    kube.create(decode_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": setup}}).obj)
    kube.create(gpu_template("one", 1, namespace=setup))
    sched = KubedraScheduler(cluster, tmp_path / f"{setup}.log", "--no-leader-elect",
                             "--node-selector", f"pool={kubedra_pool}", *kubedra_args)
    try:
        sched.wait_ready()
        pods = []
        for i in range(PODS):  # interleaved: both bursts arrive at once
            pods += [claim_pod(f"kube-{i:03d}", "one", "default-scheduler", namespace=setup,
                               node_selector={"pool": kube_pool}),
                     claim_pod(f"kubedra-{i:03d}", "one", "kubedra", namespace=setup)]
        create_all(kube, pods)
        bound = settle(kube, setup)
    finally:
        sched.stop()
    problems = [p for p in check_allocations(kube)
                if f" {setup}/" in p or any(f"/{prefix}-" in p for prefix in nodes)]
    ours = {p.spec.node_name for p in kube.list(Pod, setup)
            if p.spec.node_name and p.spec.scheduler_name == "kubedra"}
    # Pods left pending would keep kube-scheduler busy in the next set-up: they go.
    cluster.kubectl("delete", "namespace", setup, "--wait=false")
    cluster.kubectl("delete", "pods", "--all", "-n", setup, "--grace-period=0", "--force",
                    "--wait=false")
    return bound, problems, sched, ours


def settle(kube: KubeStore, namespace: str, quiet: float = 20.0, timeout: float = 600) -> int:
    """Bound pods once no new binding came for `quiet` seconds."""
    deadline, last, count = time.monotonic() + timeout, time.monotonic(), -1
    while time.monotonic() < deadline:
        now = len([p for p in kube.list(Pod, namespace) if p.spec.node_name])
        if now != count:
            count, last = now, time.monotonic()
        elif time.monotonic() - last > quiet:
            return count
        time.sleep(1)
    return count


def double_held(problems: list[str]) -> int:
    return len([p for p in problems if p.startswith("device ")])


def test_shared_nodes_when_kubedra_only_warns(cluster: DevCluster, kube: KubeStore,
                                             tmp_path: Path) -> None:
    gpu_nodes(kube, NODES, prefix="warn", labels={"pool": "warn"})
    bound, problems, sched, _ = burst(cluster, kube, tmp_path, "warn", "--shared-nodes", "warn",
                                   kube_pool="warn", kubedra_pool="warn", nodes=("warn",))
    print(f"\nshared nodes, warn: {bound} pods bound, {double_held(problems)} devices held "
          f"by two claims")
    assert bound >= NODES * 8  # every GPU taken (some, raced for, by both schedulers)
    assert "default-scheduler allocates devices here too" in sched.log.read_text()


def test_shared_nodes_when_kubedra_refuses_them(cluster: DevCluster, kube: KubeStore,
                                               tmp_path: Path) -> None:
    gpu_nodes(kube, NODES, prefix="refuse", labels={"pool": "refuse"})
    bound, problems, sched, _ = burst(cluster, kube, tmp_path, "refuse",
                                   kube_pool="refuse", kubedra_pool="refuse", nodes=("refuse",))
    print(f"\nshared nodes, refuse: {bound} pods bound, {double_held(problems)} devices held "
          f"by two claims")
    log = sched.log.read_text()
    assert "kubedra leaves its devices alone (it would race)" in log
    assert "node(s) where another scheduler allocates devices" in log
    # Refusing narrows the race but cannot close it: kube-scheduler knows nothing of kubedra
    # and retries its unschedulable pods whenever a claim changes, from a cache that may not
    # hold kubedra's latest allocation yet. Own node pools are the supported set-up.
    assert bound >= NODES * 8


def test_own_node_pools_never_share_a_device(cluster: DevCluster, kube: KubeStore,
                                            tmp_path: Path) -> None:
    gpu_nodes(kube, NODES // 2, prefix="kubepool", labels={"pool": "kube"})
    gpu_nodes(kube, NODES // 2, prefix="ourpool", labels={"pool": "kubedra"})
    bound, problems, _, ours = burst(cluster, kube, tmp_path, "pools",
                               kube_pool="kube", kubedra_pool="kubedra",
                               nodes=("kubepool", "ourpool"))
    print(f"\nown pools: {bound} pods bound, {double_held(problems)} devices held by two claims")
    assert bound == NODES * 8
    assert problems == []
    assert {node.split("-")[0] for node in ours} == {"ourpool"}
