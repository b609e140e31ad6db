"""Allocator benchmarks: kubedra's allocator beside upstream's, like for like.

Upstream is k8s.io/dynamic-resource-allocation/structured at the version the Go oracle pins
(tools/oracle, built into kubedra's cache on first use, as the conformance tests build it).
Both sides get the same objects: the catalog's inventories published as the simulated driver
publishes them (`Profile.inventories` split by `slice_specs`), the Helm chart's classes,
the same claims and allocated claims, exported as JSON to the Go side. Each scenario is
timed

- cold: upstream `structured.NewAllocator` over all slices, then `Allocate`; kubedra
  `Inventory.build` over all slices, then `allocate`, truly cold: what kubedra keeps
  across builds (`kubedra.allocator.inventory.clear_slice_cache`: the slices' entries and
  pools, selector results, prepared claims) is forgotten before every call, inside the
  timing, and the AllocatedState is fresh, so nothing of kubedra's survives from one run
  to the next but the compiled CEL programs;
- one slice changed: what kubedra's scheduler pays when a slice changes. Kubedra builds a
  new inventory over all slices, one of them a new object (decoded afresh from the same
  content under another resourceVersion, as a driver's republish arrives): the slice that
  the allocation comes from, a fresh copy every call. Every other slice is the object an
  earlier call saw, so its entries, pool and selector results come from the slice cache;
  the changed slice's devices get new entries, and a selector reaches a CEL evaluation
  only for what no earlier device with the same projection answered (see
  `kubedra.allocator.projection`). Upstream keeps nothing across NewAllocator calls, so
  its figure for this row is its cold one: it runs cold calls in these rounds too, and
  both rows show the median of all its cold rounds;
- warm: upstream `Allocate` on one allocator made beforehand; kubedra `allocate` on one
  inventory built beforehand.

A scan tries the nodes in order until one fits, as the scheduler's Filter calls do for one
pod. Both sides keep their compiled-CEL cache between runs (a scheduler keeps one across
cycles), so neither figure includes compiling selectors. Times are CPU time of the process
doing the work (getrusage, user + system, on both sides) per call: the median of rounds
that alternate Go and Python, who goes first alternating as well. The GC runs as usual on
both sides, after a full collection before each round. Without Go, upstream's column says
why it is missing; kubedra's figures still stand.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.harness import Row, sized
from kubedra.allocator import (
    AllocatedState,
    AllocationTimeout,
    Features,
    Inventory,
    NodeInfo,
    allocate,
)
from kubedra.allocator.inventory import clear_slice_cache
from kubedra.api.codec import decode_object, to_dict
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from kubedra.catalog import profile
from kubedra.driver.publisher import slice_name, slice_specs

Wire = dict[str, Any]
GPU = "gpu.nvidia.com"
ROOT = "resource.kubernetes.io/pcieRoot"
# The Helm chart's classes (deploy/helm/kubedra/values.yaml).
CLASSES = {
    "gpu.nvidia.com": f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "gpu"',
    "mig.nvidia.com": f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "mig"',
    "rdma.dra.net": 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true',
}
FEATURES = Features()
TARGET_RATIO = 1.0  # kubedra's cold figure at most upstream's
# Measured per scenario; the first two have the target (see the module docstring).
MODES = ("cold", "changed", "warm")
LABELS = {"cold": "cold", "changed": "one slice changed", "warm": "warm"}


# --- inputs -------------------------------------------------------------------------------


def cluster(profile_name: str, count: int) -> tuple[list[ResourceSlice], list[NodeInfo]]:
    """`count` nodes of a catalog profile, with the slices their drivers publish."""
    prof = profile(profile_name)
    slices: list[ResourceSlice] = []
    nodes: list[NodeInfo] = []
    width = max(3, len(str(count - 1)))
    for n in range(count):
        name = f"node-{n:0{width}d}"
        nodes.append(NodeInfo(name, prof.labels(name)))
        for inventory in prof.inventories(name):
            for i, spec in enumerate(slice_specs(inventory, name, generation=1)):
                meta = ObjectMeta(name=slice_name(name, inventory.driver, i))
                slices.append(
                    ResourceSlice(
                        api_version="resource.k8s.io/v1",
                        kind="ResourceSlice",
                        metadata=meta,
                        spec=spec,
                    )
                )
    return slices, nodes


def class_wire(name: str) -> Wire:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": CLASSES[name]}}]},
    }


def request(name: str, klass: str, *selectors: str, count: int = 1) -> Wire:
    # As the API server stores it: the mode and count defaulted.
    exactly: Wire = {"deviceClassName": klass, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": exactly}


def claim_wire(name: str, requests: list[Wire], constraints: list[Wire] | None = None) -> Wire:
    devices: Wire = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }


def holding(name: str, driver: str, pool: str, devices: Sequence[str]) -> Wire:
    """An allocated claim holding `devices` of one pool."""
    claim = claim_wire(name, [request("gpus", "gpu.nvidia.com", count=len(devices))])
    results = [{"request": "gpus", "driver": driver, "pool": pool, "device": d} for d in devices]
    claim["status"] = {"allocation": {"devices": {"results": results}}}
    return claim


@dataclass
class Scenario:
    name: str
    slices: list[ResourceSlice]
    nodes: list[NodeInfo]  # tried in order until one fits
    classes: list[Wire]
    claims: list[Wire]
    allocated: list[Wire]
    note: str = ""

    def decoded(self) -> tuple[dict[str, DeviceClass], list[ResourceClaim], AllocatedState]:
        classes = {c["metadata"]["name"]: _decode(c) for c in self.classes}
        claims = [_decode(c) for c in self.claims]
        state = AllocatedState.from_claims([_decode(c) for c in self.allocated], FEATURES)
        return classes, claims, state

    def wire(self) -> Wire:
        """The scenario as the oracle's bench mode reads it."""
        from tests.conformance.scenario import UPSTREAM_FEATURES

        switches = {up: getattr(FEATURES, ours) for ours, up in UPSTREAM_FEATURES.items()}
        return {
            "features": switches,
            "nodes": [{"name": n.name, "labels": dict(n.labels)} for n in self.nodes],
            "classes": self.classes,
            "slices": [to_dict(s) for s in self.slices],
            "allocated": self.allocated,
            "claims": self.claims,
        }


