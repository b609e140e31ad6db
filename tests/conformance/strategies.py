"""Hypothesis strategies for random allocator scenarios covering every v1 feature.

Small on purpose (a few drivers, pools, slices and devices), so that searches stay short
and collisions (equal names, equal values, full counters) are frequent: several drivers
with equal pool names, pools of several slices and generations, incomplete pools, every
node selection mode, shared counters with partitionable devices, consumable capacity with
request policies (fractional ranges too), matchAttribute/distinctAttribute, firstAvailable,
allocationMode All, admin access, taints, tolerations and DeviceTaintRules, binding
conditions, already-allocated claims (shares included) and CEL selectors from the grammar
in `cel_grammar`. Each scenario carries tags naming the features it exercises.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

from kubedra.allocator import Features
from tests.conformance import cel_grammar
from tests.conformance.scenario import Scenario, Wire

DRIVERS = ("gpu.example.com", "nic.example.com", "fpga.example.com")
POOLS = ("pool-a", "pool-b")
NODE, OTHER_NODE = "node-a", "node-b"
V1 = "resource.k8s.io/v1"
T = TypeVar("T")

# attribute name -> (wire type, values); "numa" sometimes arrives as a string so that
# constraints meet values of different types.
ATTRIBUTES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "model": ("string", ("a100", "h100", "l4")),
    "index": ("int", (0, 1, 2, 3)),
    "numa": ("int", (0, 1)),
    "healthy": ("bool", (True, False)),
    "driverVersion": ("version", ("1.2.3", "1.10.0", "2.0.0-rc.1", "2.0.0")),
    "topo.example.com/pcieRoot": ("string", ("r0", "r1")),
}
LIST_ATTRIBUTES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "ports": ("ints", (0, 1, 2)),
    "zones": ("strings", ("z1", "z2", "z3")),
}
CAPACITY = {"memory": ("16Gi", "40Gi", "80Gi"), "cores": ("2", "4", "8", "1500m")}
REQUESTS = ("1", "2", "4", "500m", "1500m", "8Gi", "16Gi", "20Gi", "40Gi", "100Gi")
TAINT_KEYS = ("maint", "degraded")
EFFECTS = ("NoSchedule", "NoExecute", "None")


# Each scenario turns on a few of these knobs: the rest of the scenario stays plain, so
# most scenarios can be satisfied and a mismatch shrinks to the features involved.
KNOBS = ("taints", "binding", "counters", "sharing", "constraints", "first-available",
         "all", "admin", "cel", "taint-rules", "allocated", "broken", "placement", "config")  # fmt: skip


class Knobs(frozenset[str]):
    """The knobs a scenario turns on."""


def _name(prefix: str, n: int) -> str:
    return f"{prefix}-{n}"


# Strategy objects are built once and reused: building one per draw (a composite per
# device, a fresh st.integers per coin toss) made generation several times slower.
@functools.cache
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


@functools.cache
def _index_lists(
    n: int, min_size: int, max_size: int | None, unique: bool
) -> st.SearchStrategy[list[int]]:
    return st.lists(_ints(0, n - 1), min_size=min_size, max_size=max_size, unique=unique)


def _int(draw: st.DrawFn, lo: int, hi: int) -> int:
    return draw(_ints(lo, hi))


def _pick(draw: st.DrawFn, options: Sequence[T]) -> T:
    """One of `options` (shrinking towards the first)."""
    return options[draw(_ints(0, len(options) - 1))]


def _subset(
    draw: st.DrawFn,
    options: Sequence[T],
    min_size: int = 0,
    max_size: int | None = None,
    unique: bool = False,
) -> list[T]:
    indices = draw(_index_lists(len(options), min_size, max_size, unique))
    return [options[i] for i in indices]


def _sometimes(draw: st.DrawFn, one_in: int) -> bool:
    return _int(draw, 0, one_in - 1) == 0


def features(draw: st.DrawFn) -> Features:
    """1.37's defaults most of the time, otherwise each switch at random."""
    if _int(draw, 0, 5):
        return Features(list_type_attributes=_pick(draw, (False, True)))
    return Features(**{f: _pick(draw, (False, True)) for f in Features.__dataclass_fields__})


