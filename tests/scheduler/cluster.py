"""Small clusters for scheduler tests, built as plain manifests and stored for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubedra.api.codec import decode_object
from kubedra.cluster import SqliteStore

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]},
}


def gpu_node(store: SqliteStore, name: str, gpus: int = 8, memory: str = "80Gi",
             domains: int = 2, labels: dict[str, str] | None = None, cpu: str = "64") -> None:
    """A node with `gpus` GPUs split evenly into `domains` NVLink domains, 2 per PCIe root."""
    store.create(decode_object({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": cpu, "memory": "512Gi"}}}).obj)
    per_domain = max(gpus // domains, 1)
    devices = [{
        "name": f"gpu-{i}",
        "attributes": {
            "index": {"int": i},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "nvlinkDomain": {"int": i // per_domain},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 2:02x}"},
        },
        "capacity": {"memory": {"value": memory}},
    } for i in range(gpus)]
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": name,
                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices}}).obj)


def gpu_template(store: SqliteStore, name: str, count: int, namespace: str = "default",
                 constraint: str | None = None) -> None:
    spec: dict[str, Any] = {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}}
    if constraint:
        spec["devices"]["constraints"] = [{"matchAttribute": constraint}]
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": spec}}).obj)


def gpu_pod(store: SqliteStore, name: str, template: str | None = None, claim: str | None = None,
            priority: int = 0, namespace: str = "default", **spec: Any) -> None:
    entry: dict[str, Any] = {"name": "gpus"}
    if template:
        entry["resourceClaimTemplateName"] = template
    else:
        entry["resourceClaimName"] = claim
    store.create(decode_object({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
        "spec": {"priority": priority, "resourceClaims": [entry],
                 "containers": [{"name": "main", "resources": {"claims": [{"name": "gpus"}]}}],
                 **spec}}).obj)


def user_claim(store: SqliteStore, name: str, count: int = 1, namespace: str = "default") -> None:
    """A ResourceClaim made by a user (not from a template) for `count` GPUs."""
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}},
    }).obj)


def new_store(tmp_path: Path) -> SqliteStore:
    store = SqliteStore(tmp_path / "state.db")
    store.create(decode_object(GPU_CLASS).obj)
    return store