def _decode(raw: Wire) -> Any:
    return decode_object(raw).obj


def _one_gpu() -> Wire:
    memory = f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'
    return claim_wire("one-gpu", [request("gpu", "gpu.nvidia.com", memory)])


def scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    h100_slices, h100_nodes = cluster("h100x8", 1)
    gpu_nic = claim_wire(
        "gpu-nic",
        [request("gpu", "gpu.nvidia.com"), request("nic", "rdma.dra.net")],
        [{"requests": ["gpu", "nic"], "matchAttribute": ROOT}],
    )
    eight = claim_wire(
        "eight-gpus",
        [request("gpus", "gpu.nvidia.com", count=8)],
        [{"matchAttribute": f"{GPU}/nvlinkDomain"}],
    )
    both = [class_wire("gpu.nvidia.com"), class_wire("rdma.dra.net")]
    out.append(
        Scenario(
            "h100x8: 1 GPU (CEL memory selector)", h100_slices, h100_nodes, both, [_one_gpu()], []
        )
    )
    out.append(
        Scenario(
            "h100x8: GPU+NIC, matchAttribute pcieRoot", h100_slices, h100_nodes, both, [gpu_nic], []
        )
    )
    out.append(
        Scenario(
            "h100x8: 8 GPUs, matchAttribute nvlinkDomain",
            h100_slices,
            h100_nodes,
            both,
            [eight],
            [],
        )
    )

    mig_slices, mig_nodes = cluster("a100-40x8-mig", 1)
    geometry = profile("a100-40x8-mig").gpu
    assert geometry is not None and geometry.mig is not None
    three_g = next(p.name for p in geometry.mig.profiles if p.name.startswith("3g."))
    mig_claim = claim_wire(
        "mig",
        [request("mig", "mig.nvidia.com", f'device.attributes["{GPU}"].profile == "{three_g}"')],
    )
    devices = sum(len(s.spec.devices) for s in mig_slices if s.spec.driver == GPU)
    out.append(
        Scenario(
            f"a100-40x8-mig ({devices} GPU devices): 1x {three_g}",
            mig_slices,
            mig_nodes,
            [class_wire("mig.nvidia.com")],
            [mig_claim],
            [],
        )
    )

    nodes = 100
    scan_slices, scan_nodes = cluster("h100x8", nodes)
    gpus = [f"gpu-{i}" for i in range(8)]
    full = [holding(f"held-{n.name}", GPU, n.name, gpus) for n in scan_nodes[:-1]]
    out.append(
        Scenario(
            f"{nodes} x h100x8, all full but the last: 1 GPU, scan",
            scan_slices,
            scan_nodes,
            both,
            [_one_gpu()],
            full,
        )
    )

    big = sized(1000, 200)
    big_slices, big_nodes = cluster("h100x8", big)
    out.append(
        Scenario(
            f"{big:,} x h100x8: 1 GPU on the last node",
            big_slices,
            big_nodes[-1:],
            both,
            [_one_gpu()],
            [],
        )
    )
    return out


# --- timing -------------------------------------------------------------------------------


