"""`status.allocation.allocationTimestamp`, set when a claim is reserved as kube-scheduler's
DynamicResources plugin sets it (1.37): the time of the allocation, kept afterwards."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim, ResourceClaimConsumerReference
from kubedra.scheduler.binding import reserve_claim, same_allocation
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import gpu_node, gpu_pod, new_store, user_claim
from tests.scheduler.test_binding import allocation


def _stamp(claim: ResourceClaim) -> str | None:
    assert claim.status is not None and claim.status.allocation is not None
    return claim.status.allocation.allocation_timestamp


def test_the_scheduler_stamps_the_allocation_it_writes(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    user_claim(store, "c")
    gpu_pod(store, "p", claim="c")
    before = datetime.now(UTC).replace(microsecond=0)
    Scheduler(store).run_once()
    stamp = _stamp(store.get(ResourceClaim, "c"))
    assert stamp is not None
    written = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= written <= datetime.now(UTC)


def test_a_second_reservation_keeps_the_allocations_time(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    user_claim(store, "c")
    gpu_pod(store, "p", claim="c")
    gpu_pod(store, "q", claim="c")
    held = allocation()
    refs = [ResourceClaimConsumerReference(resource="pods", name=n, uid=store.get(Pod, n).metadata.uid or "")
            for n in ("p", "q")]
    first = reserve_claim(store, store.get(ResourceClaim, "c"), held, refs[0], allocate=True)
    old = msgspec.structs.replace(first.status.allocation, allocation_timestamp="2020-01-01T00:00:00Z")  # type: ignore[union-attr]
    first = store.update_status(msgspec.structs.replace(
        first, status=msgspec.structs.replace(first.status, allocation=old)))
    # The plan's allocation has no time: it is the same allocation all the same.
    second = reserve_claim(store, first, held, refs[1], allocate=False)
    assert _stamp(second) == "2020-01-01T00:00:00Z"
    assert [r.name for r in second.status.reserved_for] == ["p", "q"]  # type: ignore[union-attr]


def test_allocations_compare_without_their_time() -> None:
    stamped = msgspec.structs.replace(allocation(), allocation_timestamp="2026-01-01T00:00:00Z")
    assert same_allocation(stamped, allocation())
    assert not same_allocation(stamped, allocation("gpu-1"))
    assert not same_allocation(None, allocation()) and same_allocation(None, None)
