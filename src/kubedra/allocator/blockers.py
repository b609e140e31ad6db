"""Blockers: which stage stops a claim on a node, named with its numbers.

A funnel counts the devices left after each stage; a blocker names the stage that leaves
too few for a request and by how much: the class or selectors, taints, devices held by
other claims, an exhausted counter set of partitionable devices, consumable capacity,
`allocationMode: All` with a busy device, every subrequest of a `firstAvailable` list, a
`matchAttribute` (the largest group of candidates sharing one value) or
`distinctAttribute` (distinct values) constraint, a claim over the per-claim results limit,
and claims or requests that fit one by one but not together (upstream only says "cannot
allocate all claims").

A blocker whose devices other claims hold also says which of them, released, would make
the node fit: checked by running the allocator on the state without them, never guessed.

Diagnosed from a failed search only when asked (never on the scheduling path of a node
that fits), and bounded: one pass over the node's devices per request and constraint, and
at most a few searches capped at `TOGETHER_STEPS` steps (claims that fit alone but not
together; up to `RELEASE_TRIES` release checks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from kubedra.allocator.explain import (
    STAGES,
    Blocker,
    RequestFunnel,
    Unsatisfiable,
    reached,
    short_counter,
)
from kubedra.allocator.inventory import DeviceEntry
from kubedra.allocator.search import ReqData, Search, _Constraint, claim_name, tolerates
from kubedra.allocator.state import AllocatedState
from kubedra.allocator.types import MAX_RESULTS_PER_CLAIM, AllocationError, DeviceRef
from kubedra.api.quantity import Format, Quantity
from kubedra.api.resource import ResourceClaim

TOGETHER_STEPS = 20_000  # search steps per "do these claims fit together" check
RELEASE_TRIES = 3  # holders tried, one more each time, for "fits if ... were released"
Holders = Mapping[DeviceRef, Sequence[str]]
_NO_HOLDERS: Holders = {}
_FIT = len(STAGES)


def holders_of(claims: Iterable[ResourceClaim]) -> dict[DeviceRef, list[str]]:
    """Device -> the claims holding it (admin access holds nothing: upstream rule)."""
    out: dict[DeviceRef, list[str]] = {}
    for claim in claims:
        alloc = claim.status.allocation if claim.status is not None else None
        for r in alloc.devices.results if alloc is not None else ():
            if not r.admin_access:
                out.setdefault(DeviceRef(r.driver, r.pool, r.device), []).append(claim_name(claim))
    return out


def diagnose(u: Unsatisfiable, holders: Holders = _NO_HOLDERS) -> tuple[Blocker, ...]:
    """The blockers of a node where allocation failed: per claim, its first blocked request
    or constraint; when every claim looks satisfiable alone, the combination that is not.
    Each is measured for ranking nodes, and says whether the node could hold the claim at
    all (with every device free)."""
    if u.search is None:
        return u.blockers
    search = u.search
    found = [b for ci in range(len(search.reqs)) if (b := _claim(search, ci, holders))]
    if not found and (together := _together(search)) is not None:
        found.append(together)
    return tuple(_measured(search, u.funnels, _with_release(search, b, holders)) for b in found)


# --- how near, and whether ever -----------------------------------------------------------

STATIC = frozenset(STAGES[:3]) | {"results limit"}  # kinds no free device would lift


def _measured(search: Search, funnels: Sequence[RequestFunnel], b: Blocker) -> Blocker:
    """`b` with the claim's devices that pass its selectors and those usable now (from the
    node's funnels), what it needs of a node, and whether it fits here with every device
    free: known from the stage when the node lacks the devices, from the release check when
    one was found, else by one bounded search on the node emptied."""
    names = [claim_name(c) for c in search.claims]
    if b.claim not in names:
        return b
    ci = names.index(b.claim)
    matching, usable, needed = _nearness([f for f in funnels if f.claim == b.claim])
    b = replace(b, matching=matching, usable=usable, needed=needed, wants=_wants(search, ci))
    if b.kind in STATIC:
        return replace(b, fits_free=False, limit=b)
    if b.release:
        return replace(b, fits_free=True)
    if _untouched(search):  # nothing here is held: the node emptied is the node as it is
        return replace(b, fits_free=False, limit=b)
    together = b.kind == "claims together"
    claims = search.claims[: ci + 1] if together else [search.claims[ci]]
    empty = _trial(search, claims, AllocatedState(sharing=search.state.sharing))
    fits = _run(empty)
    if fits is not False:
        return replace(b, fits_free=fits)
    limit = None if together else _claim(empty, 0, _NO_HOLDERS)
    if limit is None:
        limit = _together(empty)
    return replace(b, fits_free=False, limit=limit)


def _untouched(search: Search) -> bool:
    """No device of the node's pools is allocated, shared or has capacity consumed."""
    state = search.state
    if not (state.devices or state.shared or state.capacity):
        return True
    return not any(
        state.is_allocated(e.ref) or e.ref in state.capacity
        for pool in search.pools
        for e in [*(d for d, _ in pool.devices), *pool.other_devices]
    )


