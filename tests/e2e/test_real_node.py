"""kubedra's DRA path ending in a running container, on a real node (upstream's kubelet and
containerd, Debian's runc): the chart installed by helm as a user installs it, the seed
placed by kubedra's scheduler and by kube-scheduler, prepared by the kubelet through
kubedra's driver, the device seen in the container; then the faults a node lives through.

Needs root (namespaces, mounts, cgroups): skipped otherwise, with that reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.devcluster.node.layout import NODE_LABEL
from kubedra.devcluster.pki import REAL_NODE
from tests.conftest import REPO
from tests.e2e.realnode import Node, install_chart, real_node_cluster, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a real node needs root")
SEED = REPO / "examples" / "seed-on-a-real-node"
TIMINGS: dict[str, float] = {}  # printed at the end (-s), recorded in docs/results.md


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, control_plane: object) -> Iterator[Node]:
    with real_node_cluster(tmp_path_factory.mktemp("real")) as running:
        TIMINGS["node Ready after the control plane (s)"] = running.cluster.node_ready_seconds or 0
        TIMINGS["helm install --wait (s)"] = install_chart(running)
        yield running
    print("\nreal node timings:", {k: round(v, 2) for k, v in TIMINGS.items()})


def test_the_node_runs_upstreams_kubelet_and_containerd(node: Node) -> None:
    status = node.json("get", "node", REAL_NODE)["status"]
    assert status["nodeInfo"]["kubeletVersion"] == "v1.37.2"
    assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.4.2"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready


def test_the_chart_runs_as_pods_on_the_node(node: Node) -> None:
    pods = node.json("get", "pods", "-n", "kubedra")["items"]
    running = {p["metadata"]["labels"]["app.kubernetes.io/component"]: [] for p in pods}
    for pod in pods:
        assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == REAL_NODE
        running[pod["metadata"]["labels"]["app.kubernetes.io/component"]].append(pod)
    assert len(running["driver"]) == 1 and len(running["scheduler"]) == 2
    # The driver registered with the kubelet through the registration socket and published.
    log = node.kubectl("logs", "-n", "kubedra", running["driver"][0]["metadata"]["name"])
    assert '"msg": "registration status", "registered": true' in log
    slices = node.json("get", "resourceslices")["items"]
    assert [(s["spec"]["nodeName"], len(s["spec"]["devices"])) for s in slices] == [(REAL_NODE, 8)]
    # One scheduler replica took the lease.
    lease = node.json("get", "lease", "-n", "kubedra", "kubedra-scheduler")
    holders = {p["metadata"]["name"] for p in running["scheduler"]}
    assert lease["spec"]["holderIdentity"].split("_")[0] in holders


def test_the_seed_runs_with_its_device_and_its_deletion_unprepares(node: Node) -> None:
    node.kubectl("apply", "-f", str(SEED))
    started = time.monotonic()
    node.wait("--for=condition=Ready pod/vllm-inference")
    TIMINGS["seed pod Ready after apply (s)"] = time.monotonic() - started
    logs = node.kubectl("logs", "vllm-inference").splitlines()
    claim = node.json("get", "resourceclaim", "vllm-gpu-claim")
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    device = next(d for d in node.json("get", "resourceslices")["items"][0]["spec"]["devices"]
                  if d["name"] == result["device"])  # fmt: skip
    uuid = device["attributes"]["uuid"]["string"]
    minor = int(result["device"].removeprefix("gpu-"))
    assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in logs and f"nvidia{minor}" in logs, logs
    assert {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} <= set(logs)
    uid = claim["metadata"]["uid"]
    assert node.cdi_specs == [f"k8s.gpu.nvidia.com-claim_{uid}.json"]
    assert node.checkpoint_claims() == [uid]
    node.kubectl("delete", "-f", str(SEED), "--wait=true")
    wait_until(lambda: not node.cdi_specs and not node.checkpoint_claims(), 60,
               "the claim unprepared: its CDI spec and checkpoint entry removed")  # fmt: skip


def _pod(name: str, scheduler: str, template: str = "one-gpu") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  schedulerName: {scheduler}
  terminationGracePeriodSeconds: 1
  nodeSelector: {{{NODE_LABEL}: real}}
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]
  containers:
  - name: c
    image: localhost/kubedra-busybox:1.35
    imagePullPolicy: Never
    command: [sh, -c, 'env | grep ^NVIDIA_VISIBLE_DEVICES; exec sleep 3600']
    resources: {{claims: [{{name: gpu}}]}}
"""


TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
"""


@pytest.fixture
def template(node: Node) -> Iterator[None]:
    node.kubectl("apply", "-f", "-", input=TEMPLATE)
    yield
    node.kubectl("delete", "pods", "--all", "--wait=true", "--timeout=120s")
    node.kubectl("delete", "resourceclaimtemplate", "one-gpu")
    wait_until(lambda: not node.cdi_specs and not node.checkpoint_claims(), 60, "all unprepared")


def test_the_driver_serves_a_pod_that_kube_scheduler_placed(node: Node, template: None) -> None:
    """kubedra's driver works with any scheduler."""
    node.kubectl("apply", "-f", "-", input=_pod("upstream", "default-scheduler"))
    node.wait("--for=condition=Ready pod/upstream")
    assert node.kubectl("logs", "upstream").startswith("NVIDIA_VISIBLE_DEVICES=GPU-")
    assert len(node.cdi_specs) == 1


def test_killing_the_driver_mid_prepare(node: Node, template: None) -> None:
    """8 pods at once; the driver container is killed as soon as the first claim's CDI spec
    appears, with the others in flight. The kubelet restarts it and retries: every pod runs,
    each claim prepared once, no orphan spec."""
    restarts = _driver_restarts(node)
    node.kubectl("apply", "-f", "-", input="---".join(_pod(f"burst-{i}", "kubedra") for i in range(8)))
    wait_until(lambda: node.cdi_specs, 60, "a first claim prepared")
    at_kill = len(node.cdi_specs)
    os.kill(_driver_pid(node), signal.SIGKILL)
    for i in range(8):
        node.wait(f"--for=condition=Ready pod/burst-{i}", timeout=180)
    TIMINGS["claims prepared when the driver was killed (of 8)"] = at_kill
    assert _driver_restarts(node) == restarts + 1
    claims = [c for c in node.json("get", "resourceclaims")["items"]]
    uids = sorted(c["metadata"]["uid"] for c in claims)
    assert node.checkpoint_claims() == uids  # each claim once
    assert node.cdi_specs == sorted(f"k8s.gpu.nvidia.com-claim_{u}.json" for u in uids)
    devices = [r["device"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(set(devices)) == 8
    visible = {node.kubectl("logs", f"burst-{i}").strip() for i in range(8)}
    assert len(visible) == 8  # each container its own GPU


def test_restarting_the_kubelet_keeps_pods_and_prepares_nothing_twice(
    node: Node, template: None
) -> None:
    node.kubectl("apply", "-f", "-", input=_pod("steady", "kubedra"))
    node.wait("--for=condition=Ready pod/steady")
    before = node.json("get", "pod", "steady")["status"]["containerStatuses"][0]
    (spec,) = node.cdi_specs
    written = node.layout.path("cdi", spec).stat().st_mtime_ns
    prepared = node.checkpoint_claims()
    kubelet = node.real.component_pid("kubelet")
    assert kubelet is not None
    os.kill(kubelet, signal.SIGTERM)
    wait_until(lambda: node.real.component_pid("kubelet") not in (None, kubelet), 30, "a new kubelet")
    time.sleep(5)  # the new kubelet syncs its pods
    node.wait("--for=condition=Ready pod/steady")
    after = node.json("get", "pod", "steady")["status"]["containerStatuses"][0]
    assert after["restartCount"] == before["restartCount"] == 0
    assert after["containerID"] == before["containerID"]  # the same container kept running
    # Not prepared again: the same checkpoint entry, the CDI spec never rewritten.
    assert node.checkpoint_claims() == prepared
    assert node.layout.path("cdi", spec).stat().st_mtime_ns == written


def test_deleting_a_pod_while_its_prepare_is_in_flight(node: Node, template: None) -> None:
    node.kubectl("apply", "-f", "-", input=_pod("gone", "kubedra"))
    wait_until(lambda: node.json("get", "pod", "gone")["spec"].get("nodeName"), 60, "placed")
    node.kubectl("delete", "pod", "gone", "--wait=true", "--timeout=120s")
    wait_until(lambda: not node.cdi_specs and not node.checkpoint_claims(), 60,
               "nothing left prepared for the deleted pod")  # fmt: skip
    assert node.json("get", "resourceclaims")["items"] == []  # the generated claim went too


def _driver_pod(node: Node) -> str:
    pods = node.json("get", "pods", "-n", "kubedra", "-l", "app.kubernetes.io/component=driver")
    (pod,) = pods["items"]
    return str(pod["metadata"]["name"])


def _driver_log(node: Node) -> str:
    return node.kubectl("logs", "-n", "kubedra", _driver_pod(node))


def _driver_restarts(node: Node) -> int:
    pod = node.json("get", "pod", "-n", "kubedra", _driver_pod(node))
    return int(pod["status"]["containerStatuses"][0]["restartCount"])


def _driver_pid(node: Node) -> int:
    """The driver's process on the host, by its command line (the container's pid 1)."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"driver" in args and b"run" in args and f"--node={node.layout.name}".encode() in args:
                return int(proc.name)
    raise AssertionError("no driver process found")


def test_a_failed_gpu_is_tainted_shown_in_its_pods_status_and_its_pod_evicted(
    node: Node, template: None
) -> None:
    """A fault injected into the driver running in its pod (`kubedra driver fault`, through
    kubectl exec) taints the device in the slice; the kubelet hears it on the health stream
    and shows it in the pod's allocatedResourcesStatus; kubedra's eviction controller evicts
    the pod (NoExecute); the device mended, the taint goes."""
    node.kubectl("apply", "-f", "-", input=_pod("victim", "kubedra"))
    node.wait("--for=condition=Ready pod/victim")
    (claim,) = node.json("get", "resourceclaims")["items"]
    device = claim["status"]["allocation"]["devices"]["results"][0]["device"]
    fault = ["exec", "-n", "kubedra", _driver_pod(node), "--", "python3", "-m", "kubedra",
             "driver", "fault", "--driver", "gpu.nvidia.com", "--node", REAL_NODE,
             "--device", device]  # fmt: skip
    node.kubectl(*fault, "--kind", "xid")
    started = time.monotonic()
    wait_until(lambda: _taints(node, device) == {"gpu.nvidia.com/xid": "NoExecute"}, 10, "tainted")
    TIMINGS["fault -> taint in the slice (s)"] = time.monotonic() - started

    def unhealthy() -> list[dict[str, str]]:
        statuses = node.json("get", "pod", "victim")["status"]["containerStatuses"]
        return [r for s in statuses[0].get("allocatedResourcesStatus", [])
                for r in s["resources"] if r.get("health") == "Unhealthy"]  # fmt: skip

    wait_until(unhealthy, 30, "the pod's status shows the device unhealthy")
    TIMINGS["fault -> pod status Unhealthy (s)"] = time.monotonic() - started
    (shown,) = unhealthy()
    assert shown["resourceID"].endswith(f"-{device}") and "Xid 74" in shown.get("message", "")
    with _eviction_controller(node):
        wait_until(lambda: not node.json("get", "pods")["items"], 60, "the pod evicted")
    node.kubectl(*fault, "--clear")
    wait_until(lambda: _taints(node, device) == {}, 10, "the taint removed")


def _taints(node: Node, device: str) -> dict[str, str]:
    (rs,) = node.json("get", "resourceslices")["items"]
    (found,) = [d for d in rs["spec"]["devices"] if d["name"] == device]
    return {t["key"]: t["effect"] for t in found.get("taints", [])}


@contextlib.contextmanager
def _eviction_controller(node: Node) -> Iterator[None]:
    """kubedra's device taint eviction controller against the cluster (the dev cluster's
    kube-controller-manager runs none)."""
    env = {**os.environ, "KUBECONFIG": str(node.cluster.kubeconfig)}
    env.pop("KUBEDRA_STORE", None)
    proc = subprocess.Popen([sys.executable, "-m", "kubedra", "controller", "run"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(30)


def test_helm_uninstall_leaves_no_kubedra_object(node: Node) -> None:
    """Last in this module: the release's objects go with it, and the driver's slices go
    when the kubelet sees its plugin unregistered (upstream's kubelet wipes a driver's slices
    30 s after its socket is gone, so that a restarting driver keeps them)."""
    done = node.helm("uninstall", "kubedra", "-n", "kubedra", "--wait")
    assert done.returncode == 0, done.stderr
    kinds = "deviceclasses,clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings"
    labelled = node.kubectl("get", kinds, "-l", "app.kubernetes.io/instance=kubedra", "-o", "name")
    assert labelled == ""
    wait_until(lambda: node.json("get", "resourceslices")["items"] == [], 90, "slices wiped")
    wait_until(lambda: node.json("get", "pods", "-n", "kubedra")["items"] == [], 60, "pods gone")
    assert node.kubectl("get", "all,leases,pdb,serviceaccounts,roles,rolebindings", "-n", "kubedra",
                        "-o", "name").split() == ["serviceaccount/default"]  # fmt: skip
