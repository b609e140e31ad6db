"""The depth-first search with backtracking (upstream's allocateOne / allocateDevice).

Order and effort follow upstream's incubating allocator: requests in spec order, subrequests
in list order, candidate devices pool by pool (driver, name; binding-condition pools last),
slice by name, device by index. Within one request only combinations are explored (the next
device starts after the previous pick); across requests and claims everything backtracks.
The first complete solution wins; nothing is scored.

Deliberate deviations from upstream quirks (dra-spec §7), each marked `DECISION` below:
counters are released when a later check rejects a device (§7 item 25); counter
bookkeeping is keyed by (driver, pool) (item 26); distinctAttribute compares against every
device already in the set (item 27); the policy default compares by value (item 28).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import is_

import msgspec

from kubedra.allocator.capacity import CapacityError, consumption
from kubedra.allocator.inventory import DeviceEntry, Inventory, Pool, PoolKey, Selector
from kubedra.allocator.projection import Tagged
from kubedra.allocator.state import AllocatedState
from kubedra.allocator.types import (
    MAX_RESULTS_PER_CLAIM,
    AllocationError,
    AllocationTimeout,
    DeviceRef,
    Features,
    NodeInfo,
    RequestKey,
    ResultsLimitExceeded,
    stable_variant,
)
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceClass,
    DeviceConstraint,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
)
from kubedra.cel import CelCompileError

DeviceOrder = Callable[[RequestKey, Sequence[DeviceRef]], Sequence[DeviceRef]]
# One selector of a request or its class: the inventory's state of it, who owns it and its
# position, for error messages.
Check = tuple[Selector, str, int]
SHARE_NAMESPACE = uuid.UUID("6f1c9a52-3d0e-4f7b-9a51-2c8e0d4b7a10")
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


class CelSelectorError(AllocationError):
    """A selector failed to compile or evaluate: fatal, like upstream."""

    def __init__(self, message: str, expression: str, device: DeviceRef | None) -> None:
        super().__init__(message)
        self.expression = expression
        self.device = device


def _fresh(rd: ReqData) -> ReqData:
    """A copy of prepared request data without any search's state."""
    return msgspec.structs.replace(rd, all_devices=[], candidates=None, selectable={})


class _MaxSize(Exception):
    """Allocating this request would push the claim past 32 results."""


def _with_hint(message: str) -> str:
    """Upstream's EnhanceRuntimeError: a missing map key gets a hint how to guard it."""
    if "no such key:" not in message:
        return message
    return (
        f"{message}. consider using CEL optional chaining (.? followed by orValue()) or "
        "guarding the check with has() for optional fields"
    )


def claim_name(claim: ResourceClaim) -> str:
    """`namespace/name` like klog.KObj."""
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


