"""The `EvictionInProgress` condition of a DeviceTaintRule, as Kubernetes 1.37 reports it.

The condition tells an administrator what the rule does: for NoExecute, how many pods are
still to be evicted (True while any are) and how many were evicted since the controller
started; for the None effect, what NoExecute would do (devices selected, pods that would
go), computed once per generation; for other effects, that they evict nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubedra.allocator.inventory import rule_matches
from kubedra.allocator.types import DeviceRef
from kubedra.api.resource import Condition, DeviceTaintRule, ResourceClaim, ResourceSlice
from kubedra.controllers.evictions import NO_EXECUTE, Eviction, Key, newest_slices

EVICTION_IN_PROGRESS = "EvictionInProgress"


def _count(n: int, one: str, many: str) -> str:
    return one if n == 1 else f"{n} {many}"


def _pending(rule: DeviceTaintRule, evictions: Iterable[tuple[Key, Eviction]]) -> tuple[int, int]:
    """Pods (and their namespaces) whose eviction this rule is among the reasons for."""
    keys = [key for key, eviction in evictions if rule.name in eviction.rules()]
    return len(keys), len({namespace for namespace, _ in keys})


def _selected_devices(
    rule: DeviceTaintRule, slices: Iterable[ResourceSlice], claims: Iterable[ResourceClaim]
) -> tuple[int, int]:
    """Devices the rule selects: published (newest pool generation), and allocated."""
    published = {ref for ref in _devices(slices) if rule_matches(rule, ref)}
    allocated = sum(
        rule_matches(rule, DeviceRef(r.driver, r.pool, r.device))
        for c in claims
        if c.status is not None and c.status.allocation is not None
        for r in c.status.allocation.devices.results
    )
    return len(published), allocated


def _devices(slices: Iterable[ResourceSlice]) -> set[DeviceRef]:
    return {
        DeviceRef(sl.spec.driver, sl.spec.pool.name, d.name)
        for sl in newest_slices(slices)
        for d in sl.spec.devices
    }


def eviction_condition(
    rule: DeviceTaintRule,
    pending: Mapping[Key, Eviction],
    simulated: Mapping[Key, Eviction],
    slices: Iterable[ResourceSlice],
    claims: Iterable[ResourceClaim],
    evicted: int,
) -> Condition:
    """The condition for `rule` (without lastTransitionTime). `pending`: the pods being
    evicted; `simulated`: those NoExecute would evict (read for the None effect only);
    `evicted`: pods this controller deleted because of the rule."""
    effect = rule.spec.taint.effect or ""
    status, message = "False", ""
    if effect == NO_EXECUTE:
        pods, namespaces = _pending(rule, pending.items())
        if pods:
            status, reason = "True", "PodsPendingEviction"
            message = (
                f"{_count(pods, '1 pod needs', 'pods need')} to be evicted in "
                f"{_count(namespaces, '1 namespace', 'different namespaces')}."
            )
        else:
            reason = "Completed" if evicted else "NotStarted"
    elif effect == "None":
        reason = "NoEffect"
        on_slices, allocated = _selected_devices(rule, slices, claims)
        pods, namespaces = _pending(rule, simulated.items())
        message = (
            f"{_count(on_slices, '1 published device', 'published devices')} selected. "
            f"{_count(allocated, '1 allocated device', 'allocated devices')} selected. "
            f"{_count(pods, '1 pod', 'pods')} would be evicted in "
            f"{_count(namespaces, '1 namespace', 'different namespaces')} if the effect was "
            "NoExecute. This information will not be updated again. Recreate the "
            "DeviceTaintRule to trigger an update."
        )
    else:
        reason, message = "OtherEffect", "Eviction only happens for the NoExecute effect."
    if evicted:
        tail = f"{_count(evicted, '1 pod', 'pods')} evicted since starting the controller."
        message = f"{message} {tail}" if message else tail
    return Condition(
        type=EVICTION_IN_PROGRESS,
        status=status,
        observed_generation=rule.metadata.generation,
        reason=reason,
        message=message,
    )