def _nearness(funnels: Sequence[RequestFunnel]) -> tuple[int, int, int]:
    """(devices passing the selectors, usable now, needed) of one claim's funnels, each
    request's counted up to what it needs; of subrequests, the one that comes nearest."""
    best: dict[str, tuple[float, float, int, int, int]] = {}
    for f in funnels:
        need = max(f.wanted, 1)
        matching, usable = min(f.request_selectors, need), min(f.fit, need)
        mine = (matching / need, usable / need, matching, usable, need)
        parent = f.request.split("/")[0]
        if parent not in best or mine > best[parent]:
            best[parent] = mine
    return (
        sum(x[2] for x in best.values()),
        sum(x[3] for x in best.values()),
        sum(x[4] for x in best.values()),
    )


def _wants(search: Search, ci: int) -> str:
    """What claim `ci` needs of one node: its requests, then its constraints."""
    requests = search.reqs[ci]
    parts = [" or ".join(_wanted(rd) for rd in subs) for subs in requests]
    text = " and ".join(parts)
    every = {subs[0].parent or subs[0].name for subs in requests}
    sep = ", " if len(requests) > 1 else " "
    for c in search.constraints[ci]:
        scope = sorted(c.requests) if c.requests and set(c.requests) != every else []
        who = f"{' and '.join(scope)} " if scope else ""
        if c.kind == "matchAttribute":
            text += f"{sep}{who}sharing one {c.attribute}"
        else:
            text += f"{sep}{who}each with its own {c.attribute}"
    return text


def _wanted(rd: ReqData) -> str:
    which = f"of class {rd.klass.name}" + (" matching its selectors" if rd.selectors else "")
    if rd.all_mode:
        return f"every device {which} (at least one)"
    return f"{_devices(rd.count)} {which}"


def _with_release(search: Search, b: Blocker, holders: Holders) -> Blocker:
    """`b`, with the fewest of its holders (largest first, at most `RELEASE_TRIES`) whose
    release makes every claim fit on the node, checked by a bounded search."""
    names: set[str] = set()
    for claim, _ in b.holders[:RELEASE_TRIES]:
        names.add(claim)
        if _fits(search, search.claims, _released(search.state, names, holders)):
            return replace(b, release=tuple(c for c, _ in b.holders if c in names))
    return b


def _released(state: AllocatedState, names: set[str], holders: Holders) -> AllocatedState:
    """The state without the devices that only the claims `names` hold."""
    freed = {ref for ref, claims in holders.items() if claims and set(claims) <= names}
    return AllocatedState(
        state.devices - freed,
        {(ref, share) for ref, share in state.shares if ref not in freed},
        {ref: caps for ref, caps in state.capacity.items() if ref not in freed},
        sharing=state.sharing,
    )


# --- one claim ----------------------------------------------------------------------------


