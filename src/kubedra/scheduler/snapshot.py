"""The scheduler's picture of the cluster: what the feed delivered, with the scheduler's
own writes assumed (`cache.py`), and the tables derived from it, each built on first use
and dropped when what it derives from changes.

Upstream's scheduler cache and its per-cycle Snapshot in one: plugins read the tables
through the framework's Handle (the Scheduler, which is a ClusterSnapshot), so a subclass
that overrides a table (the web UI keeps an inventory between snapshots) changes it for
every plugin.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubedra.allocator import AllocatedState, DeviceRef, Features, Inventory, NodeInfo
from kubedra.api.core import Namespace, Node, Pod, pod_runs
from kubedra.api.kinds import KubeObjectT
from kubedra.api.meta import KubeObject
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    AllocationResult,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.cluster.selectors import parse_label_selector
from kubedra.cluster.store import Store
from kubedra.scheduler.cache import ASSUMED, SUPERSEDED, ObjectCache, rv_of
from kubedra.scheduler.claims import allocated_refs
from kubedra.scheduler.nodes import add_requests
from kubedra.scheduler.view import ClusterView


class ClusterSnapshot:
    """The cache and its derived tables: nodes owned, inventory, allocated devices, the
    policies' view, device classes, and what pods request per node."""

    def __init__(self, store: Store, features: Features, node_selector: str) -> None:
        self.store = store
        self.features = features
        self.cache = ObjectCache()
        self._owned = parse_label_selector(node_selector) if node_selector else None
        self._own: set[int] = set()  # resourceVersions this scheduler wrote itself
        self._inventory: Inventory | None = None
        self._view: ClusterView | None = None
        self._allocated: AllocatedState | None = None
        self._usage: dict[str, dict[str, Quantity]] | None = None
        self._nodes: list[Node] | None = None
        self._nodes_by_name: dict[str, Node] = {}
        self._names: list[str] = []
        self._classes: dict[str, DeviceClass] | None = None

    def drop(
        self,
        *,
        nodes: bool = False,
        inventory: bool = False,
        view: bool = False,
        allocated: bool = False,
        usage: bool = False,
        classes: bool = False,
    ) -> None:
        """Forget derived tables: the next reader rebuilds them from the cache."""
        if nodes:
            self._nodes = None
        if inventory:
            self._inventory = None
        if view:
            self._view = None
        if allocated:
            self._allocated = None
        if usage:
            self._usage = None
        if classes:
            self._classes = None

    def drop_all(self) -> None:
        self.drop(nodes=True, inventory=True, view=True, allocated=True, usage=True, classes=True)

    def forget_usage(self) -> None:
        """Claims were freed in place: the devices and CPU in use are read afresh."""
        self.drop(allocated=True, usage=True)

    def mine(self, obj: KubeObjectT) -> KubeObjectT:
        """A write of this scheduler: in the view now, and not news when the feed brings it.
        When the feed brought it first, and newer news since (kept from the view while the
        write was in flight), that news is taken now (`superseded`)."""
        done = self.cache.assume(obj, rv_of(obj))
        if done == ASSUMED:
            self._own.add(rv_of(obj))  # its event is still to come
        elif done == SUPERSEDED:
            self.superseded(obj)
        return obj

    def superseded(self, written: KubeObject) -> None:
        """The feed changed `written` (or deleted it) after this scheduler wrote it, while the
        write was in flight: what derives from it is read afresh (the Scheduler also wakes
        the pods the change may help)."""
        self.drop_all()

    # --- tables ---------------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        """The nodes this scheduler owns (all, or those its node selector matches), in name
        order (cached until a node changes)."""
        if self._nodes is None:
            nodes = [
                n
                for n in self.cache.of(Node).values()
                if isinstance(n, Node)
                and (self._owned is None or self._owned.matches(n.metadata.labels))
            ]
            self._nodes = sorted(nodes, key=lambda n: n.name)
            self._nodes_by_name = {n.name: n for n in self._nodes}
            self._names = [n.name for n in self._nodes]
        return self._nodes

    def node_map(self) -> Mapping[str, Node]:
        """The owned nodes by name (the same object until they change)."""
        self.nodes()
        return self._nodes_by_name

    def node_names(self) -> list[str]:
        """The owned nodes' names in order (the same list until they change)."""
        self.nodes()
        return self._names

    def inventory(self) -> Inventory:
        if self._inventory is None:
            slices = [
                s for s in self.cache.of(ResourceSlice).values() if isinstance(s, ResourceSlice)
            ]
            rules = [
                r for r in self.cache.of(DeviceTaintRule).values() if isinstance(r, DeviceTaintRule)
            ]
            slices.sort(key=lambda s: s.name)
            self._inventory = Inventory.build(slices, rules, features=self.features)
        return self._inventory

    def allocated(self) -> AllocatedState:
        if self._allocated is None:
            self._allocated = AllocatedState.from_claims(self.claims())
        return self._allocated

    def built_allocated(self) -> AllocatedState | None:
        """The allocated devices, if built (an assumption is then added to it in place)."""
        return self._allocated

    def reallocated(
        self, old: AllocationResult | None, new: AllocationResult | None
    ) -> frozenset[str] | None:
        """One claim's allocation went from `old` to `new` in the cache (None: none, or no
        claim): the built tables take the change in place rather than being rebuilt from
        every claim (the allocated devices are built afresh where that is not exact, see
        `AllocatedState.release`). Returns the nodes of the devices freed when the change
        only freed devices, all of them on nodes the view knows; else None."""
        if old == new:
            return None  # nothing freed, nothing taken (what else changed is not known here)
        allocated = self._allocated
        if allocated is not None:
            if old is not None and not allocated.release(old):
                self._allocated = None
            elif new is not None:
                allocated.reserve(new)
        view = self._view
        freed = result_refs(old) if old is not None else []
        if view is not None:
            if freed:
                view.release(freed)
            if new is not None:
                view.reserve(result_refs(new))
        if new is not None or view is None:
            return None
        placement = view.placement
        nodes = set()
        for ref in freed:
            where = placement.get(ref)
            if where is None:
                return None  # not a node-local device of a node this scheduler owns
            nodes.add(where.node)
        return frozenset(nodes)

    def view(self) -> ClusterView:
        if self._view is None:
            infos = [NodeInfo(n.name, n.metadata.labels) for n in self.nodes()]
            used = [r for c in self.claims() for r in allocated_refs(c)]
            self._view = ClusterView(self.inventory(), infos, used)
        return self._view

    def built_view(self) -> ClusterView | None:
        return self._view

    def touch(self, node: str) -> None:
        """Tell the view's readers (policies with per-node indexes) that what pods use on
        `node` changed; a view built later is read afresh anyway."""
        if self._view is not None:
            self._view.touch(node)

    def claims(self) -> list[ResourceClaim]:
        return [c for c in self.cache.of(ResourceClaim).values() if isinstance(c, ResourceClaim)]

    def classes(self) -> dict[str, DeviceClass]:
        if self._classes is None:
            table = self.cache.of(DeviceClass).values()
            self._classes = {c.name: c for c in table if isinstance(c, DeviceClass)}
        return self._classes

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.cache.of(Namespace).get(("", namespace))
        return dict(ns.metadata.labels) if ns is not None else {}

    def node_usage(self) -> dict[str, dict[str, Quantity]]:
        """CPU/memory requested by the pods bound to each node (cached)."""
        if self._usage is None:
            usage: dict[str, dict[str, Quantity]] = {}
            for pod in self.cache.of(Pod).values():
                assert isinstance(pod, Pod)
                if pod.spec.node_name and pod_runs(pod):
                    add_requests(usage.setdefault(pod.spec.node_name, {}), pod)
            self._usage = usage
        return self._usage

    def add_usage(self, node: str, pod: Pod) -> bool:
        """Count an assumed pod's requests on `node`; False when usage is not built (it
        will be read from the cache, where the pod is assumed)."""
        if self._usage is None:
            return False
        add_requests(self._usage.setdefault(node, {}), pod)
        return True

    def cpu_free(self, node: str) -> int | None:
        """Allocatable CPU (milli) a node has left for pods; None where it declares none."""
        found = self.node_map().get(node)
        allocatable = found.status.allocatable if found is not None and found.status else {}
        if "cpu" not in allocatable:
            return None
        used = self.node_usage().get(node, {}).get("cpu")
        left = allocatable["cpu"] if used is None else allocatable["cpu"].sub(used)
        return left.milli_value()


def result_refs(result: AllocationResult) -> list[DeviceRef]:
    """The devices an allocation holds (admin access holds none), as `allocated_refs`."""
    return [
        DeviceRef(r.driver, r.pool, r.device) for r in result.devices.results if not r.admin_access
    ]
