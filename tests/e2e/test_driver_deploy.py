"""deploy/ on upstream's control plane, with nothing but the rendered manifests' permissions.

`make -s render-deploy` renders the Helm chart (offline); kubectl applies it; then the
driver and the scheduler run as processes with kubeconfigs made from their own service
accounts' tokens (the driver's bound to its node, as a pod's token is), never admin. The
seed scenario is published by the driver, scheduled, and prepared through upstream's
kubelet client, with the claim's device status written under the driver's role. Every verb
of the driver's role is then taken away in turn, and the part of the flow that needs it
fails; the scheduler's role is compared, call by call, with what kubedra's scheduler does.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedra.api.coordination import Lease
from kubedra.api.core import Pod
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import ResourceClaim, ResourcePool, ResourceSlice, ResourceSliceSpec
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.gotool import HELM
from kubedra.devcluster.harness import DevCluster
from tests.conftest import REPO
from tests.driver.driverproc import GPU, DriverProcess
from tests.e2e.conftest import run_kubedra
from tests.e2e.driver_env import (
    allocated_claim,
    cluster_driver,
    gpu_node,
    short_dir,
    token_kubeconfig,
    wait_for,
)
from tests.e2e.scheduler_process import KubedraScheduler
from tests.e2e.upstream_kubelet import UpstreamKubelet, devices

NAMESPACE = "kubedra"
DRIVER_SA = f"system:serviceaccount:{NAMESPACE}:kubedra-driver"
SCHEDULER_SA = f"system:serviceaccount:{NAMESPACE}:kubedra-scheduler"
SEED_NODE = "seed-0"
SEED = REPO / "examples" / "seed"


def _render(offline: bool = True) -> str:
    """`make -s render-deploy`, without a network when this machine can drop it."""
    HELM.build()  # (once per machine; the rendering itself must not need it)
    isolate = ["unshare", "--net"] if offline and _can_unshare() else []
    done = subprocess.run(
        [*isolate, "make", "-s", "render-deploy"], capture_output=True, text=True, cwd=REPO,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _can_unshare() -> bool:
    return shutil.which("unshare") is not None and (
        subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0
    )


@dataclass
class Deployed:
    cluster: DevCluster
    kube: KubeStore
    manifests: list[dict[str, Any]]
    folder: Path

    def doc(self, kind: str, name: str) -> dict[str, Any]:
        (found,) = [
            d for d in self.manifests if d["kind"] == kind and d["metadata"]["name"] == name
        ]
        return found

    def can(self, who: str, *args: str) -> bool:
        done = self.cluster.kubectl("auth", "can-i", *args, "--as", who, check=False)
        return done.strip() == "yes"

    def apply(self, *docs: dict[str, Any]) -> None:
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


@pytest.fixture(scope="module")
def deployed(cluster: DevCluster) -> Iterator[Deployed]:
    manifests = [d for d in yaml.safe_load_all(_render()) if d]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))
    kube = cluster.store()
    with short_dir() as folder:
        yield Deployed(cluster, kube, manifests, folder)
    kube.close()


def test_the_rendered_manifests_are_all_there(deployed: Deployed) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in deployed.manifests)
    assert kinds == [
        ("ClusterRole", "kubedra-driver"),
        ("ClusterRole", "kubedra-scheduler"),
        ("ClusterRoleBinding", "kubedra-driver"),
        ("ClusterRoleBinding", "kubedra-scheduler"),
        ("DaemonSet", "kubedra-driver-gpu-nvidia-com"),
        ("Deployment", "kubedra-scheduler"),
        ("DeviceClass", "gpu.nvidia.com"),
        ("DeviceClass", "mig.nvidia.com"),
        ("DeviceClass", "rdma.dra.net"),
        ("DeviceClass", "tpu.google.com"),
        ("Lease", "kubedra-scheduler"),
        ("Namespace", "kubedra"),
        ("PodDisruptionBudget", "kubedra-scheduler"),
        ("Role", "kubedra-scheduler-leader-election"),
        ("RoleBinding", "kubedra-scheduler-leader-election"),
        ("ServiceAccount", "kubedra-driver"),
        ("ServiceAccount", "kubedra-scheduler"),
        ("ValidatingAdmissionPolicy", "kubedra-driver-own-node-slices"),
        ("ValidatingAdmissionPolicyBinding", "kubedra-driver-own-node-slices"),
    ]
    pod = deployed.doc("DaemonSet", "kubedra-driver-gpu-nvidia-com")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][:3] == ["--in-cluster", "driver", "run"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in (
        container["env"]
    )
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    hosts = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert (
        mounts
        == hosts
        == {  # the same paths inside as on the node
            "plugins-registry": "/var/lib/kubelet/plugins_registry",
            "plugins": "/var/lib/kubelet/plugins",
            "cdi": "/var/run/cdi",
        }
    )
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["privileged"] is False
    scheduler = deployed.doc("Deployment", "kubedra-scheduler")["spec"]
    assert scheduler["replicas"] == 2
    assert "--leader-elect" in scheduler["template"]["spec"]["containers"][0]["args"]
    applied = deployed.cluster.kubectl("get", "serviceaccounts", "-n", NAMESPACE, "-o", "name")
    assert applied.split() == [
        "serviceaccount/default",
        "serviceaccount/kubedra-driver",
        "serviceaccount/kubedra-scheduler",
    ]


@pytest.fixture(scope="module")
def seed(deployed: Deployed) -> Iterator[DriverProcess]:
    """The seed on node seed-0, published by a driver with its service account's token."""
    gpu_node(deployed.kube, SEED_NODE)
    kubeconfig = token_kubeconfig(
        deployed.cluster, "kubedra-driver", deployed.folder / "seed.kubeconfig", node=SEED_NODE
    )
    driver = cluster_driver(deployed.folder / "seed", SEED_NODE, kubeconfig).start()
    converted = run_kubedra(deployed.cluster, "convert", "-f", str(SEED))
    assert converted.returncode == 0, converted.stderr
    deployed.cluster.kubectl("apply", "-f", "-", input=converted.stdout)
    try:
        yield driver
    finally:
        driver.stop()