def attribute(draw: st.DrawFn, name: str, kind: str, values: tuple[Any, ...]) -> Wire:
    if name == "numa" and _int(draw, 0, 5) == 0:
        return {"string": str(_pick(draw, values))}
    if kind.endswith("s"):
        return {kind: _subset(draw, values, min_size=1, max_size=3, unique=True)}
    return {kind: _pick(draw, values)}


def request_policy(draw: st.DrawFn, value: str) -> Wire | None:
    kind = _pick(draw, ["none", "default", "values", "range", "fraction"])
    if kind == "none":
        return None
    policy: Wire = {}
    if kind == "default" or _pick(draw, (False, True)):
        policy["default"] = _pick(draw, ["1", "2", "4Gi", "8Gi", "1000m"])
    if kind == "values":
        policy["validValues"] = sorted(
            _subset(draw, ["1", "2", "4", "8Gi", "16Gi"], min_size=1,
                          max_size=3, unique=True),
            key=_magnitude,
        )  # fmt: skip
    elif kind == "range":
        rng: Wire = {"min": _pick(draw, ["1", "2", "1Gi", "4Gi"])}
        if _pick(draw, (False, True)):
            rng["max"] = _pick(draw, ["8", "32Gi", "64Gi"])
        if _pick(draw, (False, True)):
            rng["step"] = _pick(draw, ["1", "2", "1Gi", "4Gi"])
        policy["validRange"] = rng
    elif kind == "fraction":
        policy["validRange"] = {
            "min": _pick(draw, ["500m", "250m", "1"]),
            "step": _pick(draw, ["250m", "500m", "100m"]),
        }
    return policy


def _magnitude(text: str) -> float:
    from kubedra.api.quantity import Quantity

    return Quantity.parse(text).nanos / 1e9


def device(draw: st.DrawFn, n: int, driver: str, f: Features, k: Knobs, per: bool) -> Wire:
    d: Wire = {"name": _name("dev", n)}
    names = list(ATTRIBUTES) + (list(LIST_ATTRIBUTES) if f.list_type_attributes else [])
    # Most devices describe themselves alike (constraints then have something to match).
    common = [n for n in ("model", "numa", "index") if not _sometimes(draw, 4)]
    extra = _subset(draw, names, max_size=2, unique=True)
    attrs: Wire = {}
    for name in dict.fromkeys(common + extra):
        kind, values = {**ATTRIBUTES, **LIST_ATTRIBUTES}[name]
        key = f"{driver}/{name}" if "/" not in name and _sometimes(draw, 5) else name
        attrs[key] = attribute(draw, name, kind, values)
    if attrs:
        d["attributes"] = attrs
    multi = "sharing" in k and _sometimes(draw, 2)
    capacity: Wire = {}
    names = ["memory"] if multi else []
    names += _subset(draw, list(CAPACITY), max_size=2, unique=True)
    for name in dict.fromkeys(names):
        value = _pick(draw, CAPACITY[name])
        cap: Wire = {"value": value}
        if multi and (policy := request_policy(draw, value)) is not None:
            cap["requestPolicy"] = policy
        capacity[name] = cap
    if capacity:
        d["capacity"] = capacity
    if multi:
        d["allowMultipleAllocations"] = True
    if "taints" in k and _sometimes(draw, 3):
        d["taints"] = [taint(draw)]
    if "binding" in k and _sometimes(draw, 2):
        d["bindingConditions"] = ["ready"]
        d["bindingFailureConditions"] = ["failed"]
        if _pick(draw, (False, True)):
            d["bindsToNode"] = True
    if per:
        d.update(node_selection(draw, k, device_level=True))
    return d


def taint(draw: st.DrawFn) -> Wire:
    t: Wire = {"key": _pick(draw, TAINT_KEYS), "effect": _pick(draw, EFFECTS)}
    if _pick(draw, (False, True)):
        t["value"] = _pick(draw, ["x", "y"])
    return t


