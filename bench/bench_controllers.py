"""The device taint eviction controller's round: every pod's eviction time recomputed from
the cache (it is level-triggered), at 1,000 nodes of 8 GPUs with a pod on every GPU and one
NoExecute DeviceTaintRule on one node's pool."""

from __future__ import annotations

from typing import Any

from bench.harness import Row, best_of, sized
from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice
from kubedra.controllers.evictions import pod_evictions

GPUS = 8


def _obj(raw: dict[str, Any]) -> Any:
    return decode_object(raw).obj


def _slice(node: str) -> ResourceSlice:
    return _obj({  # type: ignore[no-any-return]
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}"} for i in range(GPUS)]}})


def _claim_and_pod(node: str, gpu: int) -> tuple[ResourceClaim, Pod]:
    name, uid = f"{node}-{gpu}", f"uid-{node}-{gpu}"
    claim = _obj({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{gpu}"}]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": uid}]}})
    pod = _obj({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                 "containers": [{"name": "main"}]}})
    return claim, pod


def run() -> list[Row]:
    nodes = [f"node-{i:04d}" for i in range(sized(1000, 100))]
    slices = [_slice(n) for n in nodes]
    pairs = [_claim_and_pod(n, g) for n in nodes for g in range(GPUS)]
    claims, pods = [c for c, _ in pairs], [p for _, p in pairs]
    rule = _obj({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": nodes[0]},
                 "taint": {"key": "broken", "effect": "NoExecute",
                           "timeAdded": "2026-01-01T00:00:00Z"}}})
    rules: list[DeviceTaintRule] = [rule]
    found: dict[Any, Any] = {}

    def one_round() -> None:
        found.update(pod_evictions(pods, claims, slices, rules))

    seconds = best_of(one_round)
    assert len(found) == GPUS  # the tainted node's pods, and only they
    return [
        Row(
            "controllers",
            f"taint eviction round, {len(nodes)} nodes / {len(pods)} pods",
            seconds * 1e3,
            "ms",
            note="every pod's eviction time from the cache; one round per --interval (1 s)",
        )
    ]