def _claim(search: Search, ci: int, holders: Holders) -> Blocker | None:
    chosen: list[ReqData] = []
    fewest = 0  # the fewest devices the usable (sub)requests take together
    for subs in search.reqs[ci]:
        if subs[0].sub_index < 0:
            blocker = _request(search, subs[0], holders)
            if blocker is not None:
                return blocker
            chosen.append(subs[0])
            fewest += subs[0].count
            continue
        # firstAvailable: upstream tries the subrequests in order; blocked only if all are.
        blocked = [(rd, _request(search, rd, holders)) for rd in subs]
        usable = [rd for rd, b in blocked if b is None]
        if usable:
            chosen.append(usable[0])
            fewest += min(rd.count for rd in usable)
            continue
        return _first_available(search, blocked)
    if fewest > MAX_RESULTS_PER_CLAIM:
        # The search gives up on a claim whose picks would pass the results limit.
        return results_limit(claim_name(search.claims[ci]), "", fewest)
    for constraint in search.constraints[ci]:
        blocker = _constraint(search, constraint, [rd for rd in chosen if constraint.applies(rd)])
        if blocker is not None:
            return blocker
    return None


def results_limit(claim: str, request: str, need: int) -> Blocker:
    """A claim needing more devices than its status may hold (upstream's
    AllocationResultsMaxSize): no node, no release lifts it."""
    detail = f"{need} device(s) needed, more than the {MAX_RESULTS_PER_CLAIM} a claim may hold"
    short = f"{need} devices, over the claim limit of {MAX_RESULTS_PER_CLAIM}"
    return Blocker("results limit", claim, request, MAX_RESULTS_PER_CLAIM, need, detail, short)


def _first_available(search: Search, blocked: list[tuple[ReqData, Blocker | None]]) -> Blocker:
    rd = blocked[0][0]
    reasons = [(r.name, b) for r, b in blocked if b is not None]
    return Blocker(
        "firstAvailable",
        claim_name(search.claims[rd.claim_index]),
        rd.parent or rd.name,
        0,
        1,
        "no subrequest fits, in order: " + "; ".join(f"{n}: {b.detail}" for n, b in reasons),
        "no subrequest fits (" + ", ".join(f"{n}: {b.short}" for n, b in reasons) + ")",
        _merged(b.holders for _, b in reasons),
    )


def _candidates(search: Search, rd: ReqData) -> list[DeviceEntry]:
    """The devices that pass every stage for `rd` (for "All": the whole set)."""
    if rd.all_mode:
        return rd.all_devices
    return [e for e, on in search.devices if on and reached(search, rd, e) == _FIT]


def _request(search: Search, rd: ReqData, holders: Holders) -> Blocker | None:
    if rd.all_mode:
        return _all_mode(search, rd, holders)
    passed = [(e, reached(search, rd, e)) for e, on in search.devices if on]
    counts = [sum(1 for _, n in passed if n > stage) for stage in range(_FIT)]
    for stage, have in enumerate(counts):
        if have < rd.count:
            stopped = [e for e, n in passed if n == stage]
            return _stage(search, rd, stage, counts, stopped, holders)
    return None


def _blocker(
    search: Search,
    rd: ReqData,
    kind: str,
    have: int,
    detail: str,
    short: str,
    holders: tuple[tuple[str, int], ...] = (),
) -> Blocker:
    claim = claim_name(search.claims[rd.claim_index])
    return Blocker(kind, claim, rd.full, have, rd.count, detail, short, holders)


def _devices(n: int) -> str:
    return f"{n} device" if n == 1 else f"{n} devices"


