"""The one small interface every placement policy implements.

The scheduler asks a policy three things: in which order to try the feasible nodes, in
which order the allocator should prefer devices on a node (a hint: feasibility never
depends on it), and how good a found placement is. A policy subclass registers itself by
name, so adding a policy is adding one module to this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, ClassVar

from kubedra.allocator import DeviceOrder, DeviceRef, RequestKey
from kubedra.api.core import Pod
from kubedra.api.resource import AllocationResult, ResourceClaim
from kubedra.scheduler.view import ClusterView

POLICIES: dict[str, type[Policy]] = {}


@dataclass(frozen=True, slots=True)
class Candidate:
    """A feasible placement of a pod: the node and the devices the allocator chose."""

    node: str
    results: Sequence[AllocationResult]
    refs: tuple[DeviceRef, ...]


class Policy:
    """Base policy: upstream behaviour (nodes in name order, upstream device order, no score)."""

    name: ClassVar[str] = ""
    # How many feasible candidates are scored before choosing (like percentageOfNodesToScore);
    # the scheduler reads it after `prepare`, which may lower it for one pod (`first_only`).
    candidates: int = 1

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("name")  # an inherited name is the parent's: keep its entry
        if own:
            POLICIES[own] = cls

    def attach(self, scheduler: Any) -> None:
        """Called once by the scheduler that uses this policy (to read its state later)."""

    def reseed(self, seed: int) -> None:
        """Called with a run's seed by the simulator (for policies that break ties at random)."""

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        """Called with the pod and its claims before its nodes are ranked."""

    def rank_nodes(
        self, view: ClusterView, nodes: Sequence[str], skip: AbstractSet[str] = frozenset()
    ) -> Sequence[str]:
        """`nodes` in the order to try them. `skip`: nodes known not to fit the pod, which
        the scheduler passes over wherever they are; a ranking may put them last."""
        return nodes

    def device_order(self, view: ClusterView, node: str) -> DeviceOrder | None:
        return None

    def device_orders(self, view: ClusterView, node: str) -> Sequence[DeviceOrder | None]:
        """Alternative device orders to try on one node; each success is a candidate."""
        return [self.device_order(view, node)]

    def score(self, view: ClusterView, candidate: Candidate) -> float:
        return 0.0

    def observe(self, devices: int) -> None:
        """Called with the device count of every pod that was placed (the workload mix)."""

    def first_only(self, first_is_best: bool) -> None:
        """Score only the first candidate of the pod being prepared when no later one can
        score higher (the scheduler keeps the first of equal scores): the same choice,
        without allocating on the nodes behind it."""
        self.candidates = 1 if first_is_best else type(self).candidates


def fixed_device_count(claims: Sequence[ResourceClaim]) -> int | None:
    """The devices a pod's claims take on whichever node they fit; None where that can
    depend on the node (firstAvailable alternatives, allocationMode All) or on more than the
    requests (a claim allocated already, admin access)."""
    total = 0
    for claim in claims:
        if claim.status is not None and claim.status.allocation is not None:
            return None
        for request in claim.spec.devices.requests:
            exact = request.exactly
            if (
                exact is None
                or exact.admin_access
                or exact.allocation_mode
                not in (
                    None,
                    "ExactCount",
                )
            ):
                return None
            total += exact.count or 1
    return total


def refs_of(results: Sequence[AllocationResult]) -> tuple[DeviceRef, ...]:
    return tuple(
        DeviceRef(r.driver, r.pool, r.device) for res in results for r in res.devices.results
    )


def grouped_order(
    view: ClusterView, node: str, fullest_first: bool, first_domain: object = None
) -> DeviceOrder:
    """Prefer devices whose NVLink domain (then PCIe root) is most (or least) used; with
    `first_domain`, the devices of that NVLink domain before all others."""
    usage = [view.group_usage(node, level) for level in (0, 1)]

    def key(ref: DeviceRef) -> tuple[float, ...]:
        groups = view.placement[ref].groups if ref in view.placement else (None, None, None)
        out: list[float] = [0.0 if first_domain is None or groups[0] == first_domain else 1.0]
        for level in (0, 1):
            used, total = usage[level].get(groups[level], (0, 1))
            ratio = used / total if total else 0.0
            out.append(-ratio if fullest_first else ratio)
        return tuple(out)

    def order(request: RequestKey, refs: Sequence[DeviceRef]) -> Sequence[DeviceRef]:
        return sorted(refs, key=key)  # stable: ties keep upstream order

    return order