def node_selection(draw: st.DrawFn, k: Knobs, device_level: bool = False) -> Wire:
    if "placement" not in k:
        return {"allNodes": True} if _sometimes(draw, 5) else {"nodeName": NODE}
    modes = ["node", "other", "all", "selector", "fields"] + ([] if device_level else ["per"])
    mode = _pick(draw, modes)
    if mode == "node":
        return {"nodeName": NODE}
    if mode == "other":
        return {"nodeName": OTHER_NODE}
    if mode == "all":
        return {"allNodes": True}
    if mode == "per":
        return {"perDeviceNodeSelection": True}
    if mode == "fields":
        # Two values are invalid for a field selector: upstream then fails.
        values = [NODE, OTHER_NODE] if "broken" in k and _sometimes(draw, 4) else [
            _pick(draw, [NODE, OTHER_NODE])]  # fmt: skip
        op = _pick(draw, ["In", "In", "NotIn"])
        term: Wire = {"matchFields": [{"key": "metadata.name", "operator": op, "values": values}]}
    else:
        op = _pick(draw, ["In", "NotIn", "Exists", "DoesNotExist"])
        req: Wire = {"key": _pick(draw, ["zone", "rack"]), "operator": op}
        if op in ("In", "NotIn"):
            req["values"] = [_pick(draw, ["z1", "z2"])]
        term = {"matchExpressions": [req]}
    return {"nodeSelector": {"nodeSelectorTerms": [term]}}


def pool(
    draw: st.DrawFn, driver: str, name: str, f: Features, k: Knobs, tags: set[str]
) -> list[Wire]:
    """The slices of one pool: usually complete, sometimes missing a slice, sometimes with
    a stale older generation, sometimes with a counter-set slice."""
    generation = _int(draw, 1, 2)
    count = _int(draw, 1, 3)
    counters = "counters" in k and f.partitionable_devices and _sometimes(draw, 2)
    slices: list[Wire] = []
    device_n = 0
    shared: list[Wire] = []
    if counters:
        tags.add("counters")
        shared = [{"name": "cs-0", "counters": {
            "mem": {"value": _pick(draw, ["40Gi", "80Gi"])},
            "slots": {"value": _pick(draw, ["1", "2", "4"])},
        }}]  # fmt: skip
    for index in range(count):
        spec: Wire = {
            "driver": driver,
            "pool": {"name": name, "generation": generation, "resourceSliceCount": count},
        }
        if counters and index == 0:
            spec["sharedCounters"] = shared
            selection = node_selection(draw, k)
            spec.update(selection if "perDeviceNodeSelection" not in selection else
                        {"allNodes": True})  # fmt: skip
        else:
            selection = node_selection(draw, k)
            spec.update(selection)
            per = "perDeviceNodeSelection" in selection
            tags.add("per-device-node" if per else next(iter(selection)))
            devices = []
            for _ in range(_int(draw, 0 if count > 1 else 1, 4)):
                dev = device(draw, device_n, driver, f, k, per)
                device_n += 1
                if counters and _int(draw, 0, 2):
                    dev["consumesCounters"] = [{"counterSet": "cs-0", "counters": {
                        k: {"value": _pick(draw, v)}
                        for k, v in (("mem", ["10Gi", "20Gi", "40Gi"]), ("slots", ["1", "2"]))
                        if _pick(draw, (False, True))
                    } or {"slots": {"value": "1"}}}]  # fmt: skip
                    if "broken" in k and _sometimes(draw, 4):
                        tags.add("compatibility-groups")  # alpha, off: slice ignored
                        dev["consumesCounters"][0]["compatibilityGroups"] = ["g1"]
                devices.append(dev)
            if devices:
                spec["devices"] = devices
        slices.append(spec)
    if "broken" in k and len(slices) > 1 and _sometimes(draw, 3):
        tags.add("incomplete-pool")
        slices.pop(_int(draw, 0, len(slices) - 1))
    if generation > 1 and _sometimes(draw, 3):
        tags.add("stale-generation")
        old = _pick(draw, slices)
        slices.append({**old, "pool": {**old["pool"], "generation": generation - 1}})
    if "broken" in k and _sometimes(draw, 4) and any("devices" in s for s in slices):
        tags.add("duplicate-device")  # an invalid pool
        first = next(s for s in slices if "devices" in s)
        first["devices"].append(first["devices"][0])
    for s in slices:
        if any(d.get("allowMultipleAllocations") for d in s.get("devices", ())):
            tags.add("consumable-capacity")
        if any("taints" in d for d in s.get("devices", ())):
            tags.add("taints")
        if any("bindingConditions" in d for d in s.get("devices", ())):
            tags.add("binding-conditions")
    return slices


