"""Everything the views derive from one snapshot, each part computed on first use.

The scheduler runs on the snapshot (a read-only Store), so the devices, the explanations and
the fragmentation all come from the allocator's own view of that one state: the inventory
(slices gathered into pools, DeviceTaintRules applied), what claims hold, and CEL.
"""

from __future__ import annotations

import functools

from kubedra.allocator import Inventory
from kubedra.api.resource import DeviceTaintRule, ResourceSlice
from kubedra.cluster.store import Store
from kubedra.scheduler.scheduler import Scheduler
from kubedra.web.devices import NodeFacts, cluster_devices
from kubedra.web.snapshot import Snapshot, SnapshotStore

# What the allocator's inventory is built from: while these tables stay the same objects
# (the mirror keeps an unchanged kind's table), the inventory and its CEL results hold.
INVENTORY_KINDS = (ResourceSlice.KIND, DeviceTaintRule.KIND)


class _Scheduler(Scheduler):
    """The scheduler over a snapshot, with an inventory carried over from the previous
    snapshot when slices and taint rules did not change (building one is most of the work
    at 1,000 nodes: every device's CEL view)."""

    def __init__(self, store: Store, strict: bool, inventory: Inventory | None) -> None:
        super().__init__(store, strict_cel=strict)
        self._kept = inventory

    def inventory(self) -> Inventory:
        return self._kept if self._kept is not None else super().inventory()


class Facts:
    def __init__(
        self, snapshot: Snapshot, strict: bool = False, previous: Facts | None = None
    ) -> None:
        self.snapshot = snapshot
        self.strict = strict
        kept = None
        if (
            previous is not None
            and previous.strict == strict
            and all(
                previous.snapshot.objects.get(k) is snapshot.objects.get(k) for k in INVENTORY_KINDS
            )
        ):
            kept = previous.scheduler.inventory()
        self.scheduler: Scheduler = _Scheduler(SnapshotStore(snapshot), strict, kept)
        self.scheduler.refresh()

    @property
    def version(self) -> int:
        return self.snapshot.version

    @functools.cached_property
    def nodes(self) -> list[NodeFacts]:
        return cluster_devices(self.scheduler)
