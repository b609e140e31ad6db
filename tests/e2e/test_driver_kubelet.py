"""`kubedra driver run` on upstream's control plane, driven by upstream's kubelet client.

The driver runs as a process against the API server; `tools/kubeletclient` (upstream's
generated kubelet packages, no kubedra code) registers it and prepares claims that
kube-scheduler and kubedra's scheduler allocated on the real control plane. Every answer
must be one the kubelet accepts, with CDI IDs a runtime resolves from the driver's specs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubedra.api.core import Node, Pod
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.driver.checkpoint import Checkpoint
from tests.driver.driverproc import GPU, DriverProcess, disk_problems, status_problems
from tests.e2e.driver_env import cluster_driver, gpu_node, short_dir, wait_for
from tests.e2e.scheduler_process import KubedraScheduler
from tests.e2e.upstream_kubelet import KubeletRefused, UpstreamKubelet, devices

NODE = "gpu-0"
CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"'}
"""


def claim_and_pod(name: str, scheduler: str = "default-scheduler", count: int = 1) -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, namespace: default}}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {{deviceClassName: gpu.nvidia.com, count: {count}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: {scheduler}
  resourceClaims: [{{name: gpus, resourceClaimName: {name}}}]
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources: {{claims: [{{name: gpus}}]}}
"""


@dataclass
class Env:
    cluster: DevCluster
    kube: KubeStore
    driver: DriverProcess
    kubelet: UpstreamKubelet

    def allocated(self, name: str) -> ResourceClaim:
        wait_for(f"claim {name} allocated", lambda: _allocation(self.kube, name))
        return self.kube.get(ResourceClaim, name)


def _allocation(kube: KubeStore, name: str) -> object:
    status = kube.get(ResourceClaim, name).status
    return status is not None and status.allocation


@pytest.fixture(scope="module")
def env(cluster: DevCluster) -> Iterator[Env]:
    kube = cluster.store()
    gpu_node(kube, NODE)
    cluster.kubectl("apply", "-f", "-", input=CLASS)
    with short_dir() as root:
        driver = cluster_driver(root, NODE, cluster.kubeconfig).start()
        kubelet = UpstreamKubelet(driver.paths.registration_socket, driver.cdi)
        try:
            yield Env(cluster, kube, driver, kubelet)
        finally:
            driver.stop()
            kube.close()


def test_registration_is_what_the_kubelet_accepts(env: Env) -> None:
    answer = env.kubelet.call("register")
    assert answer["plugin"] == {
        "type": "DRAPlugin",
        "name": GPU,
        "endpoint": str(env.driver.paths.dra_socket),
        # the kubelet's DRA health service (KEP-4680) is advertised beside the plugin's
        "supportedVersions": ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth"],
    }
    assert answer["service"] == "v1.DRAPlugin"
    older = env.kubelet.call("register", services=["v1beta1.DRAPlugin"])
    assert older["service"] == "v1beta1.DRAPlugin"
    with pytest.raises(KubeletRefused, match="none of services supported by the plugin"):
        env.kubelet.call("register", services=["v1alpha4.DRAPlugin"])
    assert "registered=false" in env.driver.log_text()  # told by the kubelet, and logged


def test_the_pool_is_published_with_upstreams_semantics(env: Env) -> None:
    node = env.kube.get(Node, NODE)
    (slice_,) = [s for s in env.kube.list(ResourceSlice) if s.spec.node_name == NODE]
    assert (slice_.spec.driver, slice_.spec.pool.name) == (GPU, NODE)
    assert slice_.spec.pool.resource_slice_count == 1 and len(slice_.spec.devices) == 8
    (owner,) = slice_.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Node",
        NODE,
        node.metadata.uid,
        True,
    )
    generation = slice_.spec.pool.generation
    env.driver.stop()  # the same inventory after a restart: nothing is written
    env.driver.start()
    again = env.kube.get(ResourceSlice, slice_.name)
    assert again.metadata.resource_version == slice_.metadata.resource_version
    assert again.spec.pool.generation == generation


def test_prepare_a_claim_kube_scheduler_allocated(env: Env) -> None:
    env.cluster.kubectl("apply", "-f", "-", input=claim_and_pod("by-kube-scheduler", count=2))
    claim = env.allocated("by-kube-scheduler")
    answer = env.kubelet.prepare(claim)
    assert answer["problems"] == []  # accepted, and every CDI ID resolves from its spec
    got = devices(answer, claim)
    assert [pool for pool, _, _ in got] == [NODE, NODE]
    assert all(ids == [f"k8s.{GPU}/claim={claim.metadata.uid}-{d}"] for _, d, ids in got)
    assert env.kubelet.prepare(claim)["claims"] == answer["claims"]  # the kubelet retries
    older = env.kubelet.prepare(claim, services=["v1beta1.DRAPlugin"])
    assert older["problems"] == [] and devices(older, claim) == got
    claims, problems = disk_problems(env.driver.paths.plugin_dir, env.driver.cdi, NODE)
    assert problems == [] and claim.metadata.uid in claims
    assert status_problems(env.kube, {claim.metadata.uid or "": claims[claim.metadata.uid]}) == []
    status = env.kube.get(ResourceClaim, claim.name).status
    assert status is not None
    assert {d.device for d in status.devices} == {d for _, d, _ in got}
    assert all(str(d.data.get("uuid", "")).startswith("GPU-") for d in status.devices)


def test_prepare_a_claim_kubedras_scheduler_allocated(env: Env, tmp_path: Path) -> None:
    env.cluster.kubectl("apply", "-f", "-", input=claim_and_pod("by-kubedra", scheduler="kubedra"))
    # The node also holds kube-scheduler's pods of the other tests: kubedra is told to only
    # warn about sharing it.
    with KubedraScheduler(env.cluster, tmp_path / "scheduler.log", "--no-leader-elect",
                          "--shared-nodes=warn") as sched:
        deadline = time.monotonic() + 60
        while not env.kube.get(Pod, "by-kubedra").spec.node_name:
            assert time.monotonic() < deadline, sched.tail()
            time.sleep(0.3)
    assert env.kube.get(Pod, "by-kubedra").spec.node_name == NODE
    claim = env.allocated("by-kubedra")
    assert claim.status is not None and claim.status.allocation is not None
    assert [r.name for r in claim.status.reserved_for] == ["by-kubedra"]
    answer = env.kubelet.prepare(claim)
    assert answer["problems"] == []
    ((pool, device, _),) = devices(answer, claim)
    assert (pool, device) == (NODE, claim.status.allocation.devices.results[0].device)


def test_unknown_and_replaced_claims_get_errors_of_their_own(env: Env) -> None:
    env.cluster.kubectl("apply", "-f", "-", input=claim_and_pod("replaced"))
    claim = env.allocated("replaced")
    stale = ("default", "replaced", "0b8f7c8e-1111-4222-8333-444444444444")
    unknown = ("default", "nowhere", "0b8f7c8e-5555-4666-8777-888888888888")
    answer = env.kubelet.prepare(claim, stale, unknown)
    assert answer["claims"][stale[2]]["error"] == (
        f"ResourceClaim default/replaced got replaced: UID is {claim.metadata.uid}, "
        f"the kubelet asked for {stale[2]}"
    )
    assert answer["claims"][unknown[2]]["error"] == "ResourceClaim default/nowhere not found"
    assert answer["problems"] == [  # the kubelet fails the pod, and says why
        "NodePrepareResources failed for ResourceClaim nowhere: "
        "ResourceClaim default/nowhere not found",
        "NodePrepareResources failed for ResourceClaim replaced: "
        f"ResourceClaim default/replaced got replaced: UID is {claim.metadata.uid}, "
        f"the kubelet asked for {stale[2]}",
    ]
    assert answer["claims"][claim.metadata.uid]["error"] == ""  # the good claim is prepared


def test_prepare_after_a_driver_restart_and_unprepare(env: Env) -> None:
    env.cluster.kubectl("apply", "-f", "-", input=claim_and_pod("survivor"))
    claim = env.allocated("survivor")
    first = devices(env.kubelet.prepare(claim), claim)
    env.driver.kill()  # kill -9: no cleanup
    env.driver.start()
    after = env.kubelet.prepare(claim)
    assert after["problems"] == [] and devices(after, claim) == first

    never = ("default", "never-prepared", "0b8f7c8e-9999-4aaa-8bbb-cccccccccccc")
    checkpoint = Checkpoint(env.driver.paths.plugin_dir, GPU, NODE)
    before = (checkpoint.read(), sorted(Path(env.driver.cdi).iterdir()))
    gone = env.kubelet.unprepare(never)  # not prepared: success, and nothing changes
    assert gone["problems"] == [] and gone["claims"][never[2]]["error"] == ""
    assert (checkpoint.read(), sorted(Path(env.driver.cdi).iterdir())) == before

    done = env.kubelet.unprepare(claim)
    assert done["problems"] == []
    snapshot = checkpoint.read()
    assert snapshot is not None and claim.metadata.uid not in snapshot.claims
    assert not (env.driver.cdi / f"k8s.{GPU}-claim_{claim.metadata.uid}.json").exists()
    assert env.kubelet.unprepare(claim)["problems"] == []  # the kubelet retries: still fine
    log = env.driver.log_text()
    assert "Traceback" not in log, log
