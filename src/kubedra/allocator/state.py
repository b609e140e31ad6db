"""`AllocatedState`: what other claims already hold (upstream's AllocatedState input).

Rebuilt from claim statuses alone. Exclusive allocations mark the device allocated; shared
ones (with a shareID) add their consumedCapacity to the device's aggregated total. Results
with adminAccess are invisible to everybody (upstream rule). Without DRAConsumableCapacity
a result's shareID is ignored and the device counts as allocated outright, as upstream's
scheduler builds the state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from kubedra.allocator.types import DEFAULT_FEATURES, DeviceRef, Features
from kubedra.api.resource import AllocationResult, ResourceClaim

_EMPTY: Mapping[str, int] = MappingProxyType({})


class AllocatedState:
    """Allocated devices, shared device ids and aggregated consumed capacity (nano units,
    keyed by the capacity names the results carry, as upstream's AggregatedCapacity).

    `with_allocation` returns a new state (the allocator's callers keep old ones valid);
    `reserve` adds in place, for a scheduler's own working copy, where copying the whole
    state for every placed pod would make a cluster-sized run quadratic.
    """

    __slots__ = ("_counters", "_extra", "capacity", "devices", "shared", "shares", "sharing")

    def __init__(
        self,
        devices: Iterable[DeviceRef] = (),
        shares: Iterable[tuple[DeviceRef, str]] = (),
        capacity: Mapping[DeviceRef, Mapping[str, int]] | None = None,
        *,
        sharing: bool = True,
    ) -> None:
        self.sharing = sharing  # DRAConsumableCapacity: results with a shareID are shares
        self.devices: set[DeviceRef] = set(devices)  # exclusive (no shareID, not admin)
        self.shares: set[tuple[DeviceRef, str]] = set(shares)  # (device, shareID) of shares
        self.shared: set[DeviceRef] = {ref for ref, _ in self.shares}  # with >= 1 share
        self.capacity: dict[DeviceRef, dict[str, int]] = {
            ref: dict(caps) for ref, caps in (capacity or {}).items()
        }
        # Per-pool available counters, computed lazily by the search; cleared on `reserve`.
        # Keyed by id(pool); the pool object is kept in the value to guard against id reuse.
        self._counters: dict[int, tuple[object, dict[str, dict[str, int]]]] = {}
        # Exclusive holds beyond the first, per device (claims that hold a device another
        # claim holds too: an inconsistent cluster), so that `release` frees it exactly.
        self._extra: dict[DeviceRef, int] = {}

    @classmethod
    def from_claims(
        cls, claims: Iterable[ResourceClaim], features: Features = DEFAULT_FEATURES
    ) -> AllocatedState:
        state = cls(sharing=features.consumable_capacity)
        for claim in claims:
            if claim.status is not None and claim.status.allocation is not None:
                state.reserve(claim.status.allocation)
        return state

    def with_allocation(self, result: AllocationResult) -> AllocatedState:
        """A new state that also holds the devices of `result` (this one is unchanged)."""
        state = AllocatedState(self.devices, self.shares, self.capacity, sharing=self.sharing)
        state._extra = dict(self._extra)
        state.reserve(result)
        return state

    add = with_allocation

    def reserve(self, result: AllocationResult) -> None:
        """Hold the devices of `result` in this state (in place)."""
        for r in result.devices.results:
            if r.admin_access:
                continue
            ref = DeviceRef(r.driver, r.pool, r.device)
            if r.share_id is None or not self.sharing:
                if ref in self.devices:
                    self._extra[ref] = self._extra.get(ref, 0) + 1
                else:
                    self.devices.add(ref)
                continue
            self.shares.add((ref, r.share_id))
            self.shared.add(ref)
            if r.consumed_capacity:
                total = self.capacity.setdefault(ref, {})
                for name, q in r.consumed_capacity.items():
                    total[name] = total.get(name, 0) + q.nanos
        self._counters.clear()

    def release(self, result: AllocationResult) -> bool:
        """Give back what `reserve(result)` held (in place), as if the claim holding it had
        never been counted. False, with nothing changed, where that is not exact: a result
        with shares (their capacity totals are not kept per claim), or devices this state
        does not hold; the caller then builds the state afresh (`from_claims`)."""
        refs: list[DeviceRef] = []
        for r in result.devices.results:
            if r.admin_access:
                continue
            if r.share_id is not None and self.sharing:
                return False
            refs.append(DeviceRef(r.driver, r.pool, r.device))
        wanted: dict[DeviceRef, int] = {}
        for ref in refs:
            wanted[ref] = wanted.get(ref, 0) + 1
        for ref, n in wanted.items():
            if ref not in self.devices or self._extra.get(ref, 0) + 1 < n:
                return False
        for ref in refs:
            extra = self._extra.get(ref, 0)
            if extra > 1:
                self._extra[ref] = extra - 1
            elif extra == 1:
                del self._extra[ref]
            else:
                self.devices.discard(ref)
        self._counters.clear()
        return True

    def is_allocated(self, ref: DeviceRef) -> bool:
        """Allocated exclusively, or shared by at least one claim."""
        return ref in self.devices or ref in self.shared

    def consumed(self, ref: DeviceRef) -> Mapping[str, int]:
        """Aggregated consumed capacity of a shared device, by capacity name as published."""
        return self.capacity.get(ref, _EMPTY)

    def __repr__(self) -> str:
        return f"AllocatedState(devices={len(self.devices)}, shares={len(self.shares)})"