def test_the_seed_is_published_scheduled_and_prepared_on_the_deployed_roles(
    deployed: Deployed, seed: DriverProcess
) -> None:
    kube = deployed.kube
    wait_for(
        "kube-scheduler to bind the seed pod",
        lambda: kube.get(Pod, "vllm-inference").spec.node_name,
    )
    assert kube.get(Pod, "vllm-inference").spec.node_name == SEED_NODE
    claim = kube.get(ResourceClaim, "vllm-gpu-claim")
    kubelet = UpstreamKubelet(seed.paths.registration_socket, seed.cdi)
    answer = kubelet.prepare(claim)
    assert answer["problems"] == []
    ((pool, device, _),) = devices(answer, claim)
    assert pool == SEED_NODE
    wait_for("the claim's device status", lambda: _status(kube, claim) == [device])
    assert "forbidden" not in seed.log_text().lower()


def test_the_driver_may_write_only_its_own_nodes_slices(
    deployed: Deployed, seed: DriverProcess
) -> None:
    gpu_node(deployed.kube, "elsewhere-0")
    kubeconfig = deployed.folder / "seed.kubeconfig"  # bound to seed-0
    with short_dir() as root:
        driver = cluster_driver(root, "elsewhere-0", kubeconfig).start()
        try:
            wait_for(
                "the refusal", lambda: "publishing ResourceSlices failing" in driver.log_text()
            )
        finally:
            driver.stop()
        log = driver.log_text()
    assert "the driver on node seed-0 may not write ResourceSlices of node elsewhere-0" in log
    assert not [s for s in deployed.kube.list(ResourceSlice) if s.spec.node_name == "elsewhere-0"]


# --- every verb of the driver's role is needed ---------------------------------------------

