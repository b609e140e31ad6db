"""Which running pods NoExecute device taints evict, and when (KEP-5055), as pure functions.

Upstream's device taint eviction controller looks at every allocated claim: each of its
devices may carry NoExecute taints, published in the ResourceSlice or added by a
DeviceTaintRule. A taint counts from its `timeAdded`; a NoExecute toleration recorded in
the allocation result (the request's tolerations, copied when the claim was allocated)
either ignores it for good (no `tolerationSeconds`) or delays it by the smallest
`tolerationSeconds` of the tolerations that match. The claim must go at the earliest of
those times; a scheduled pod that holds the claim (reserved for it, and the pod's own for a
template's claim) is deleted at the earliest time over its claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from kubedra.allocator.inventory import rule_matches
from kubedra.allocator.search import tolerates
from kubedra.allocator.types import DeviceRef
from kubedra.api.core import ENDED_PHASES, Pod
from kubedra.api.resource import (
    DeviceRequestAllocationResult,
    DeviceTaint,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.scheduler.claims import is_owned_by, recorded_claim_name

NO_EXECUTE = "NoExecute"
Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, order=True)
class TaintSource:
    """Where a taint comes from, ordered as upstream lists the reasons of an eviction:
    DeviceTaintRules first by name, then slice taints by driver, pool, device and index."""

    from_slice: bool
    name: str  # the rule's or the slice's name
    driver: str = ""
    pool: str = ""
    device: str = ""
    index: int = 0

    def __str__(self) -> str:
        if not self.from_slice:
            return f"DeviceTaintRule {self.name}"
        device = f"{self.driver}/{self.pool}/{self.device}"
        return f"ResourceSlice {self.name} {device} taint #{self.index}"


@dataclass(frozen=True)
class Eviction:
    """When a pod (or a claim's users) must be deleted (epoch seconds), and why."""

    when: float
    reasons: tuple[TaintSource, ...]

    def joined(self, other: Eviction | None) -> Eviction:
        if other is None:
            return self
        reasons = tuple(sorted(set(self.reasons) | set(other.reasons)))
        return Eviction(min(self.when, other.when), reasons)

    def rules(self) -> set[str]:
        return {r.name for r in self.reasons if not r.from_slice}


Tainted = list[tuple[TaintSource, DeviceTaint]]


def newest_slices(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    """The slices of each pool's newest generation: older ones are being replaced and
    count for nothing (upstream's pool rule)."""
    kept = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for sl in kept:
        pool, generation = (sl.spec.driver, sl.spec.pool.name), sl.spec.pool.generation
        newest[pool] = max(newest.get(pool, generation), generation)
    return [s for s in kept if s.spec.pool.generation == newest[(s.spec.driver, s.spec.pool.name)]]


def published_taints(slices: Iterable[ResourceSlice]) -> dict[DeviceRef, Tainted]:
    """The NoExecute taints that drivers publish, per device."""
    out: dict[DeviceRef, Tainted] = {}
    for sl in newest_slices(slices):
        spec = sl.spec
        for device in spec.devices:
            ref = DeviceRef(spec.driver, spec.pool.name, device.name)
            for index, taint in enumerate(device.taints):
                if taint.effect == NO_EXECUTE:
                    source = TaintSource(True, sl.name, *ref, index)
                    out.setdefault(ref, []).append((source, taint))
    return out


def device_taints(
    result: DeviceRequestAllocationResult,
    published: Mapping[DeviceRef, Tainted],
    rules: Sequence[DeviceTaintRule],
) -> Tainted:
    """Every NoExecute taint on one allocated device: the slice's and the rules'."""
    ref = DeviceRef(result.driver, result.pool, result.device)
    from_rules = [
        (TaintSource(False, rule.name), rule.spec.taint)
        for rule in rules
        if rule.spec.taint.effect == NO_EXECUTE and rule_matches(rule, ref)
    ]
    return [*published.get(ref, ()), *from_rules]


def _taint_deadline(result: DeviceRequestAllocationResult, taint: DeviceTaint) -> float | None:
    """When the taint makes the device's users go; None when a toleration keeps them for
    good. Only tolerations that name the NoExecute effect count, as upstream's."""
    seconds: int | None = None
    for toleration in result.tolerations:
        if toleration.effect != NO_EXECUTE:
            continue
        if not tolerates(toleration, taint.key, taint.value or "", NO_EXECUTE):
            continue
        if toleration.toleration_seconds is None:
            return None
        wait = max(toleration.toleration_seconds, 0)
        seconds = wait if seconds is None else min(seconds, wait)
    return seconds_of(taint.time_added) + (seconds or 0)


def claim_eviction(
    claim: ResourceClaim, published: Mapping[DeviceRef, Tainted], rules: Sequence[DeviceTaintRule]
) -> Eviction | None:
    """When the users of an allocated claim must go; None when no taint forces them."""
    allocation = claim.status.allocation if claim.status else None
    if allocation is None:
        return None
    eviction: Eviction | None = None
    for result in allocation.devices.results:
        for source, taint in device_taints(result, published, rules):
            deadline = _taint_deadline(result, taint)
            if deadline is not None:
                eviction = Eviction(deadline, (source,)).joined(eviction)
    return eviction


def pod_eviction(
    pod: Pod, claims: Mapping[Key, ResourceClaim], evictions: Mapping[Key, Eviction]
) -> Eviction | None:
    """When a scheduled pod must go because of its claims' devices; None if never."""
    if not pod.spec.node_name or pod.metadata.deletion_timestamp:
        return None
    if pod.status is not None and pod.status.phase in ENDED_PHASES:
        return None
    uid = pod.metadata.uid
    eviction: Eviction | None = None
    for entry in pod.spec.resource_claims:
        key = (pod.namespace, recorded_claim_name(pod, entry) or "")
        claim, due = claims.get(key), evictions.get(key)
        if claim is None or due is None:
            continue
        if entry.resource_claim_template_name and not is_owned_by(claim, pod):
            continue  # not the claim generated for this pod
        held = claim.status.reserved_for if claim.status else ()
        if any(r.resource == "pods" and r.uid == uid for r in held):
            eviction = due.joined(eviction)
    return eviction


def pod_evictions(
    pods: Iterable[Pod],
    claims: Iterable[ResourceClaim],
    slices: Iterable[ResourceSlice],
    rules: Sequence[DeviceTaintRule],
) -> dict[Key, tuple[Pod, Eviction]]:
    """Every pod that NoExecute taints evict, with when and why."""
    published = published_taints(slices)
    by_key = {(c.namespace, c.name): c for c in claims}
    due = {
        key: eviction
        for key, claim in by_key.items()
        if (eviction := claim_eviction(claim, published, rules)) is not None
    }
    out: dict[Key, tuple[Pod, Eviction]] = {}
    for pod in pods:
        eviction = pod_eviction(pod, by_key, due) if due else None
        if eviction is not None:
            out[(pod.namespace, pod.name)] = (pod, eviction)
    return out


def seconds_of(stamp: str | None) -> float:
    """An RFC 3339 time as epoch seconds; a taint without `timeAdded` counts from the
    beginning of time (it is due at once)."""
    return datetime.fromisoformat(stamp).timestamp() if stamp else 0.0
