"""Valid base manifests (plain data) that the validation tests mutate one field at a time."""

from __future__ import annotations

import copy
from typing import Any

DELETE = object()


def mutate(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `base` with the dotted path (`a.b.0.c`) set to value, or deleted; an
    index one past a list's end appends."""
    doc = copy.deepcopy(base)
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = doc
    for part in parts[:-1]:
        node = node[part]
    if value is DELETE:
        del node[parts[-1]]
    elif isinstance(node, list) and parts[-1] == len(node):
        node.append(value)
    else:
        node[parts[-1]] = value
    return doc


def slice_doc() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                        "index": {"int": 0},
                        "driverVersion": {"version": "550.54.15"},
                        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
            ],
        },
    }


def shared_device_slice_doc() -> dict[str, Any]:
    doc = slice_doc()
    device = doc["spec"]["devices"][0]
    device["allowMultipleAllocations"] = True
    device["capacity"]["memory"] = {
        "value": "80Gi",
        "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}},
    }
    return doc


def counters_slice_doc() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-counters"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2},
            "sharedCounters": [{"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}],
        },
    }


def claim_doc() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
                    {
                        "name": "nic",
                        "firstAvailable": [
                            {"name": "rdma", "deviceClassName": "rdma.example.com"},
                            {"name": "eth", "deviceClassName": "eth.example.com"},
                        ],
                    },
                ],
                "constraints": [
                    {"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}
                ],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": "none"}},
                    }
                ],
            }
        },
    }


def allocated_claim_doc() -> dict[str, Any]:
    doc = claim_doc()
    doc["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "uid-1"}],
    }
    return doc


def class_doc() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}],
            "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}],
        },
    }


def template_doc() -> dict[str, Any]:
    claim = claim_doc()
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-template", "namespace": "default"},
        "spec": {"metadata": {"labels": {"app": "train"}}, "spec": claim["spec"]},
    }


def taint_rule_doc() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "gpu-0-maintenance"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"},
            "taint": {"key": "maintenance", "value": "planned", "effect": "NoSchedule"},
        },
    }


def pod_doc() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "default"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpu-template"}],
            "containers": [
                {
                    "name": "main",
                    "image": "pytorch:latest",
                    "command": ["python", "train.py"],
                    "resources": {"claims": [{"name": "gpus"}]},
                }
            ],
        },
    }


# --- scheduling.k8s.io/v1beta1 (Workload, PodGroup) and a pod in a group ------------------


def workload_doc() -> dict[str, Any]:
    """A Workload using every field a 1.37 server with kubedra's gates keeps."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "trainer", "namespace": "default"},
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "trainer"},
            "podGroupTemplates": [
                {
                    "name": "workers",
                    "schedulingPolicy": {"gang": {"minCount": 4}},
                    "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
                    "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "fabric"}],
                    "disruptionMode": {"all": {}},
                    "priority": 100,
                },
                {
                    "name": "driver",
                    "schedulingPolicy": {"basic": {}},
                    "resourceClaims": [{"name": "data", "resourceClaimName": "dataset"}],
                    "disruptionMode": {"single": {}},
                    "priority": 100,
                },
            ],
        },
    }


def pod_group_doc() -> dict[str, Any]:
    """A PodGroup using every field a 1.37 server with kubedra's gates keeps (its priority
    is left to admission)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "trainer-workers", "namespace": "default"},
        "spec": {
            "workloadRef": {"workloadName": "trainer", "templateName": "workers"},
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
            "resourceClaims": [
                {"name": "fabric", "resourceClaimTemplateName": "fabric"},
                {"name": "data", "resourceClaimName": "dataset"},
            ],
            "disruptionMode": {"all": {}},
        },
    }


def grouped_pod_doc() -> dict[str, Any]:
    """A pod of the group, sharing the group's `fabric` claim and with a claim of its own."""
    doc = pod_doc()
    doc["metadata"]["name"] = "trainer-0"
    doc["spec"]["schedulingGroup"] = {"podGroupName": "trainer-workers"}
    doc["spec"]["resourceClaims"].append({"name": "fabric", "resourceClaimTemplateName": "fabric"})
    return doc