def device_class(draw: st.DrawFn, n: int, drivers: list[str], k: Knobs, tags: set[str]) -> Wire:
    selectors = []
    # Mostly a driver the scenario has (else no device would ever match).
    driver = _pick(draw, (*drivers, None) if not _sometimes(draw, 8) else DRIVERS)
    if driver is not None:
        selectors.append(f"device.driver == '{driver}'")
    if "cel" in k and _sometimes(draw, 2):
        tags.add("cel-class")
        selectors.append(draw(cel_grammar.selectors(driver or DRIVERS[0], safe=True)))
    spec: Wire = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if "config" in k and _sometimes(draw, 2):
        spec["config"] = [{"opaque": {"driver": driver or DRIVERS[0], "parameters": {"c": n}}}]
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": _name("class", n)},
            "spec": spec}  # fmt: skip


def exact(
    draw: st.DrawFn, classes: int, f: Features, k: Knobs, tags: set[str], admin: bool
) -> Wire:
    e: Wire = {"deviceClassName": _name("class", _int(draw, 0, classes - 1))}
    # Objects as the API server stores them: allocationMode and count defaulted.
    if "all" in k and _sometimes(draw, 2):
        tags.add("allocation-mode-all")
        e["allocationMode"] = "All"
    else:
        e["allocationMode"] = "ExactCount"
        e["count"] = _pick(draw, [1, 1, 1, 2, 3])
    if "cel" in k and _sometimes(draw, 2):
        tags.add("cel-request")
        driver = _pick(draw, DRIVERS)
        e["selectors"] = [{"cel": {"expression": draw(cel_grammar.selectors(driver, safe=True))}}]
    if admin and "admin" in k and _sometimes(draw, 2):
        tags.add("admin-access")
        e["adminAccess"] = True
    if ("taints" in k or "taint-rules" in k) and not _sometimes(draw, 3):
        tags.add("tolerations")
        tol: Wire = {"operator": _pick(draw, ["Exists", "Equal"])}
        if _pick(draw, (False, True)):
            tol["key"] = _pick(draw, TAINT_KEYS)
        if tol["operator"] == "Equal":
            tol["value"] = _pick(draw, ["x", "y"])
        if _pick(draw, (False, True)):
            tol["effect"] = _pick(draw, ["NoSchedule", "NoExecute"])
        e["tolerations"] = [tol]
    if "broken" in k and _sometimes(draw, 8):
        tags.add("derived-attributes")  # alpha, off: the request is refused
        e["derivedAttributes"] = [{"name": f"{DRIVERS[0]}/derived", "expression": "1"}]
    if "sharing" in k and f.consumable_capacity and _sometimes(draw, 2):
        tags.add("capacity-request")
        names = _subset(draw, list(CAPACITY), min_size=1, max_size=2,
                              unique=True)  # fmt: skip
        e["capacity"] = {"requests": {n: _pick(draw, REQUESTS) for n in names}}
    return e


def claim(
    draw: st.DrawFn,
    n: int,
    classes: int,
    drivers: list[str],
    f: Features,
    k: Knobs,
    tags: set[str],
) -> Wire:
    requests = []
    for r in range(_pick(draw, [1, 1, 2, 3])):
        name = _name("req", r)
        if "first-available" in k and f.prioritized_list and _sometimes(draw, 2):
            tags.add("first-available")
            subs = []
            for s in range(_int(draw, 1, 3)):
                sub = exact(draw, classes, f, k, tags, admin=False)
                subs.append({"name": _name("sub", s), **sub})
            requests.append({"name": name, "firstAvailable": subs})
        else:
            requests.append({"name": name, "exactly": exact(draw, classes, f, k, tags, True)})
    devices: Wire = {"requests": requests}
    constraints = []
    for _ in range(_int(draw, 1, 2) if "constraints" in k else 0):
        kind = _pick(draw, ["matchAttribute", "distinctAttribute"])
        tags.add(kind)
        names = [*ATTRIBUTES, *LIST_ATTRIBUTES] if f.list_type_attributes else [*ATTRIBUTES]
        attr = _pick(draw, names)
        qualified = attr if "/" in attr else f"{_pick(draw, drivers)}/{attr}"
        c: Wire = {kind: qualified}
        if len(requests) > 1 and _pick(draw, (False, True)):
            c["requests"] = _subset(draw, [r["name"] for r in requests],
                                          min_size=1, unique=True)  # fmt: skip
        constraints.append(c)
    if constraints:
        devices["constraints"] = constraints
    if "config" in k and _sometimes(draw, 2):
        tags.add("claim-config")
        names = [r["name"] for r in requests]
        targets = _subset(draw, names, max_size=len(names), unique=True)
        devices["config"] = [{"requests": targets, "opaque": {"driver": DRIVERS[0],
                                                              "parameters": {"claim": n}}}]
        if not targets:
            del devices["config"][0]["requests"]
    return {"apiVersion": V1, "kind": "ResourceClaim",
            "metadata": {"name": _name("claim", n), "namespace": "default",
                         "uid": f"00000000-0000-0000-0000-{n:012d}"},
            "spec": {"devices": devices}}  # fmt: skip


