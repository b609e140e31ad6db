"""The allocation checker: silent on what the scheduler wrote, loud on every kind of wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
)
from kubedra.cluster import SqliteStore
from kubedra.scheduler.scheduler import Scheduler
from kubedra.scheduler.verify import check_allocations
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template, new_store, user_claim


def results(*devices: str, request: str = "gpus") -> AllocationResult:
    return AllocationResult(devices=DeviceAllocationResult(results=tuple(
        DeviceRequestAllocationResult(request=request, driver="gpu.nvidia.com", pool=d.split("/")[0],
                                      device=d.split("/")[1])
        for d in devices)))


def allocate_by_hand(store: SqliteStore, claim: str, allocation: AllocationResult,
                     pod: str | None = None, node: str | None = None) -> None:
    """Write a claim's status (and bind its pod) as a faulty scheduler might."""
    current = store.get(ResourceClaim, claim)
    reserved: tuple[ResourceClaimConsumerReference, ...] = ()
    if pod is not None:
        p = store.get(Pod, pod)
        reserved = (ResourceClaimConsumerReference(resource="pods", name=pod, uid=p.metadata.uid or ""),)
        if node is not None:
            store.bind(p, node)
    store.update_status(msgspec.structs.replace(
        current, status=ResourceClaimStatus(allocation=allocation, reserved_for=reserved)))


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4, memory="80Gi")
    gpu_node(store, "n2", gpus=4, memory="40Gi")
    return store


def test_what_the_scheduler_writes_is_valid(store: SqliteStore) -> None:
    gpu_template(store, "two", 2, constraint="nvlinkDomain")
    for i in range(4):
        gpu_pod(store, f"p{i}", template="two")
    assert all(o.node for o in Scheduler(store).run_once())
    assert check_allocations(store) == []


def test_a_device_in_two_claims(store: SqliteStore) -> None:
    for name in ("a", "b"):
        user_claim(store, name)
        gpu_pod(store, name, claim=name)
        allocate_by_hand(store, name, results("n1/gpu-0"), pod=name, node="n1")
    assert check_allocations(store) == ["device gpu.nvidia.com/n1/gpu-0 is allocated to 2 claims"]


def test_a_count_not_met(store: SqliteStore) -> None:
    user_claim(store, "c", count=2)
    gpu_pod(store, "p", claim="c")
    allocate_by_hand(store, "c", results("n1/gpu-0"), pod="p", node="n1")
    (problem,) = check_allocations(store)
    assert problem.startswith("claim default/c on node n1: holds [('gpus', 'gpu.nvidia.com/n1/gpu-0')]")


def test_a_device_the_selectors_refuse(store: SqliteStore) -> None:
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu", "selectors": [{"cel": {"expression":
                'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'}}]}}]}},
    }).obj)
    gpu_pod(store, "p", claim="big")
    allocate_by_hand(store, "big", results("n2/gpu-0"), pod="p", node="n2")  # a 40Gi GPU
    (problem,) = check_allocations(store)
    assert problem.startswith("claim default/big on node n2: its request cannot be met there")


def test_a_constraint_not_met(store: SqliteStore) -> None:
    gpu_template(store, "two", 2, constraint="nvlinkDomain")
    gpu_pod(store, "p", template="two")
    Scheduler(store).run_once()
    (claim,) = store.list(ResourceClaim)
    store.update_status(msgspec.structs.replace(claim, status=msgspec.structs.replace(
        claim.status, allocation=results("n1/gpu-0", "n1/gpu-3"))))  # two NVLink domains
    (problem,) = check_allocations(store)
    assert "n1/gpu-3" in problem and "a valid allocation preferring them is" in problem


@pytest.mark.parametrize(("case", "expected"), [
    ("reserved-for-gone-pod", "claim default/c: reserved for pod p, which is gone"),
    ("reserved-for-pending-pod", "claim default/c: reserved for pod p, not bound"),
    ("bound-without-allocation", "pod default/p on n1: claim c is not allocated"),
    ("bound-off-the-allocation", "pod default/p on n2: claim c's allocation does not admit the node"),
])
def test_reservations_and_bindings(store: SqliteStore, case: str, expected: str) -> None:
    user_claim(store, "c")
    gpu_pod(store, "p", claim="c")
    selector: dict[str, Any] = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    on_n1 = msgspec.convert(
        {**msgspec.to_builtins(results("n1/gpu-0")), "nodeSelector": selector}, AllocationResult)
    if case == "reserved-for-gone-pod":
        allocate_by_hand(store, "c", on_n1, pod="p")
        store.delete(Pod, "p")
    elif case == "reserved-for-pending-pod":
        allocate_by_hand(store, "c", on_n1, pod="p")
    elif case == "bound-without-allocation":
        store.bind(store.get(Pod, "p"), "n1")
    else:
        allocate_by_hand(store, "c", on_n1, pod="p", node="n2")
    assert expected in check_allocations(store)


def test_the_check_command_says_valid_or_lists_each_problem(store: SqliteStore) -> None:
    def check() -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBEDRA_STORE": str(store.path)}
        env.pop("KUBECONFIG", None)
        return subprocess.run([sys.executable, "-m", "kubedra", "scheduler", "check"],
                              capture_output=True, text=True, env=env, timeout=120)

    gpu_template(store, "one", 1)
    gpu_pod(store, "p", template="one")
    Scheduler(store).run_once()
    ok = check()
    assert (ok.returncode, ok.stdout) == (0, "every allocation is valid\n")
    for name in ("a", "b"):
        user_claim(store, name)
        gpu_pod(store, name, claim=name)
        allocate_by_hand(store, name, results("n2/gpu-3"), pod=name, node="n2")
    bad = check()
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stdout == "device gpu.nvidia.com/n2/gpu-3 is allocated to 2 claims\n"
    assert bad.stderr == "1 problem(s)\n"