def _stage(
    search: Search,
    rd: ReqData,
    stage: int,
    counts: list[int],
    stopped: list[DeviceEntry],
    holders: Holders,
) -> Blocker:
    """The blocker at funnel `stage`, the first with fewer devices than needed: `counts` are
    the devices past each stage, and `stopped` those this stage rejected. Each number says
    what it counts; a node's own shortfall (pools, class, selectors) also names the later of
    these stages that leave fewer still, so "12 on the node" never hides "8 of the class"."""
    need, cls = rd.count, rd.klass.name
    have, prev = counts[stage], counts[stage - 1] if stage else counts[stage]
    needed = f", {need} needed"
    if stage == 4:
        detail = f"{have} of {prev} matching device(s) free{needed}"
        short = f"{have} of {prev} matching devices free{needed}"
        return _blocker(search, rd, "free", have, detail, short, _held(stopped, holders))
    if stage == 5:
        return _fit(search, rd, have, prev, stopped, holders)
    # The static stages that follow and leave fewer still, for detail and short.
    later = [(s, counts[s]) for s in range(stage + 1, 3) if counts[s] < counts[s - 1]]
    long_later = "".join(
        f", {n} pass class {cls}" if s == 1 else f", {n} pass the request's selectors"
        for s, n in later
    )
    short_later = "".join(
        f", {n} of class {cls}" if s == 1 else f", {n} pass the selectors" for s, n in later
    )
    if stage == 0:
        detail = f"{have} device(s) in the node's pools{long_later}"
        short = f"{_devices(have)} on the node{short_later}{needed}"
    elif stage == 1:
        detail = f"class {cls} admits {have} of the node's {prev} device(s)"
        gated = sum(1 for e in stopped if e.binding)
        if gated and not search.features.binding_conditions:
            # Upstream skips devices with binding conditions while the feature is off.
            detail += f" ({gated} need binding conditions, a feature that is off)"
        detail += long_later
        short = f"{_devices(have)} of class {cls}{short_later}{needed}"
    elif stage == 2:
        detail = f"the request's selectors admit {have} of {prev} device(s) of class {cls}"
        short = f"{have} of the {_devices(prev)} of class {cls} pass the selectors{needed}"
    else:
        detail = (
            f"{len(stopped)} of {prev} matching device(s) have a taint the request does not "
            f"tolerate: {_tainted(stopped, rd)}; {have} left"
        )
        short = f"{have} of {prev} matching devices untainted{needed}"
    blocker = _blocker(search, rd, STAGES[stage], have, detail + needed, short)
    return replace(blocker, fix=_other_class(search, rd)) if stage == 1 else blocker


def _tainted(stopped: list[DeviceEntry], rd: ReqData, names: int = 4) -> str:
    """Which devices carry which taint (a driver's health taints say what broke: a device
    fallen off the bus, an Xid with its code): `gpu-0, gpu-3 (gpu.nvidia.com/gpu-lost:
    NoExecute)`, the first few names of each taint."""
    by_taint: dict[str, list[str]] = {}
    for entry in stopped:
        for t in entry.taints:
            if t.effect not in ("NoSchedule", "NoExecute"):
                continue
            if not any(tolerates(tol, t.key, t.value or "", t.effect) for tol in rd.tolerations):
                taint = f"{t.key}{f'={t.value}' if t.value else ''}:{t.effect}"
                by_taint.setdefault(taint, []).append(entry.device.name)
    parts = []
    for taint, devices in sorted(by_taint.items()):
        shown = ", ".join(sorted(devices)[:names])
        more = f", +{len(devices) - names}" if len(devices) > names else ""
        parts.append(f"{shown}{more} ({taint})")
    return "; ".join(parts)


def _other_class(search: Search, rd: ReqData) -> str:
    """A class that, with the request's own selectors, admits enough devices of the node:
    the one admitting the most (one CEL pass per class, only for a class blocker)."""
    best, admitted = "", 0
    for name in sorted(search.classes):
        if name == rd.klass.name:
            continue
        other = search.with_class(rd, search.classes[name])
        n = sum(1 for e, on in search.devices if on and reached(search, other, e) > 2)
        if n >= rd.count and n > admitted:
            best, admitted = name, n
    return f"class {best} would admit {admitted}" if best else ""


def _fit(
    search: Search,
    rd: ReqData,
    have: int,
    prev: int,
    stopped: list[DeviceEntry],
    holders: Holders,
) -> Blocker:
    """Free devices that still do not fit: a counter set used up, or capacity."""
    tail = f"{have} of {prev} free device(s) fit, {rd.count} needed"
    for entry in stopped:
        short = short_counter(search, entry) if entry.consumes else None
        if short is None:
            continue
        set_name, counter = short[0], short[1]
        left, amount = (str(Quantity.from_nanos(n, Format.BINARY_SI)) for n in short[2:])
        users = _counter_users(search, entry, set_name)
        detail = (
            f"counter set {set_name} of pool {entry.ref.pool}: {counter} has {left} left, "
            f"{entry.ref.device} needs {amount}, used by allocated {', '.join(users) or 'devices'}"
            f"; {tail}"
        )
        return _blocker(
            search, rd, "counters", have, detail, f"counter set {set_name} exhausted",
            _held(_entries(search, users, entry), holders),
        )  # fmt: skip
    return _capacity(search, rd, have, stopped, holders, tail)