def allocated(draw: st.DrawFn, slices: list[Wire], f: Features, tags: set[str]) -> list[Wire]:
    """Claims that already hold some of the slices' devices (shares on multi devices)."""
    candidates = [(s, d) for s in slices for d in s.get("devices", ())]
    if not candidates:
        return []
    tags.add("allocated-state")
    results = []
    for i, (s, d) in enumerate(_subset(draw, candidates, max_size=4)):
        r: Wire = {"request": "req-0", "driver": s["driver"], "pool": s["pool"]["name"],
                   "device": d["name"]}  # fmt: skip
        if d.get("allowMultipleAllocations") and _int(draw, 0, 3):
            r["shareID"] = f"10000000-0000-0000-0000-{i:012d}"
            consumed = {n: _pick(draw, REQUESTS[:6]) for n in d.get("capacity", {})}
            if consumed:
                r["consumedCapacity"] = consumed
        elif _int(draw, 0, 6) == 0:
            r["adminAccess"] = True
        results.append(r)
    if not results:
        return []
    return [{"apiVersion": V1, "kind": "ResourceClaim",
             "metadata": {"name": "held", "namespace": "other", "uid": "held-uid"},
             "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {
                 "deviceClassName": "class-0"}}]}},
             "status": {"allocation": {"devices": {"results": results}}}}]  # fmt: skip


def taint_rules(draw: st.DrawFn, tags: set[str]) -> list[Wire]:
    tags.add("device-taint-rules")
    selector: Wire = {}
    if _pick(draw, (False, True)):
        selector["driver"] = _pick(draw, DRIVERS)
    if _pick(draw, (False, True)):
        selector["pool"] = _pick(draw, POOLS)
    if _pick(draw, (False, True)):
        selector["device"] = _name("dev", _int(draw, 0, 3))
    return [{"apiVersion": V1, "kind": "DeviceTaintRule", "metadata": {"name": "rule-0"},
             "spec": {"deviceSelector": selector, "taint": taint(draw)}}]  # fmt: skip


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    tags: set[str] = set()
    k = Knobs(_subset(draw, KNOBS, max_size=4, unique=True))
    f = features(draw)
    if f != Features(list_type_attributes=f.list_type_attributes):
        tags.add("feature-switches")
    if f.list_type_attributes:
        tags.add("list-attributes")
    drivers = _subset(draw, DRIVERS, min_size=1, max_size=3, unique=True)
    slices: list[Wire] = []
    for driver in drivers:
        for pool_name in _subset(draw, POOLS, min_size=1, unique=True):
            slices.extend(pool(draw, driver, pool_name, f, k, tags))
    if len(drivers) > 1:
        tags.add("several-drivers")
    # Names decide the search order within a pool; draw them so that order is not the
    # order of creation.
    names = draw(st.permutations([_name("slice", i) for i in range(len(slices))]))
    slice_objects = [
        {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}
        for name, spec in zip(names, slices, strict=True)
    ]
    n_classes = _int(draw, 1, 3)
    classes = [device_class(draw, i, drivers, k, tags) for i in range(n_classes)]
    n_claims = _pick(draw, [1, 1, 2, 3])
    claims = [claim(draw, i, n_classes, drivers, f, k, tags) for i in range(n_claims)]
    if len(claims) > 1:
        tags.add("several-claims")
    return Scenario(
        features=f,
        node=NODE,
        node_labels=_pick(draw, [{}, {"zone": "z1"}, {"zone": "z2", "rack": "r1"}]),
        classes=tuple(classes),
        slices=tuple(slice_objects),
        claims=tuple(claims),
        allocated=tuple(allocated(draw, slices, f, tags)) if "allocated" in k else (),
        taint_rules=tuple(taint_rules(draw, tags)) if "taint-rules" in k else (),
        tags=frozenset(tags | {f"knob:{knob}" for knob in k}),
    )