def cpu_ns() -> int:
    """This process's CPU time, user + system (what the Go side reads too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return int((usage.ru_utime + usage.ru_stime) * 1e9)


@dataclass
class Outcome:
    node: str
    devices: list[str]


class Kubedra:
    """kubedra's side of one scenario."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.classes, self.claims, self.state = sc.decoded()
        self.inventory = Inventory.build(sc.slices, features=FEATURES)
        # The slice the allocation comes from: the one "one slice changed" replaces.
        first = self.warm().devices[0].split("/")
        self.changing = next(
            i
            for i, s in enumerate(sc.slices)
            if s.spec.driver == first[0]
            and s.spec.pool.name == first[1]
            and any(d.name == first[2] for d in s.spec.devices)
        )
        self._versions = 0

    def _scan(self, inventory: Inventory, state: AllocatedState) -> Outcome:
        for node in self.sc.nodes:
            out = allocate(self.claims, node, inventory, self.classes, state, features=FEATURES)
            if out.results is not None:
                devices = [
                    f"{r.driver}/{r.pool}/{r.device}"
                    for result in out.results
                    for r in result.devices.results
                ]
                return Outcome(node.name, devices)
        return Outcome("", [])

    def _fresh(self) -> AllocatedState:
        s = self.state
        return AllocatedState(s.devices, s.shares, s.capacity, sharing=s.sharing)

    def _changed(self) -> list[ResourceSlice]:
        """The slices with the changing one decoded afresh, under a new resourceVersion."""
        self._versions += 1
        raw = to_dict(self.sc.slices[self.changing])
        raw["metadata"]["resourceVersion"] = str(self._versions)
        slices = list(self.sc.slices)
        slices[self.changing] = _decode(raw)
        return slices

    def cold(self, state: AllocatedState) -> Outcome:
        clear_slice_cache()  # truly cold: nothing of an earlier build is reused
        return self._scan(Inventory.build(self.sc.slices, features=FEATURES), state)

    def changed(self, state: AllocatedState, slices: list[ResourceSlice]) -> Outcome:
        return self._scan(Inventory.build(slices, features=FEATURES), state)

    def warm(self) -> Outcome:
        return self._scan(self.inventory, self.state)

    def round(self, mode: str, iterations: int) -> tuple[float, Outcome]:
        """CPU ns per call over `iterations` calls, and the last outcome."""
        states = [self._fresh() for _ in range(iterations)] if mode != "warm" else []
        inputs = [self._changed() for _ in range(iterations)] if mode == "changed" else []
        if mode == "changed":
            self.changed(self._fresh(), list(self.sc.slices))  # the other slices cached
        gc.collect()
        outcome = Outcome("", [])
        start = cpu_ns()
        if mode == "cold":
            for state in states:
                outcome = self.cold(state)
        elif mode == "changed":
            for state, slices in zip(states, inputs, strict=True):
                outcome = self.changed(state, slices)
        else:
            for _ in range(iterations):
                outcome = self.warm()
        return (cpu_ns() - start) / iterations, outcome


class Upstream:
    """upstream's side of one scenario: the oracle's bench mode."""

    def __init__(self, oracle: Any, key: str, sc: Scenario) -> None:
        self.oracle, self.key = oracle, key
        oracle.ask("bench", {"key": key, "scenario": sc.wire()})

    def round(self, mode: str, iterations: int) -> tuple[float, Outcome]:
        # Upstream keeps nothing across NewAllocator calls: a changed slice costs a cold call.
        mode = "cold" if mode == "changed" else mode
        answer = self.oracle.ask("bench", {"key": self.key, "mode": mode, "iterations": iterations})
        return answer["cpuNs"] / answer["iterations"], Outcome(
            answer.get("node", ""), list(answer.get("devices") or [])
        )

    def close(self) -> None:
        self.oracle.ask("bench", {"key": self.key, "drop": True})


Side = Callable[[str, int], tuple[float, Outcome]]


def _iterations(side: Side, mode: str, budget_ns: float) -> int:
    """Calls per round so that a round takes about `budget_ns` of CPU."""
    probe, _ = side(mode, 1)
    probe, _ = side(mode, 1)
    return max(1, min(20_000, round(budget_ns / max(probe, 1.0))))


@dataclass
class Figures:
    kubedra: dict[str, float]
    upstream: dict[str, float] | None
    agree: bool