def _counter_users(search: Search, entry: DeviceEntry, set_name: str) -> list[str]:
    pool = search.pool_by_key[(entry.ref.driver, entry.ref.pool)]
    return [
        e.ref.device
        for e in [*(d for d, _ in pool.devices), *pool.other_devices]
        if search.state.is_allocated(e.ref) and any(s == set_name for s, _ in e.consumes)
    ]


def _entries(search: Search, names: list[str], like: DeviceEntry) -> list[DeviceEntry]:
    wanted = {like.ref._replace(device=name) for name in names}
    return [e for e, _ in search.devices if e.ref in wanted]


def _capacity(
    search: Search,
    rd: ReqData,
    have: int,
    stopped: list[DeviceEntry],
    holders: Holders,
    tail: str,
) -> Blocker:
    """Consumable capacity: the most any device has left of an asked capacity."""
    for name, asked in (rd.capacity or {}).items():
        left = [
            (e.capacity[name].value.nanos - search.state.consumed(e.ref).get(name, 0), e)
            for e in stopped
            if name in e.capacity
        ]
        if not left:
            continue
        best, entry = max(left, key=lambda x: x[0])
        if best >= asked.nanos:
            continue
        remaining = Quantity.from_nanos(best, entry.capacity[name].value.fmt)
        detail = (
            f"capacity {name}: at most {remaining} left on one device ({entry.ref.device}), "
            f"{asked} asked; {tail}"
        )
        short = f"capacity {name}: {remaining} left, {asked} asked"
        return _blocker(search, rd, "capacity", have, detail, short, _held([entry], holders))
    detail = f"the free devices' capacity does not admit the request; {tail}"
    short = f"{have} of {len(stopped) + have} free devices fit, {rd.count} needed"
    return _blocker(search, rd, "capacity", have, detail, short)


def _all_mode(search: Search, rd: ReqData, holders: Holders) -> Blocker | None:
    """`allocationMode: All` needs every matching device, so one busy device blocks it."""
    if not rd.all_devices:
        return Blocker(
            "allocationMode All", claim_name(search.claims[rd.claim_index]), rd.full, 0, 1,
            "allocationMode All: no device matches the class and selectors", "no device matches",
        )  # fmt: skip
    busy = [e for e in rd.all_devices if reached(search, rd, e) < _FIT]
    if not busy:
        return None
    n = len(rd.all_devices)
    why = {3: "tainted", 4: "in use"}.get(reached(search, rd, busy[0]), "counters or capacity used")
    detail = (
        f"allocationMode All: {len(busy)} of the {n} matching device(s) unavailable "
        f"({busy[0].ref.device}: {why})"
    )
    short = f"allocationMode All with {len(busy)} of {n} devices busy"
    return _blocker(search, rd, "allocationMode All", n - len(busy), detail, short,
                    _held(busy, holders))  # fmt: skip


def _held(entries: Iterable[DeviceEntry], holders: Holders) -> tuple[tuple[str, int], ...]:
    counts = Counter(c for e in entries for c in holders.get(e.ref, ()))
    return tuple(sorted(counts.items(), key=lambda x: (-x[1], x[0])))


def _merged(groups: Iterable[tuple[tuple[str, int], ...]]) -> tuple[tuple[str, int], ...]:
    counts: Counter[str] = Counter()
    for group in groups:
        for claim, n in group:
            counts[claim] = max(counts[claim], n)
    return tuple(sorted(counts.items(), key=lambda x: (-x[1], x[0])))


# --- constraints --------------------------------------------------------------------------


def _values(search: Search, entry: DeviceEntry, attribute: str) -> list[tuple[str, object]]:
    """The values a constraint compares for a device (list elements, with list attributes)."""
    value = entry.attribute(attribute)
    if value is False or value is None or value is True:
        return []
    kind, values, is_list = value
    if is_list and not search.features.list_type_attributes:
        return []
    return [(kind, v) for v in values]