# (resource, verb) of the driver's ClusterRole -> where the flow stops without it
DRIVER_VERBS = {
    ("resourceslices", "list"): "list resourceslices",
    ("nodes", "get"): 'get nodes "{node}"',
    ("resourceslices", "get"): 'get resourceslices.resource.k8s.io "{node}-gpu.nvidia.com-9"',
    ("resourceslices", "delete"): 'delete resourceslices.resource.k8s.io "{node}-gpu.nvidia.com-9"',
    ("resourceslices", "update"): 'update resourceslices.resource.k8s.io "{node}-gpu.nvidia.com-0"',
    ("resourceslices", "create"): 'create resourceslices.resource.k8s.io "{node}-gpu.nvidia.com-1"',
    ("resourceclaims", "get"): 'get resourceclaims.resource.k8s.io "verbs"',
    ("resourceclaims/status", "update"): 'update resourceclaims.resource.k8s.io/status "verbs"',
    ("resourceclaims/driver", "associated-node:update"): "resourceclaims/driver",
}


def _without(role: dict[str, Any], resource: str, verb: str) -> dict[str, Any]:
    reduced = copy.deepcopy(role)
    for rule in reduced["rules"]:
        if resource in rule["resources"] and verb in rule["verbs"]:
            rule["verbs"].remove(verb)
    reduced["rules"] = [r for r in reduced["rules"] if r["verbs"]]
    return reduced


def _can_driver(deployed: Deployed, resource: str, verb: str) -> bool:
    group_resource, _, sub = resource.partition("/")
    target = f"{group_resource}.resource.k8s.io" if group_resource != "nodes" else "nodes"
    if sub == "driver":
        target += f"/{GPU}"
    args = [verb, target] + ([f"--subresource={sub}"] if sub else [])
    return deployed.can(DRIVER_SA, *args)


def _exercise(deployed: Deployed, node: str, root: Path) -> DriverProcess:
    """What the driver does on a node, each API call once: a pool of 5 slices (one stale
    slice to delete, one wrong slice to update, the others to create), its Node, then a
    claim prepared and its status written."""
    kube = deployed.kube
    gpu_node(kube, node)
    for index in (0, 9):  # a slice without the node's devices, and a stale one
        pool = ResourcePool(name=node, generation=1, resource_slice_count=1)
        spec = ResourceSliceSpec(driver=GPU, pool=pool, node_name=node)
        kube.create(ResourceSlice(metadata=ObjectMeta(name=f"{node}-{GPU}-{index}"), spec=spec))
    kubeconfig = token_kubeconfig(deployed.cluster, "kubedra-driver", root / "kc", node=node)
    driver = cluster_driver(root, node, kubeconfig, profile="a100-40x8-mig").start()
    wait_for(
        "the pool published or refused",
        lambda: "pool published" in driver.log_text() or "failing" in driver.log_text(),
    )
    if "pool published" in driver.log_text():
        claim = allocated_claim(kube, "verbs", node, ["gpu-0"])
        try:
            kubelet = UpstreamKubelet(driver.paths.registration_socket, driver.cdi)
            if not kubelet.prepare(claim)["problems"]:
                wait_for(
                    "the claim's status written or refused",
                    lambda: _status(kube, claim) or "status not written" in driver.log_text(),
                )
        finally:
            kube.delete(ResourceClaim, "verbs")
    driver.stop()
    return driver


@pytest.mark.parametrize(
    "removed", [None, *DRIVER_VERBS], ids=lambda v: "full role" if v is None else "-".join(v)
)
def test_every_verb_of_the_driver_role_is_needed(
    deployed: Deployed, removed: tuple[str, str] | None
) -> None:
    role = deployed.doc("ClusterRole", "kubedra-driver")
    node = "verbs-" + (
        "all" if removed is None else "-".join(removed).replace("/", "-").replace(":", "-")
    )
    try:
        if removed is not None:
            deployed.apply(_without(role, *removed))
            wait_for("RBAC to take the verb away", lambda: not _can_driver(deployed, *removed))
        with short_dir() as root:  # (log lines quote as logfmt does: \" inside values)
            log = _exercise(deployed, node, root).log_text().replace('\\"', '"')
    finally:
        deployed.apply(role)
        wait_for(
            "RBAC to give it back", lambda: _can_driver(deployed, *(removed or ("nodes", "get")))
        )
    slices = sorted(s.name for s in deployed.kube.list(ResourceSlice) if s.spec.node_name == node)
    if removed is None:  # every call of the flow succeeded
        assert slices == [f"{node}-{GPU}-{i}" for i in range(5)]
        assert "claim prepared" in log and "claim status written" in log
        assert "forbidden" not in log.lower()
    else:
        assert "forbidden" in log.lower()
        assert DRIVER_VERBS[removed].format(node=node) in log, log[-2000:]