def measure(sc: Scenario, oracle: Any | None, key: str) -> Figures:
    ours = Kubedra(sc)
    theirs = Upstream(oracle, key, sc) if oracle is not None else None
    rounds = sized(9, 1)
    budget = sized(40e6, 2e6)
    ours_ns: dict[str, list[float]] = {m: [] for m in MODES}
    theirs_ns: dict[str, list[float]] = {m: [] for m in MODES}
    agree = True
    try:
        for mode in MODES:
            n_ours = _iterations(ours.round, mode, budget)
            n_theirs = _iterations(theirs.round, mode, budget) if theirs is not None else 0
            for r in range(rounds):
                sides: list[tuple[Side, int, list[float]]] = [(ours.round, n_ours, ours_ns[mode])]
                if theirs is not None:
                    sides.append((theirs.round, n_theirs, theirs_ns[mode]))
                if r % 2:
                    sides.reverse()
                outcomes = []
                for side, n, figures in sides:
                    ns, outcome = side(mode, n)
                    figures.append(ns)
                    outcomes.append(outcome)
                if len(outcomes) == 2 and outcomes[0] != outcomes[1]:
                    agree = False
    finally:
        if theirs is not None:
            theirs.close()
    # Upstream ran cold calls in both the cold and the changed rounds: one figure, from all.
    theirs_ns["cold"] = theirs_ns["changed"] = theirs_ns["cold"] + theirs_ns["changed"]
    return Figures(
        {m: statistics.median(v) / 1e3 for m, v in ours_ns.items()},
        {m: statistics.median(v) / 1e3 for m, v in theirs_ns.items()} if theirs else None,
        agree,
    )


def _oracle() -> tuple[Any | None, str]:
    """A running oracle, or None and why not."""
    try:
        from tests.conformance.oracle import Oracle, build, unavailable
    except ImportError as exc:  # the tests tree is not importable here
        return None, f"tests.conformance.oracle not importable: {exc}"
    why = unavailable()
    if why is not None:
        return None, why
    try:
        return Oracle(build()), ""
    except Exception as exc:
        return None, f"upstream oracle could not be built or started: {exc}"


def rows_for(name: str, fig: Figures, missing: str) -> list[Row]:
    rows = []
    for mode in MODES:
        ours = fig.kubedra[mode]
        label = f"{name}, {LABELS[mode]}"
        if fig.upstream is None:
            missing = missing if len(missing) <= 80 else missing[:77] + "..."
            rows.append(
                Row(
                    "allocator",
                    label,
                    ours,
                    "µs CPU/call",
                    "",
                    None,
                    f"upstream: MISSING ({missing})",
                )
            )
            continue
        up = fig.upstream[mode]
        ratio = ours / up
        vs = "upstream cold" if mode == "changed" else "upstream"
        note = f"{vs} {up:,.1f} µs; kubedra/upstream {ratio:.2f}x"
        if not fig.agree:
            note += "; RESULTS DIFFER"
        targeted = mode != "warm"
        target = f"≤ {TARGET_RATIO:g}x upstream" if targeted else ""
        ok = (ratio <= TARGET_RATIO and fig.agree) if targeted else None
        rows.append(Row("allocator", label, ours, "µs CPU/call", target, ok, note))
    return rows


def worst_case() -> Row:
    """10 + 11 devices out of 20: every combination of the first request is tried before
    the search can fail; bounded by the timeout."""
    wire = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "many"},
        "spec": {
            "driver": GPU,
            "pool": {"name": "node-000", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-000",
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(20)
            ],
        },
    }
    inventory = Inventory.build([_decode(wire)])
    classes = {"gpu.nvidia.com": _decode(class_wire("gpu.nvidia.com"))}
    worst = _decode(
        claim_wire(
            "worst",
            [request("a", "gpu.nvidia.com", count=10), request("b", "gpu.nvidia.com", count=11)],
        )
    )
    start = time.perf_counter()
    note = "finished (unexpected)"
    try:
        allocate([worst], NodeInfo("node-000"), inventory, classes, AllocatedState(), timeout_s=1.0)
    except AllocationTimeout as exc:
        note = f"stopped: {exc}"[:90]
    ms = (time.perf_counter() - start) * 1e3
    return Row(
        "allocator",
        "worst case 10+11 of 20, timeout 1s",
        ms,
        "ms",
        "≈ 1000 ms, clear error",
        note.startswith("stopped") and ms < 1500,
        note,
    )


def run() -> list[Row]:
    oracle, missing = _oracle()
    rows: list[Row] = []
    try:
        for i, sc in enumerate(scenarios()):
            rows += rows_for(sc.name, measure(sc, oracle, f"s{i}"), missing)
    finally:
        if oracle is not None:
            oracle.close()
    rows.append(worst_case())
    load = os.getloadavg()
    rows.append(
        Row(
            "allocator",
            "machine load at the end (uptime)",
            load[0],
            "load avg",
            "",
            None,
            "1/5/15 min: " + ", ".join(f"{x:.2f}" for x in load),
        )
    )
    return rows