def _constraint(search: Search, c: _Constraint, rds: list[ReqData]) -> Blocker | None:
    if not rds:
        return None
    need = sum(rd.count for rd in rds)
    per_request = [
        (rd, Counter(v for e in _candidates(search, rd) for v in _values(search, e, c.attribute)))
        for rd in rds
    ]
    claim = claim_name(search.claims[rds[0].claim_index])
    names = ",".join(rd.full for rd in rds)
    if c.kind == "distinctAttribute":
        distinct = len(set().union(*(counts for _, counts in per_request)))
        if distinct >= need:
            return None
        detail = (
            f"distinctAttribute {c.attribute}: {distinct} distinct value(s) among the "
            f"candidates, {need} devices need one each"
        )
        short = f"{distinct} distinct {c.attribute} values, {need} needed"
        return Blocker(c.kind, claim, names, distinct, need, detail, short)
    values: set[tuple[str, object]] = set().union(*(counts for _, counts in per_request))
    if not values:
        detail = f"matchAttribute {c.attribute}: no candidate device has the attribute"
        return Blocker(c.kind, claim, names, 0, need, detail, f"no device has {c.attribute}")

    def shared(value: tuple[str, object]) -> int:
        return sum(min(rd.count, counts[value]) for rd, counts in per_request)

    best = max(sorted(values, key=str), key=shared)
    have = shared(best)
    if have >= need:
        return None
    parts = [f"{rd.full} {min(rd.count, n[best])} of {rd.count}" for rd, n in per_request]
    split = f": {', '.join(parts)}" if len(parts) > 1 else ""
    detail = (
        f"matchAttribute {c.attribute}: at most {have} of the {need} devices share one value "
        f"({best[1]}{split}), {need} needed"
    )
    return Blocker(c.kind, claim, names, have, need, detail,
                   f"at most {_devices(have)} {'shares' if have == 1 else 'share'} one "
                   f"{c.attribute}, {need} needed")  # fmt: skip


# --- combinations -------------------------------------------------------------------------


def _trial(search: Search, claims: Sequence[ResourceClaim], state: AllocatedState) -> Search:
    """A bounded search for `claims` on the node of `search`, given `state`."""
    return Search(
        claims, search.node, search.inventory, search.classes, state,
        features=search.features, order=None, strict_cel=search.strict,
        timeout_s=search.timeout_s, max_steps=TOGETHER_STEPS,
    )  # fmt: skip


def _run(trial: Search) -> bool | None:
    """Does the trial find an allocation (None: it could not tell, or failed)?"""
    try:
        trial.prepare()
        return trial.run()
    except AllocationError:
        return None


def _fits(
    search: Search, claims: Sequence[ResourceClaim], state: AllocatedState | None = None
) -> bool | None:
    """Do `claims` fit together on the node (None: the bounded search could not tell)?"""
    return _run(_trial(search, claims, state or search.state))


def _together(search: Search) -> Blocker | None:
    """Every claim looks satisfiable alone: find the first claim that does not fit beside
    the ones before it (claim A's choice leaves nothing for claim B), or the claim whose
    requests and constraints cannot all hold at once."""
    claims = search.claims
    for i in range(1, len(claims) + 1):
        together = _fits(search, claims[:i])
        if together:
            continue
        name = claim_name(claims[i - 1])
        if together is None:
            detail = f"the search budget ({TOGETHER_STEPS} steps) ran out checking claims 1..{i}"
            return Blocker("search budget", name, "", 0, 1, detail, "search budget exhausted")
        if i > 1 and _fits(search, claims[i - 1 : i]):
            before = ", ".join(claim_name(c) for c in claims[: i - 1])
            detail = f"fits alone, but not beside {before}: their devices leave too few"
            short = f"fits alone, not beside {before}"
            return Blocker("claims together", name, "", 0, 1, detail, short)
        return _requests_together(search, i - 1)
    return None


def _requests_together(search: Search, ci: int) -> Blocker:
    rds = [subs[0] for subs in search.reqs[ci]]
    need = sum(rd.count for rd in rds)
    union = {e.index for rd in rds for e in _candidates(search, rd)}
    detail = (
        f"each request and constraint holds alone, not all at once: {need} device(s) "
        f"needed from {len(union)} candidate(s)"
    )
    name = claim_name(search.claims[ci])
    return Blocker("requests together", name, "", 0, need, detail, "requests compete for devices")