def _status(kube: KubeStore, claim: ResourceClaim) -> list[str]:
    status = kube.get(ResourceClaim, claim.name, claim.namespace).status
    return [d.device for d in (status.devices if status else ()) if d.driver == GPU]


# --- the scheduler's role --------------------------------------------------------------------

# What kubedra's scheduler calls (src/kubedra/scheduler, with `kubedra scheduler run`'s
# leases and events of issue 18), as (API group, resource, verb). The role must grant exactly
# these; leases are namespaced (its Role), the rest cluster-wide (its ClusterRole).
SCHEDULER_CALLS = {
    ("", "nodes", "list"), ("", "nodes", "watch"),
    ("", "namespaces", "list"), ("", "namespaces", "watch"),
    ("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"),
    ("", "pods/status", "update"),
    ("", "pods/binding", "create"),
    *{("resource.k8s.io", kind, verb)
      for kind in ("resourceslices", "deviceclasses", "devicetaintrules", "resourceclaimtemplates")
      for verb in ("list", "watch")},
    *{("resource.k8s.io", "resourceclaims", verb)
      for verb in ("get", "list", "watch", "create", "update", "delete")},
    ("resource.k8s.io", "resourceclaims/status", "update"),
    ("resource.k8s.io", "resourceclaims/binding", "update"),
    ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch"),
    # gangs: PodGroups in the feed (and read by the queue's order), their condition
    *{("scheduling.k8s.io", "podgroups", verb) for verb in ("get", "list", "watch")},
    ("scheduling.k8s.io", "podgroups/status", "update"),
}  # fmt: skip
SCHEDULER_LEASE_CALLS = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_scheduler_role_grants_exactly_the_schedulers_calls(deployed: Deployed) -> None:
    assert _grants(deployed.doc("ClusterRole", "kubedra-scheduler")) == SCHEDULER_CALLS
    lease_role = deployed.doc("Role", "kubedra-scheduler-leader-election")
    assert _grants(lease_role) == SCHEDULER_LEASE_CALLS
    for group, resource, verb in sorted(SCHEDULER_CALLS):
        if group == "scheduling.k8s.io":
            continue  # not served by this cluster (its gates are off): kubectl says no
        name, _, sub = resource.partition("/")
        target = f"{name}.{group}" if group else name
        extra = [f"--subresource={sub}"] if sub else []
        assert deployed.can(SCHEDULER_SA, verb, target, *extra, "-A"), (verb, resource)
    assert deployed.can(SCHEDULER_SA, "update", "leases/kubedra-scheduler", "-n", NAMESPACE)
    for verb, target in (("update", "leases/someone-else"), ("delete", "pods"),
                         ("update", "pods"), ("update", "resourceslices.resource.k8s.io"),
                         ("create", "nodes"), ("get", "secrets")):  # fmt: skip
        assert not deployed.can(SCHEDULER_SA, verb, target, "-n", NAMESPACE), (verb, target)


