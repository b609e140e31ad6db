"""What placement policies see of the cluster: each node's devices, grouped by topology.

Built from the allocator's inventory (the same pools the allocator searches) and kept up
to date by the scheduler as devices are reserved and freed, so scoring a node costs a few
set operations instead of a walk over slices. It also logs which nodes changed, so a policy
that keeps its own per-node index re-reads only those (`changed_since`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubedra.allocator import DeviceRef, Inventory, NodeInfo
from kubedra.allocator.inventory import DeviceEntry

# Attributes that say which devices are close: NVLink domain (kubedra's simulated drivers
# publish one; upstream drivers publish none, see docs), PCIe root and NUMA node.
NVLINK_ATTRIBUTES = ("gpu.nvidia.com/nvlinkDomain", "gpu.nvidia.com/clique")
PCIE_ROOT_ATTRIBUTE = "resource.kubernetes.io/pcieRoot"
NUMA_ATTRIBUTES = ("resource.kubernetes.io/numaNode", "dra.net/numaNode")
LEVELS = ("nvlink", "pcie", "numa")
# The device model, in each driver's own domain (NVIDIA's and kubedra's drivers publish it).
MODEL_ATTRIBUTE = "productName"
# Entries of the change log kept before it is dropped (readers then re-read every node).
CHANGE_LOG_LIMIT = 1 << 16


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one device sits: its node and its group at each topology level."""

    node: str
    groups: tuple[object, object, object]  # (nvlink, pcie root, numa); None when unknown


@dataclass
class NodeDevices:
    """The devices of one node (node-local pools only) and which of them are in use."""

    name: str
    devices: dict[str, set[DeviceRef]] = field(default_factory=dict)  # driver -> refs
    used: set[DeviceRef] = field(default_factory=set)
    holders: Counter[DeviceRef] = field(default_factory=Counter)  # claims holding each device
    models: frozenset[str] = frozenset()  # the devices' models (MODEL_ATTRIBUTE)

    def total(self, drivers: Iterable[str] | None = None) -> int:
        return sum(len(refs) for d, refs in self.devices.items() if drivers is None or d in drivers)

    def free(self, drivers: Iterable[str] | None = None) -> int:
        chosen = [d for d in self.devices if drivers is None or d in set(drivers)]
        return sum(len(self.devices[d] - self.used) for d in chosen)


class ClusterView:
    """Per-node device sets and per-device topology groups, for policies."""

    def __init__(
        self, inventory: Inventory, nodes: Sequence[NodeInfo], allocated: Iterable[DeviceRef] = ()
    ) -> None:
        self.nodes: dict[str, NodeDevices] = {}
        self.placement: dict[DeviceRef, Placement] = {}
        self._log: list[str] = []  # nodes changed since this view was built, in order
        self._dropped = 0  # log entries dropped from the front
        for node in nodes:
            self._index(inventory, node)
        self.reserve(allocated)

    def _index(self, inventory: Inventory, node: NodeInfo) -> None:
        nd = NodeDevices(node.name)
        models: set[str] = set()
        for pool in inventory.pools_for(node):
            for entry, usable in pool.devices:
                if not usable or not entry.node_local:
                    continue
                nd.devices.setdefault(entry.ref.driver, set()).add(entry.ref)
                model = _first(entry, (f"{entry.ref.driver}/{MODEL_ATTRIBUTE}",))
                if isinstance(model, tuple):
                    models.update(str(m) for m in model)
                self.placement[entry.ref] = Placement(
                    node.name,
                    (
                        _first(entry, NVLINK_ATTRIBUTES),
                        _first(entry, (PCIE_ROOT_ATTRIBUTE,)),
                        _first(entry, NUMA_ATTRIBUTES),
                    ),
                )
        nd.models = frozenset(models)
        self.nodes[node.name] = nd

    def reserve(self, refs: Iterable[DeviceRef]) -> None:
        for ref in refs:
            placement = self.placement.get(ref)
            if placement is not None:
                nd = self.nodes[placement.node]
                nd.holders[ref] += 1
                nd.used.add(ref)
                self.touch(placement.node)

    def release(self, refs: Iterable[DeviceRef]) -> None:
        """Drop one hold of each device; a shared device stays used while others hold it."""
        for ref in refs:
            placement = self.placement.get(ref)
            if placement is None:
                continue
            nd = self.nodes[placement.node]
            nd.holders[ref] -= 1
            if nd.holders[ref] <= 0:
                del nd.holders[ref]
                nd.used.discard(ref)
            self.touch(placement.node)

    def touch(self, node: str) -> None:
        """Log a change on `node` (reserve and release log their own; the scheduler logs
        what else a policy reads of a node, the CPU and memory its pods use)."""
        if len(self._log) >= CHANGE_LOG_LIMIT:
            self._dropped += len(self._log)
            self._log.clear()
        self._log.append(node)

    def changed_since(self, mark: int) -> tuple[Sequence[str] | None, int]:
        """The nodes changed since `mark` (0, or a mark this returned) and the mark to pass
        next time; None instead of nodes when the log no longer reaches back that far."""
        end = self._dropped + len(self._log)
        if mark < self._dropped:
            return None, end
        return self._log[mark - self._dropped :], end

    def group_usage(self, node: str, level: int) -> Mapping[object, tuple[int, int]]:
        """Group -> (used, total) devices at one topology level of a node."""
        out: dict[object, list[int]] = {}
        nd = self.nodes[node]
        for refs in nd.devices.values():
            for ref in refs:
                group = self.placement[ref].groups[level]
                if group is None:
                    continue
                counts = out.setdefault(group, [0, 0])
                counts[1] += 1
                counts[0] += ref in nd.used
        return {g: (u, t) for g, (u, t) in out.items()}


def _first(entry: DeviceEntry, names: Sequence[str]) -> object:
    for name in names:
        tagged = entry.attribute(name)
        if isinstance(tagged, tuple):
            return tagged[1]
    return None
