"""Explanations: why a claim does (not) fit a node, as per-request device funnels.

A funnel counts devices stage by stage for one request or subrequest, each stage judged
against the already allocated state (not against the search's tentative picks):
in the node's pools -> pass class selectors -> pass request selectors -> untainted or
tolerated -> free -> fit counters and capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubedra.allocator.inventory import DeviceEntry
from kubedra.allocator.search import (
    CelSelectorError,
    ConstraintFailure,
    ReqData,
    Search,
    claim_name,
    taint_blocks,
)

STAGES = ("in pools", "class selectors", "request selectors", "untainted", "free", "fit")


@dataclass(frozen=True)
class RequestFunnel:
    """Device counts per stage for one request (`req`) or subrequest (`req/sub`)."""

    claim: str
    request: str
    wanted: int  # devices needed (ExactCount), or the "All" set size
    mode: str  # ExactCount | All
    in_pools: int
    class_selectors: int
    request_selectors: int
    untainted: int
    free: int
    fit: int

    @property
    def counts(self) -> tuple[int, ...]:
        return (
            self.in_pools,
            self.class_selectors,
            self.request_selectors,
            self.untainted,
            self.free,
            self.fit,
        )

    def rows(self) -> list[tuple[str, int]]:
        """(stage, count) pairs, for printing as a table."""
        return list(zip(STAGES, self.counts, strict=True))

    @property
    def bottleneck(self) -> str | None:
        """The first stage whose count is below what the request needs, if any."""
        need = max(self.wanted, 1)
        for stage, count in self.rows():
            if count < need:
                return stage
        return None


@dataclass(frozen=True)
class Blocker:
    """The stage that stops one request (or claim) on one node, with its numbers.

    `detail` and `short` name no node and no other claim, so nodes of one shape share them
    (explanations group nodes by them); the claims whose devices would help are `holders`.
    """

    kind: str  # a funnel stage, counters, capacity, matchAttribute, firstAvailable, ...
    claim: str
    request: str  # "" when the whole claim is blocked
    have: int
    need: int
    detail: str  # one line, for `kubedra explain` and events
    short: str  # a few words, for the PodScheduled condition
    holders: tuple[tuple[str, int], ...] = ()  # (claim, devices it holds that would help)
    release: tuple[str, ...] = ()  # claims whose release makes the node fit (checked)
    fix: str = ""  # a cheap suggestion, e.g. another class that admits enough devices
    # How near the node comes to what the claim needs, for ranking nodes ("nearest"): its
    # devices that pass the claim's selectors, then those also untainted, free and fitting
    # now, each request's counted up to what it needs (firstAvailable: its best subrequest),
    # and the devices the claim needs (0: not measured).
    matching: int = 0
    usable: int = 0
    needed: int = 0
    # Would the claim fit here with every device free (None: not known), and when not, its
    # blocker on the node so emptied: the node lacks the devices, not free ones.
    fits_free: bool | None = None
    limit: Blocker | None = None
    wants: str = ""  # what the claim needs of one node, e.g. "16 devices of class gpu"

    def __str__(self) -> str:
        where = f"{self.claim} {self.request}" if self.request else self.claim
        return f"{where}: {self.detail}" if where else self.detail


class Unsatisfiable:
    """Why allocation failed on a node: one-line summary plus the details behind it.

    The funnels are counted when first read, not when the search fails: a scheduler tries
    many nodes that do not fit and reads the funnels of few (upstream keeps no explanation
    at all). They count against the AllocatedState the search had, as it is when they are
    read: read them before reserving more devices in that state in place.
    """

    __slots__ = (
        "_funnels",
        "blockers",
        "constraint",
        "incomplete_pools",
        "invalid_pools",
        "node",
        "search",
        "summary",
    )

    def __init__(
        self,
        summary: str,
        node: str,
        funnels: tuple[RequestFunnel, ...] | None = None,
        constraint: ConstraintFailure | None = None,
        invalid_pools: tuple[str, ...] = (),
        incomplete_pools: tuple[str, ...] = (),
        blockers: tuple[Blocker, ...] = (),  # known without a search (e.g. an allocated claim)
        search: Search | None = None,
    ) -> None:
        self.summary = summary
        self.node = node
        self._funnels = funnels
        self.constraint = constraint
        self.invalid_pools = invalid_pools
        self.incomplete_pools = incomplete_pools
        self.blockers = blockers
        # The failed search, kept so the funnels and the blocker are worked out only when
        # someone asks (a node that fails costs nothing more unless the pod then fits
        # nowhere).
        self.search = search

    @property
    def funnels(self) -> tuple[RequestFunnel, ...]:
        found = self._funnels
        if found is None:
            found = self._funnels = funnels(self.search) if self.search is not None else ()
        return found

    def _key(self) -> tuple[object, ...]:
        return (
            self.summary,
            self.node,
            self.funnels,
            self.constraint,
            self.invalid_pools,
            self.incomplete_pools,
            self.blockers,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Unsatisfiable):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.summary, self.node))

    def __repr__(self) -> str:
        return (
            f"Unsatisfiable(summary={self.summary!r}, node={self.node!r}, "
            f"funnels={self.funnels!r}, constraint={self.constraint!r}, "
            f"invalid_pools={self.invalid_pools!r}, incomplete_pools={self.incomplete_pools!r}, "
            f"blockers={self.blockers!r})"
        )

    def __str__(self) -> str:
        return self.summary


def reached(search: Search, rd: ReqData, entry: DeviceEntry) -> int:
    """How many funnel stages a device of the node passes for `rd` (0..6): the funnel and
    the blocker diagnosis share this one judgement of a device."""
    f = search.features
    if not (f.binding_conditions or not entry.binding) or not _passes(
        search.class_match, rd, entry
    ):
        return 1
    if not _passes(search.request_match, rd, entry):
        return 2
    if f.device_taints and taint_blocks(entry, rd.tolerations):
        return 3
    multi = f.consumable_capacity and entry.multi
    if not rd.admin and search.in_use(entry, multi):
        return 4
    if entry.consumes and (not f.partitionable_devices or short_counter(search, entry)):
        return 5
    if f.consumable_capacity and search._capacity_fits(rd, entry) is None:
        return 5
    return 6


def short_counter(search: Search, entry: DeviceEntry) -> tuple[str, str, int, int] | None:
    """The first counter (set, counter, available, needed) the device's consumption
    exceeds, given the allocated devices of its pool; None when every counter suffices
    (a device already shared consumed its counters with its first share)."""
    multi = search.features.consumable_capacity and entry.multi
    if multi and search._has_shares(entry):
        return None
    pool = search.pool_by_key[(entry.ref.driver, entry.ref.pool)]
    avail = search.available_counters(pool)
    for set_name, counters in entry.consumes:
        for counter, amount in counters:
            have = avail.get(set_name, {}).get(counter, 0)
            if have < amount:
                return (set_name, counter, have, amount)
    return None


def funnel(search: Search, rd: ReqData) -> RequestFunnel:
    counts = [0] * 6
    for entry, on_node in search.devices:
        if on_node:
            for stage in range(reached(search, rd, entry)):
                counts[stage] += 1
    return RequestFunnel(
        claim_name(search.claims[rd.claim_index]),
        rd.full,
        rd.count,
        "All" if rd.all_mode else "ExactCount",
        *counts,
    )


def _passes(check: Callable[[ReqData, DeviceEntry], bool], rd: ReqData, entry: DeviceEntry) -> bool:
    """A selector stage; one that fails to evaluate counts as not passing. The search never
    reached that device (or it would have failed with the error), so the explanation of an
    unsatisfiable node must not turn into that error."""
    try:
        return check(rd, entry)
    except CelSelectorError:
        return False


def funnels(search: Search) -> tuple[RequestFunnel, ...]:
    return tuple(funnel(search, rd) for claim in search.reqs for subs in claim for rd in subs)


def unsatisfiable(search: Search, summary: str) -> Unsatisfiable:
    unusable = [p for p in search.pools if p.incomplete or p.invalid]
    return Unsatisfiable(
        summary,
        search.node.name,
        None,
        search.first_constraint_failure,
        tuple([f"{p.id}: {p.invalid}" for p in unusable if p.invalid]) if unusable else (),
        tuple([p.id for p in unusable if p.incomplete]) if unusable else (),
        (),
        search,
    )