def test_the_deployments_scheduler_allocates_with_its_own_token(
    deployed: Deployed, seed: DriverProcess, tmp_path: Path
) -> None:
    """`kubedra scheduler run` with the Deployment's own arguments (leader election on the
    chart's Lease in its namespace) and the scheduler service account's token."""
    kubeconfig = token_kubeconfig(
        deployed.cluster, "kubedra-scheduler", deployed.folder / "scheduler.kubeconfig"
    )
    deployed.cluster.kubectl("apply", "-f", "-", input=_KUBEDRA_POD)
    # The seed node also holds kube-scheduler's seed pod: a shared node, which kubedra leaves
    # alone by default; here it is told to only warn.
    args = [*_deployment_run_args(deployed), "--shared-nodes=warn"]
    with KubedraScheduler(deployed.cluster, tmp_path / "scheduler.log", *args,
                          kubeconfig=kubeconfig) as sched:
        sched.wait_ready()
        deadline = time.monotonic() + 60
        while not deployed.kube.get(Pod, "by-kubedra").spec.node_name:
            assert time.monotonic() < deadline, sched.tail()
            time.sleep(0.3)
        assert "forbidden" not in sched.log.read_text().lower(), sched.tail()
    assert deployed.kube.get(Pod, "by-kubedra").spec.node_name == SEED_NODE
    claim = deployed.kube.get(ResourceClaim, "by-kubedra")
    assert claim.status is not None and claim.status.allocation is not None
    assert [r.name for r in claim.status.reserved_for] == ["by-kubedra"]
    lease = deployed.kube.get(Lease, "kubedra-scheduler", NAMESPACE)
    assert lease.spec.acquire_time, "the replica led on the chart's Lease"
    assert lease.spec.holder_identity == "", "and gave it up when stopped"
    answer = UpstreamKubelet(seed.paths.registration_socket, seed.cdi).prepare(claim)
    assert answer["problems"] == []


def _deployment_run_args(deployed: Deployed) -> list[str]:
    """The scheduler container's arguments after `scheduler run`, as the pod would get them
    (its namespace substituted), but the metrics port: the test picks a free one."""
    args = deployed.doc("Deployment", "kubedra-scheduler")["spec"]["template"]["spec"][
        "containers"][0]["args"]
    assert args[:3] == ["--in-cluster", "scheduler", "run"], args
    return [a.replace("$(POD_NAMESPACE)", NAMESPACE) for a in args[3:]
            if not a.startswith("--metrics-port")]


_KUBEDRA_POD = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: by-kubedra, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: by-kubedra, namespace: default}
spec:
  schedulerName: kubedra
  nodeSelector: {kubernetes.io/hostname: seed-0}
  resourceClaims: [{name: gpu, resourceClaimName: by-kubedra}]
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: gpu}]}
"""


def test_values_shape_the_chart() -> None:
    """What an admin changes with values: several drivers, no scheduler, own classes, image."""
    from kubedra.devcluster.deploy import render

    values = [
        "namespace.create=false",  # helm install --create-namespace
        "scheduler.enabled=false",
        "deviceClasses=null",
        "image.tag=dev",
        "driver.drivers[0].name=gpu.nvidia.com",
        "driver.drivers[0].backend=nvml",
        "driver.drivers[1].name=dra.net",
        "driver.drivers[1].backend=simulated",
        "driver.drivers[1].profile=h100x8",
    ]
    docs = [d for d in yaml.safe_load_all(render(values, namespace="dra")) if d]
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert [k for k in kinds if k[0] in ("DaemonSet", "ClusterRole", "Deployment")] == [
        ("ClusterRole", "kubedra-driver"),
        ("DaemonSet", "kubedra-driver-dra-net"),
        ("DaemonSet", "kubedra-driver-gpu-nvidia-com"),
    ]
    assert not [k for k in kinds if k[0] in ("Namespace", "DeviceClass", "Role")]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    (per_driver,) = [r for r in role["rules"] if r["resources"] == ["resourceclaims/driver"]]
    assert per_driver["resourceNames"] == ["gpu.nvidia.com", "dra.net"]
    nic = next(d for d in docs if d["metadata"]["name"] == "kubedra-driver-dra-net")
    (container,) = nic["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "ghcr.io/kubedra/kubedra:dev"
    assert {"--driver=dra.net", "--backend=simulated", "--profile=h100x8"} <= set(container["args"])
    assert all(d["metadata"].get("namespace", "dra") == "dra" for d in docs)