class ReqData(msgspec.Struct, eq=False):
    """One request without subrequests, or one subrequest (upstream requestData)."""

    claim_index: int
    request_index: int
    sub_index: int  # -1 for a plain request
    name: str  # the request's or subrequest's own name
    parent: str | None
    klass: DeviceClass
    selectors: tuple[str, ...]
    all_mode: bool
    count: int
    admin: bool
    tolerations: tuple[DeviceToleration, ...]
    capacity: Mapping[str, Quantity] | None
    class_name: str = ""  # as the request names it
    class_checks: tuple[Check, ...] = ()
    request_checks: tuple[Check, ...] = ()
    all_devices: list[DeviceEntry] = []
    candidates: list[tuple[DeviceEntry, bool]] | None = None
    selectable: dict[int, bool] = {}  # by entry index

    @property
    def full(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclass(eq=False, slots=True)
class Pick:
    """One device picked for one request (upstream internalDeviceResult)."""

    req: ReqData
    entry: DeviceEntry
    share_id: str | None = None
    consumed: dict[str, Quantity] | None = None


@dataclass(frozen=True)
class ConstraintFailure:
    """The first constraint that rejected a device during the search."""

    claim: str
    index: int
    kind: str  # matchAttribute | distinctAttribute
    attribute: str
    device: str
    reason: str  # "attribute not set" | "value differs" | "value not distinct"


class _Constraint:
    kind = ""

    def __init__(self, index: int, attribute: str, requests: tuple[str, ...], lists: bool):
        self.index = index
        self.attribute = attribute
        self.requests = frozenset(requests)
        self.lists = lists
        self.last_reason = ""

    def applies(self, req: ReqData) -> bool:
        if not self.requests:
            return True
        if req.parent is None:
            return req.name in self.requests
        return req.parent in self.requests or req.full in self.requests

    def add(self, req: ReqData, entry: DeviceEntry) -> bool:
        raise NotImplementedError

    def remove(self, req: ReqData, entry: DeviceEntry) -> None:
        raise NotImplementedError


def _as_set(value: Tagged) -> frozenset[tuple[str, object]]:
    kind, values, _ = value
    return frozenset((kind, v) for v in values)


class _Match(_Constraint):
    """matchAttribute: all devices share the value (list attributes: a common element)."""

    kind = "matchAttribute"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.stack: list[Tagged | frozenset[tuple[str, object]] | None] = []

    def add(self, req: ReqData, entry: DeviceEntry) -> bool:
        if not self.applies(req):
            return True
        value = entry.attribute(self.attribute)
        if value is False:
            self.last_reason = "attribute not set"
            return False
        assert value is not True
        if self.lists and value is not None:
            new = _as_set(value)
            if self.stack:
                top = self.stack[-1]
                assert isinstance(top, frozenset)
                new = top & new
                if not new:
                    self.last_reason = "no common value"
                    return False
            self.stack.append(new)
            return True
        if self.stack:
            first = self.stack[0]
            # A value of unknown type (a list, without list attributes) never matches; it
            # may only be the first one.
            if value is None or value[2] or first is None or first != value:
                self.last_reason = "value differs"
                return False
        self.stack.append(value)
        return True

    def remove(self, req: ReqData, entry: DeviceEntry) -> None:
        if self.applies(req):
            self.stack.pop()


class _Distinct(_Constraint):
    """distinctAttribute: every device has a different value (lists: pairwise disjoint)."""

    kind = "distinctAttribute"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.seen: list[frozenset[tuple[str, object]]] = []

    def add(self, req: ReqData, entry: DeviceEntry) -> bool:
        if not self.applies(req):
            return True
        value = entry.attribute(self.attribute)
        if value is False or value is None:
            self.last_reason = "attribute not set"
            return False
        assert value is not True
        if not self.lists and value[2]:
            # Without list attributes a list is a value of unknown type: upstream admits it
            # only into an empty set, and it clashes with nothing added after it.
            if self.seen:
                self.last_reason = "value not distinct"
                return False
            self.seen.append(frozenset())
            return True
        new = _as_set(value) if self.lists else frozenset([(value[0], (value[1], value[2]))])
        # DECISION (§7 item 27): compare with every device in the set, not only the one
        # last added for the same request name as upstream does.
        if any(new & old for old in self.seen):
            self.last_reason = "value not distinct"
            return False
        self.seen.append(new)
        return True

    def remove(self, req: ReqData, entry: DeviceEntry) -> None:
        if self.applies(req):
            self.seen.pop()


def tolerates(tol: DeviceToleration, key: str, value: str, effect: str) -> bool:
    """Upstream ToleratesTaint."""
    if tol.effect and tol.effect != effect:
        return False
    if tol.key and tol.key != key:
        return False
    if tol.operator == "Exists":
        return True
    if tol.operator in (None, "", "Equal"):
        return (tol.value or "") == value
    return False


def taint_blocks(entry: DeviceEntry, tolerations: Sequence[DeviceToleration]) -> bool:
    """Any NoSchedule/NoExecute taint not tolerated? (None and unknown effects never block.)"""
    for taint in entry.taints:
        effect = taint.effect or ""
        if effect not in _BLOCKING_EFFECTS:
            continue
        if not any(tolerates(t, taint.key, taint.value or "", effect) for t in tolerations):
            return True
    return False


# --- the search -------------------------------------------------------------------------


class Search:
    """One Allocate call: pre-pass, depth-first search, bookkeeping for explanations."""

    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        node: NodeInfo,
        inventory: Inventory,
        classes: Mapping[str, DeviceClass],
        state: AllocatedState,
        *,
        features: Features,
        order: DeviceOrder | None,
        strict_cel: bool,
        timeout_s: float,
        max_steps: int | None,
    ) -> None:
        self.claims = list(claims)
        self.node = node
        self.inventory = inventory
        self.classes = classes
        self.state = state
        self.features = features
        self.order = order
        self.strict = strict_cel
        self.timeout_s = timeout_s
        self.deadline = time.perf_counter() + timeout_s
        self.max_steps = max_steps
        self.steps = 0
        self.gathered = gathered = inventory.gathered(node, features)
        self.pools = gathered.pools
        self.claim_names = [claim_name(c) for c in self.claims]
        self.reqs: list[list[list[ReqData]]] = []
        self.constraints: list[list[_Constraint]] = []
        self.allocating: dict[int, set[int]] = {}
        self.counters: dict[PoolKey, dict[str, dict[str, int]]] = {}
        self.cap_inflight: dict[int, dict[str, int]] = {}
        self.share_inflight: dict[int, int] = {}
        self.results: list[list[Pick]] = []
        self.selected: dict[tuple[int, int], int] = {}
        self._class_checks: dict[str, tuple[Check, ...]] = {}
        self.first_constraint_failure: ConstraintFailure | None = None

    @property
    def pool_by_key(self) -> dict[PoolKey, Pool]:
        return self.gathered.by_key

    @property
    def devices(self) -> list[tuple[DeviceEntry, bool]]:
        """The node's devices in search order (read only)."""
        return self.gathered.devices

    # --- pre-pass (upstream: per-claim validation; all errors fatal) ----------------------

    def prepare(self) -> None:
        """Validate the claims and make the request data (upstream: per claim, in Allocate;
        all errors fatal). What does not depend on the node is kept in the inventory: the
        next node of the same pod (the same claim and class objects) starts from a copy."""
        # By identity (the objects are kept in the entry, so their ids stay theirs).
        key = (tuple(map(id, self.claims)), id(self.classes), id(self.features), self.strict)
        prepared = self.inventory._prepared.get(key)
        if (
            prepared is not None
            and prepared[1] is self.classes
            and prepared[4] is self.features
            and all(map(is_, prepared[0], self.claims))
            and all(self.classes.get(name) is klass for name, klass in prepared[3])
        ):
            self.reqs = [
                [[_fresh(rd) for rd in subs] for subs in claim_reqs] for claim_reqs in prepared[2]
            ]
            for ci, claim in enumerate(self.claims):
                self.constraints.append(self._constraints(ci, claim))
                self.results.append([])
            return
        self._prepare()
        if not any(rd.all_mode for claim_reqs in self.reqs for subs in claim_reqs for rd in subs):
            cache = self.inventory._prepared
            if len(cache) > 64:
                cache.clear()
            reqs = [rd for claim_reqs in self.reqs for subs in claim_reqs for rd in subs]
            cache[key] = (
                tuple(self.claims),
                self.classes,
                self.reqs,  # this search's own: a reuse copies them without the search state
                # The classes used, as looked up: a mapping changed in place is noticed.
                tuple({rd.class_name: rd.klass for rd in reqs}.items()),
                self.features,
            )

    def _constraints(self, ci: int, claim: ResourceClaim) -> list[_Constraint]:
        constraints = claim.spec.devices.constraints
        if not constraints:
            return []
        cname = self.claim_names[ci]
        return [self._constraint(cname, i, c) for i, c in enumerate(constraints)]

    def _prepare(self) -> None:
        f = self.features
        for ci, claim in enumerate(self.claims):
            cname = self.claim_names[ci]
            claim_reqs: list[list[ReqData]] = []
            min_devices = 0
            devices = claim.spec.devices
            for ri, request in enumerate(devices.requests):
                if request.first_available:
                    if not f.prioritized_list:
                        raise AllocationError(
                            f"claim {cname}, request {request.name}: has subrequests, but the "
                            "DRAPrioritizedList feature is disabled"
                        )
                    if not f.consumable_capacity:
                        self._no_capacity(cname, request.name, request.exactly)
                        for sub in request.first_available:
                            if sub.capacity is not None:
                                raise AllocationError(
                                    f"claim {cname}, subrequest {sub.name}: has capacity "
                                    "requests, but the DRAConsumableCapacity feature is disabled"
                                )
                    subs = [
                        self._request_data(ci, ri, si, sub, request.name)
                        for si, sub in enumerate(request.first_available)
                    ]
                    fewest = min([s.count for s in subs])
                else:
                    if not f.consumable_capacity:
                        self._no_capacity(cname, request.name, request.exactly)
                    if request.exactly is None:
                        raise AllocationError(
                            f"claim {cname}, request {request.name}: missing device class name "
                            "(unsupported request type?)"
                        )
                    rd = self._request_data(ci, ri, -1, request.exactly, request.name)
                    subs = [rd]
                    fewest = rd.count
                claim_reqs.append(subs)
                # Checked request by request, as upstream does (the fewest a request can
                # take: its smallest subrequest).
                if fewest > MAX_RESULTS_PER_CLAIM - min_devices:
                    raise ResultsLimitExceeded(
                        f"claim {cname}, request {request.name}: adding {fewest} devices exceeds "
                        f"the claim limit of {MAX_RESULTS_PER_CLAIM}, with {min_devices} already "
                        "accounted for",
                        cname,
                        request.name,
                        min_devices + fewest,
                    )
                min_devices += fewest
            self.reqs.append(claim_reqs)
            self.constraints.append(self._constraints(ci, claim))
            self.results.append([])

    @staticmethod
    def _no_capacity(cname: str, name: str, exactly: ExactDeviceRequest | None) -> None:
        if exactly is not None and exactly.capacity is not None:
            raise AllocationError(
                f"claim {cname}, request {name}: has capacity requests, but the "
                "DRAConsumableCapacity feature is disabled"
            )

    def _constraint(self, cname: str, i: int, c: DeviceConstraint) -> _Constraint:
        lists = self.features.list_type_attributes
        if c.match_attribute:
            return _Match(i, c.match_attribute, c.requests, lists)
        if c.distinct_attribute and not stable_variant(self.features):
            return _Distinct(i, c.distinct_attribute, c.requests, lists)
        raise AllocationError(
            f"claim {cname}, constraint #{i}: empty constraint (unsupported constraint type?)"
        )

    def _request_data(
        self,
        ci: int,
        ri: int,
        si: int,
        request: ExactDeviceRequest | DeviceSubRequest,
        parent_name: str,
    ) -> ReqData:
        cname = self.claim_names[ci]
        name = parent_name if si < 0 else request.name  # type: ignore[union-attr]
        if request.derived_attributes:
            raise AllocationError(
                f"claim {cname}, request {name}: cannot handle request with derived "
                "attributes, the feature is disabled"
            )
        selectors = tuple([s.cel.expression for s in request.selectors if s.cel is not None])
        if len(selectors) != len(request.selectors):
            i = next(i for i, sel in enumerate(request.selectors) if sel.cel is None)
            raise AllocationError(
                f"claim {cname}, request {name}, selector #{i}: CEL expression empty "
                "(unsupported selector type?)"
            )
        admin = bool(getattr(request, "admin_access", None))
        if admin and not self.features.admin_access:
            raise AllocationError(
                f"claim {cname}, request {name}: admin access is requested, but the feature is "
                "disabled"
            )
        class_name = request.device_class_name
        if not class_name:
            raise AllocationError(
                f"claim {cname}, request {name}: missing device class name (unsupported "
                "request type?)"
            )
        klass = self.classes.get(class_name)
        if klass is None:
            raise AllocationError(
                f"claim {cname}, request {name}: could not retrieve device class {class_name}: "
                f'deviceclass.resource.k8s.io "{class_name}" not found'
            )
        mode = request.allocation_mode or "ExactCount"
        if selectors:
            selector, strict, who = self.inventory.selector, self.strict, f"claim {cname}"
            checks = tuple([(selector(e, strict), who, i) for i, e in enumerate(selectors)])
        else:
            checks = ()
        capacity = request.capacity
        rd = ReqData(
            ci,
            ri,
            si,
            name,
            parent_name if si >= 0 else None,
            klass,
            selectors,
            mode == "All",
            0,
            admin,
            request.tolerations,
            capacity.requests if capacity is not None else None,
            class_name,
            self._class_checks_of(klass),
            checks,
        )
        if mode == "ExactCount":
            rd.count = 1 if request.count is None else request.count
            if rd.count > 2**63 - 1:
                raise AllocationError(
                    f"claim {cname}, request {name}: exact count {rd.count} is too large"
                )
            return rd
        where = f"claim {cname}, request {name}"
        if mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"{where}: asks for all devices, but resource pool {pool.id} is "
                        "currently being updated"
                    )
                if pool.invalid is not None:
                    raise AllocationError(
                        f"{where}: asks for all devices, but resource pool {pool.id} is "
                        "currently invalid"
                    )
                for entry, on_node in pool.devices:
                    if not self.selectable(rd, entry, on_node):
                        continue
                    # Static capacity only: a device whose capacity others use up stays in
                    # the set, and "All" then fails (upstream 1.37).
                    if self.features.consumable_capacity and (
                        self._capacity_fits(rd, entry, used=False) is None
                    ):
                        continue
                    rd.all_devices.append(entry)
            rd.count = len(rd.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {mode}")
        return rd

    # --- selectability --------------------------------------------------------------------

    def _class_checks_of(self, klass: DeviceClass) -> tuple[Check, ...]:
        checks = self._class_checks.get(klass.name)
        if checks is None:
            exprs = [s.cel.expression for s in klass.spec.selectors if s.cel is not None]
            selector = self.inventory.selector
            who = f"class {klass.name}"
            checks = self._class_checks[klass.name] = tuple(
                (selector(e, self.strict), who, i) for i, e in enumerate(exprs)
            )
        return checks

    def with_class(self, rd: ReqData, klass: DeviceClass) -> ReqData:
        """The request as if it named another class (for explanations)."""
        return msgspec.structs.replace(
            rd,
            klass=klass,
            class_checks=self._class_checks_of(klass),
            candidates=None,
            selectable={},
        )

    def selectable(self, rd: ReqData, entry: DeviceEntry, on_node: bool) -> bool:
        """Binding-condition gate, class selectors, request selectors, per-device node."""
        index = entry.index
        known = rd.selectable
        ok = known.get(index)
        if ok is not None:
            return ok
        if not self.features.binding_conditions and entry.binding:
            ok = False
        else:
            ok = self._passes(rd.class_checks, entry) and self._passes(rd.request_checks, entry)
            if ok and not on_node:
                ok = self._on_node(entry, on_node)
        known[index] = ok
        return ok

    def _on_node(self, entry: DeviceEntry, on_node: bool) -> bool:
        # Checked after the selectors, as upstream does: only then does a per-device node
        # selector that cannot be parsed fail the allocation.
        if not on_node:
            key = entry.key
            error = self.pool_by_key[(key[0], key[1])].node_errors.get(entry.index)
            if error is not None:
                raise AllocationError(error)
        return on_node

    def class_match(self, rd: ReqData, entry: DeviceEntry) -> bool:
        return self._passes(rd.class_checks, entry)

    def request_match(self, rd: ReqData, entry: DeviceEntry) -> bool:
        return self._passes(rd.request_checks, entry)

    def _passes(self, checks: tuple[Check, ...], entry: DeviceEntry) -> bool:
        """All selectors of `checks` admit the device; a selector that does not compile or
        fails on the device ends the allocation (CelSelectorError)."""
        index = entry.index
        for selector, who, i in checks:
            hit = selector.results.get(index)
            if hit is None:
                try:
                    hit = selector.evaluate(entry)
                except CelCompileError as exc:
                    raise CelSelectorError(
                        f"{who}: selector #{i}: CEL compile error: {exc}", selector.expression, None
                    ) from None
            if hit is True:
                continue
            if hit is False:
                return False
            raise CelSelectorError(
                f"{who}: selector #{i} on device {entry.ref}: CEL runtime error: "
                f"{_with_hint(str(hit))}",
                selector.expression,
                entry.ref,
            ) from None
        return True

    # --- availability ---------------------------------------------------------------------

    def in_use(self, entry: DeviceEntry, multi: bool) -> bool:
        ref = entry.key
        if ref in self.state.devices:
            return True
        if multi:
            return False
        # A dedicated device is also unusable while shares of it exist (it changed from
        # multi-allocatable, or is being allocated by another request of this attempt).
        return ref in self.state.shared or bool(self.allocating.get(entry.index))

    def available_counters(self, pool: Pool) -> dict[str, dict[str, int]]:
        """The pool's counters minus what allocated devices (here or elsewhere) consume."""
        cache = self.state._counters
        hit = cache.get(id(pool))
        if hit is not None and hit[0] is pool:
            return hit[1]
        avail = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        state = self.state
        if state.devices or state.shared:
            for entry in [*(e for e, _ in pool.devices), *pool.other_devices]:
                if not entry.device.consumes_counters or not (
                    entry.key in state.devices or entry.key in state.shared
                ):
                    continue
                for set_name, counters in entry.consumes:
                    have = avail.get(set_name)
                    if have is not None:
                        for counter, amount in counters:
                            if counter in have:
                                have[counter] -= amount
        cache[id(pool)] = (pool, avail)
        return avail

    def _take_counters(self, entry: DeviceEntry) -> Callable[[], None] | None:
        # DECISION (§7 item 26): bookkeeping per (driver, pool), not per pool name.
        pool = self.pool_by_key[(entry.key[0], entry.key[1])]
        avail = self.available_counters(pool)
        consumed = self.counters.setdefault(pool.key, {})
        added: list[tuple[dict[str, int], str, int]] = []
        ok = True
        for set_name, counters in entry.consumes:
            inflight = consumed.setdefault(set_name, {})
            have = avail.get(set_name, {})
            for counter, amount in counters:
                total = inflight.get(counter, 0) + amount
                inflight[counter] = total
                added.append((inflight, counter, amount))
                if have.get(counter, 0) < total:
                    ok = False

        def undo() -> None:
            for inflight, counter, amount in added:
                inflight[counter] -= amount

        if not ok:
            undo()
            return None
        return undo

    def _capacity_fits(
        self, rd: ReqData, entry: DeviceEntry, *, inflight: bool = False, used: bool = True
    ) -> dict[str, Quantity] | None:
        """What the request consumes of the device, if that fits beside what allocated
        claims (`used`) and this attempt (`inflight`) already consume; else None."""
        if rd.capacity is None and not entry.multi and not entry.policies:
            return {}  # all of each capacity, which nobody else can hold: it fits
        try:
            cons = consumption(rd.capacity, entry.capacity, self.features.fractional_capacity_range)
        except CapacityError as exc:
            device = str(entry.ref) if used else entry.ref.device  # upstream's wording
            raise AllocationError(
                f"claim {claim_name(self.claims[rd.claim_index])}, request {rd.name}: "
                f"checking capacity for device {device}: {exc}"
            ) from None
        if cons is None:
            return None
        existing = self.state.consumed(entry.ref) if used else {}
        current = self.cap_inflight.get(entry.index, {}) if inflight else {}
        for name, q in cons.items():
            total = existing.get(name, 0) + current.get(name, 0) + q.nanos
            if total > entry.capacity[name].value.nanos:
                return None
        return cons

    def _has_shares(self, entry: DeviceEntry) -> bool:
        return entry.key in self.state.shared or self.share_inflight.get(entry.index, 0) > 0

    def use(self, rd: ReqData, entry: DeviceEntry, must: bool) -> Callable[[], None] | None:
        """Upstream allocateDevice: try to add `entry` for `rd`; an undo function or None."""
        f = self.features
        ci = rd.claim_index
        multi = f.consumable_capacity and entry.multi
        if not multi and rd.admin and ci in self.allocating.get(entry.index, ()):
            return None
        if not rd.admin and self.in_use(entry, multi):
            return None
        if entry.consumes and not f.partitionable_devices:
            return None
        undos: list[Callable[[], None]] = []
        # A shared device consumes its counters once, with its first share (§7 item 16).
        if entry.consumes and not (multi and self._has_shares(entry)):
            # DECISION (§7 item 25): unlike upstream, counters taken here are given back
            # when a later check (taint, constraint, capacity) rejects the device.
            undo_counters = self._take_counters(entry)
            if undo_counters is None:
                return None
            undos.append(undo_counters)

        def rollback() -> None:
            for u in reversed(undos):
                u()

        if f.device_taints and taint_blocks(entry, rd.tolerations):
            rollback()
            return None
        constraints = self.constraints[ci]
        for i, c in enumerate(constraints):
            if not c.add(rd, entry):
                if must:
                    rollback()
                    raise AllocationError(
                        f"claim {claim_name(self.claims[ci])}, request {rd.name}: cannot add "
                        f"device {entry.ref} because a claim constraint would not be satisfied"
                    )
                for prev in constraints[:i]:
                    prev.remove(rd, entry)
                if self.first_constraint_failure is None:
                    self.first_constraint_failure = ConstraintFailure(
                        claim_name(self.claims[ci]), c.index, c.kind, c.attribute,
                        str(entry.ref), c.last_reason,
                    )  # fmt: skip
                rollback()
                return None

        def undo_constraints() -> None:
            for c in reversed(constraints):
                c.remove(rd, entry)

        undos.append(undo_constraints)
        if not multi:
            claims = self.allocating.setdefault(entry.index, set())
            claims.add(ci)
            undos.append(lambda: claims.discard(ci))
        share_id: str | None = None
        consumed: dict[str, Quantity] | None = None
        if f.consumable_capacity:
            cons = self._capacity_fits(rd, entry, inflight=True)
            if cons is None:
                rollback()
                return None
            if multi:
                consumed = cons
                share_id = self._share_id(rd, entry)
                current = self.cap_inflight.setdefault(entry.index, {})
                for fq, q in cons.items():
                    current[fq] = current.get(fq, 0) + q.nanos
                self.share_inflight[entry.index] = self.share_inflight.get(entry.index, 0) + 1

                def undo_capacity(cons: dict[str, Quantity] = cons) -> None:
                    for fq, q in cons.items():
                        current[fq] -= q.nanos
                    self.share_inflight[entry.index] -= 1

                undos.append(undo_capacity)
        results = self.results[ci]
        results.append(Pick(rd, entry, share_id, consumed))
        undos.append(results.pop)  # type: ignore[arg-type]
        return rollback

    def _share_id(self, rd: ReqData, entry: DeviceEntry) -> str:
        # Upstream draws a random UUID; a name-based one keeps results reproducible.
        claim = self.claims[rd.claim_index]
        n = sum(1 for p in self.results[rd.claim_index] if p.entry is entry)
        seed = f"{claim.metadata.uid or claim_name(claim)}/{rd.full}/{entry.ref}/{n}"
        return str(uuid.uuid5(SHARE_NAMESPACE, seed))

    # --- candidates and the recursion -----------------------------------------------------

    def candidates(self, rd: ReqData) -> list[tuple[DeviceEntry, bool]]:
        if rd.candidates is None:
            if self.order is None:
                rd.candidates = self._pinned(rd)
            else:
                pool = [(e, on) for e, on in self.devices if self.selectable(rd, e, on)]
                key = RequestKey(claim_name(self.claims[rd.claim_index]), rd.full)
                by_ref = {e.ref: (e, on) for e, on in pool}
                ordered: list[tuple[DeviceEntry, bool]] = []
                for ref in self.order(key, [e.ref for e, _ in pool]):
                    item = by_ref.pop(ref, None)
                    if item is not None:
                        ordered.append(item)
                # The hook may only reorder: anything it dropped keeps its upstream place
                # at the end, so feasibility never depends on the policy.
                ordered.extend(item for item in pool if item[0].ref in by_ref)
                rd.candidates = ordered
        return rd.candidates

    def _pinned(self, rd: ReqData) -> list[tuple[DeviceEntry, bool]]:
        """The node's devices, less those of other drivers when the first selector the
        request evaluates pins a driver (upstream evaluates it on them, always false)."""
        first = rd.class_checks[:1] or rd.request_checks[:1]
        driver = first[0][0].pinned() if first else None
        return self.devices if driver is None else self.gathered.for_driver(driver)

    def _tick(self) -> None:
        self.steps += 1
        if self.max_steps is not None and self.steps > self.max_steps:
            raise AllocationTimeout(
                f"filter operation aborted: timed out trying to allocate devices on node "
                f"{self.node.name}: search budget of {self.max_steps} steps exhausted"
            )
        if not self.steps & 63 and time.perf_counter() > self.deadline:
            raise AllocationTimeout(
                f"filter operation aborted: timed out trying to allocate devices on node "
                f"{self.node.name}: search stopped after {self.timeout_s:g}s "
                f"and {self.steps} steps"
            )

    def run(self) -> bool:
        return self._one(0, 0, 0, 0, False, 0)

    def _one(self, c: int, r: int, s: int, d: int, in_sub: bool, start: int) -> bool:
        self._tick()
        if c >= len(self.reqs):
            return True
        claim_reqs = self.reqs[c]
        if r >= len(claim_reqs):
            try:
                return self._one(c + 1, 0, 0, 0, False, 0)
            except _MaxSize:
                return False
        subs = claim_reqs[r]
        if not in_sub and subs[0].sub_index >= 0:
            all_exceeded = True
            for si in range(len(subs)):
                try:
                    ok = self._one(c, r, si, 0, True, 0)
                except _MaxSize:
                    continue
                all_exceeded = False
                if ok:
                    self.selected[(c, r)] = si
                    return True
            if all_exceeded:
                raise _MaxSize
            return False
        rd = subs[s]
        if rd.all_mode and not rd.all_devices:
            return False  # "All" needs at least one device
        if d >= rd.count:
            return self._one(c, r + 1, 0, 0, False, 0)
        if len(self.results[c]) + rd.count - d > MAX_RESULTS_PER_CLAIM:
            raise _MaxSize
        if rd.all_mode:
            undo = self.use(rd, rd.all_devices[d], must=True)
            if undo is None:
                return False
            ok = False
            try:
                ok = self._one(c, r, s, d + 1, in_sub, 0)
            finally:
                if not ok:
                    undo()
            return ok
        candidates = self.candidates(rd)
        multi_on = self.features.consumable_capacity
        taken, shared = self.state.devices, self.state.shared
        allocating, admin = self.allocating, rd.admin
        for idx in range(start, len(candidates)):
            entry, on_node = candidates[idx]
            if admin:
                multi = multi_on and entry.multi
                if not multi and c in allocating.get(entry.index, ()):
                    continue
            else:  # in use? (self.in_use)
                key = entry.key
                if key in taken:
                    continue
                multi = multi_on and entry.multi
                if not multi and (key in shared or allocating.get(entry.index)):
                    continue
            if not self.selectable(rd, entry, on_node):
                continue
            # Upstream checks capacity here and again in allocateDevice.
            if (
                multi_on
                and (rd.capacity is not None or multi or entry.policies)
                and self._capacity_fits(rd, entry, inflight=True) is None
            ):
                continue
            undo = self.use(rd, entry, must=False)
            if undo is None:
                continue
            ok = False
            try:
                ok = self._one(c, r, s, d + 1, in_sub, idx + 1)
            finally:
                if not ok:
                    undo()
            if ok:
                return True
        return False
