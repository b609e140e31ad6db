"""Everything the views derive from one snapshot, each part computed on first use.

The scheduler runs on the snapshot (a read-only Store), so the devices, the explanations and
the fragmentation all come from the allocator's own view of that one state: the inventory
(slices gathered into pools, DeviceTaintRules applied), what claims hold, and CEL.
"""

from __future__ import annotations

import functools

from kubedra.scheduler.scheduler import Scheduler
from kubedra.web.devices import NodeFacts, cluster_devices
from kubedra.web.snapshot import Snapshot, SnapshotStore


class Facts:
    def __init__(self, snapshot: Snapshot, strict: bool = False) -> None:
        self.snapshot = snapshot
        self.strict = strict
        self.scheduler = Scheduler(SnapshotStore(snapshot), strict_cel=strict)
        self.scheduler.refresh()

    @property
    def version(self) -> int:
        return self.snapshot.version

    @functools.cached_property
    def nodes(self) -> list[NodeFacts]:
        return cluster_devices(self.scheduler)
