"""Trace records to Kubernetes objects: what the simulated cluster's API server holds.

DRA mode (the default): each GPU is a device of driver `gpu.nvidia.com` in the node's
ResourceSlice, with `productName` = the trace's model, capacity `memory` (where the model
is known) and a sharing capacity `milli` = 1000 with `allowMultipleAllocations: true` and
`requestPolicy: {default: 1000, validRange: {min: 1, step: 1}}`. A task's claim asks for
`num_gpu` devices (ExactCount) with `capacity.requests: {gpu.nvidia.com/milli: gpu_milli}`:
a 0.46-GPU task consumes 460 of one GPU's 1000, and a whole-GPU task asks for the full 1000,
so no other claim fits beside it (exclusive in effect). A GPU-model constraint (`gpu_spec`)
becomes a CEL selector on `productName`. CPU and memory are container requests checked
against the node's allocatable.

Device-plugin mode (the baseline): the same cluster publishes plain exclusive devices (no
sharing capacity, what `nvidia.com/gpu: N` gives), every task asks for ceil(demand) whole
GPUs (a 0.5-GPU task takes one GPU), and a model constraint is a required node affinity
on the node label `gpu.nvidia.com/model` (GPU Feature Discovery style), not a device
selector. Both modes run through the same scheduler and allocator.
"""

from __future__ import annotations

from typing import Any, Literal

from kubedra.api.codec import decode_object
from kubedra.api.meta import KubeObject
from kubedra.scheduler.policies.fragmentation import TaskShape
from kubedra.sim.trace import MILLI, NodeSpec, TaskSpec

DRIVER = "gpu.nvidia.com"
CLASS = "gpu.nvidia.com"
MILLI_CAPACITY = "milli"
MILLI_QUALIFIED = f"{DRIVER}/{MILLI_CAPACITY}"
MODEL_LABEL = "gpu.nvidia.com/model"
NAMESPACE = "default"
Mode = Literal["dra", "device-plugin"]


def obj(raw: dict[str, Any]) -> KubeObject:
    return decode_object(raw).obj


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def node_doc(node: NodeSpec) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": node.name, **dict(node.labels)}
    if node.model:
        labels[MODEL_LABEL] = node.model
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels},
        "status": {
            "allocatable": {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi"},
            "capacity": {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi"},
        },
    }


def gpu_device(node: NodeSpec, index: int, mode: Mode) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": f"gpu-{index}",
        "attributes": {"index": {"int": index}, "productName": {"string": node.model}},
    }
    if mode == "dra":
        # Published under the qualified name the claims request: upstream matches capacity
        # requests to a device's capacity by the literal key.
        capacity: dict[str, Any] = {
            MILLI_QUALIFIED: {
                "value": str(MILLI),
                "requestPolicy": {"default": str(MILLI), "validRange": {"min": "1", "step": "1"}},
            }
        }
        if node.gpu_memory_mib:  # informational: a zero default keeps it from being consumed
            capacity["memory"] = {
                "value": f"{node.gpu_memory_mib}Mi",
                "requestPolicy": {"default": "0", "validRange": {"min": "0"}},
            }
        device["capacity"] = capacity
        device["allowMultipleAllocations"] = True
    elif node.gpu_memory_mib:
        device["capacity"] = {"memory": {"value": f"{node.gpu_memory_mib}Mi"}}
    return device


def slice_doc(node: NodeSpec, mode: Mode) -> dict[str, Any] | None:
    if node.gpus <= 0:
        return None
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node.name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu_device(node, i, mode) for i in range(node.gpus)],
        },
    }


def gpus_taken(task: TaskSpec, mode: Mode) -> int:
    """Whole GPUs a task holds in device-plugin mode (ceil of its demand); its count in DRA."""
    if mode == "dra":
        return task.num_gpu
    return -(-task.demand_milli // MILLI) if task.demand_milli else 0


def milli_per_gpu(task: TaskSpec, mode: Mode) -> int:
    return task.gpu_milli if mode == "dra" else MILLI


def task_shape(task: TaskSpec, mode: Mode) -> TaskShape:
    """The task as the workload mix sees it: GPUs taken, milli each, CPU, accepted models."""
    count = gpus_taken(task, mode)
    if not count:
        return TaskShape(0, 0, task.cpu_milli)
    return TaskShape(count, milli_per_gpu(task, mode), task.cpu_milli, frozenset(task.gpu_spec))


def template_name(task: TaskSpec, mode: Mode) -> str | None:
    count = gpus_taken(task, mode)
    if count == 0:
        return None
    if mode == "device-plugin":
        return f"gpu-x{count}"
    models = "-".join(m.lower() for m in task.gpu_spec)
    return f"gpu-x{count}-m{task.gpu_milli}" + (f"-{models}" if models else "")


def template_doc(task: TaskSpec, mode: Mode) -> dict[str, Any] | None:
    name = template_name(task, mode)
    if name is None:
        return None
    exactly: dict[str, Any] = {"deviceClassName": CLASS, "count": gpus_taken(task, mode)}
    if mode == "dra":
        exactly["capacity"] = {"requests": {MILLI_QUALIFIED: str(task.gpu_milli)}}
        if task.gpu_spec:
            models = ", ".join(f'"{m}"' for m in task.gpu_spec)
            expr = f'device.attributes["{DRIVER}"].productName in [{models}]'
            exactly["selectors"] = [{"cel": {"expression": expr}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
    }


def claim_doc(task: TaskSpec, mode: Mode, name: str) -> dict[str, Any] | None:
    """A ResourceClaim of the task's shape, named `name` (for one pod)."""
    template = template_doc(task, mode)
    if template is None:
        return None
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": template["spec"]["spec"],
    }


def pod_doc(
    task: TaskSpec, mode: Mode, name: str | None = None, claim: str | None = None
) -> dict[str, Any]:
    """The task's pod; its GPUs from the shape's template, or from the claim `claim`."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "sim",
        "resources": {"requests": {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"}},
    }
    spec: dict[str, Any] = {"containers": [container]}
    template = template_name(task, mode)
    if template is not None:
        entry = (
            {"name": "gpus", "resourceClaimName": claim}
            if claim
            else {"name": "gpus", "resourceClaimTemplateName": template}
        )
        spec["resourceClaims"] = [entry]
        container["resources"]["claims"] = [{"name": "gpus"}]
    if mode == "device-plugin" and task.gpu_spec and task.demand_milli:
        term = {"key": MODEL_LABEL, "operator": "In", "values": list(task.gpu_spec)}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name or task.name, "namespace": NAMESPACE},
        "spec": spec,
    }
