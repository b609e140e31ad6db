"""`AllocatedState`: what other claims already hold (upstream's AllocatedState input).

Rebuilt from claim statuses alone. Exclusive allocations mark the device allocated; shared
ones (with a shareID) add their consumedCapacity to the device's aggregated total. Results
with adminAccess are invisible to everybody (upstream rule). The state is immutable:
`with_allocation` returns a new state, copying only what one result changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from kubedra.allocator.types import DeviceRef
from kubedra.api.resource import AllocationResult, ResourceClaim

_EMPTY: Mapping[str, int] = MappingProxyType({})


def _fq(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


class AllocatedState:
    """Allocated devices, shared device ids and aggregated consumed capacity (nano units)."""

    __slots__ = ("_counters", "capacity", "devices", "shared", "shares")

    def __init__(
        self,
        devices: frozenset[DeviceRef] = frozenset(),
        shares: frozenset[tuple[DeviceRef, str]] = frozenset(),
        capacity: Mapping[DeviceRef, Mapping[str, int]] | None = None,
    ) -> None:
        self.devices = devices  # allocated exclusively (no shareID, not admin)
        self.shares = shares  # (device, shareID) of shared allocations
        self.shared = frozenset(ref for ref, _ in shares)  # devices with at least one share
        self.capacity: Mapping[DeviceRef, Mapping[str, int]] = capacity or {}
        # Per-pool available counters, computed lazily by the search (the state never changes).
        # Keyed by id(pool); the pool object is kept in the value to guard against id reuse.
        self._counters: dict[int, tuple[object, dict[str, dict[str, int]]]] = {}

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim]) -> AllocatedState:
        state = cls()
        for claim in claims:
            if claim.status is not None and claim.status.allocation is not None:
                state = state.with_allocation(claim.status.allocation)
        return state

    def with_allocation(self, result: AllocationResult) -> AllocatedState:
        """A new state that also holds the devices of `result`."""
        devices = set()
        shares = set()
        capacity: dict[DeviceRef, dict[str, int]] = {}
        for r in result.devices.results:
            if r.admin_access:
                continue
            ref = DeviceRef(r.driver, r.pool, r.device)
            if r.share_id is None:
                devices.add(ref)
                continue
            shares.add((ref, r.share_id))
            if r.consumed_capacity:
                total = capacity.get(ref)
                if total is None:
                    total = capacity[ref] = dict(self.capacity.get(ref, _EMPTY))
                for name, q in r.consumed_capacity.items():
                    key = _fq(r.driver, name)
                    total[key] = total.get(key, 0) + q.nanos
        if not devices and not shares:
            return self
        merged: Mapping[DeviceRef, Mapping[str, int]] = self.capacity
        if capacity:
            merged = {**self.capacity, **capacity}
        return AllocatedState(self.devices | devices, self.shares | shares, merged)

    add = with_allocation

    def is_allocated(self, ref: DeviceRef) -> bool:
        """Allocated exclusively, or shared by at least one claim."""
        return ref in self.devices or ref in self.shared

    def consumed(self, ref: DeviceRef) -> Mapping[str, int]:
        """Aggregated consumed capacity of a shared device, by fully qualified name."""
        return self.capacity.get(ref, _EMPTY)

    def __repr__(self) -> str:
        return f"AllocatedState(devices={len(self.devices)}, shares={len(self.shares)})"
