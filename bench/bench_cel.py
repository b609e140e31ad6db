"""CEL selector benchmarks: kubedra's DRA CEL beside upstream's, like for like.

Upstream is k8s.io/dynamic-resource-allocation/cel, the package the kube-scheduler's
allocator evaluates selectors with, at the version tools/celbench pins (built into
kubedra's cache on first use, as the conformance oracle is). Both sides get the same seven
selectors, spelled the same (the portable spelling: upstream has no lenient lookup), and the
same device: GPU 0 of the catalog's h100x8 profile, as the simulated driver publishes it
(sent to the Go side as JSON). Each selector is timed

- per call, as an allocator pays for one (selector, device) pair: upstream's
  `CompilationResult.DeviceMatches`, which builds the device's CEL maps (attributes,
  versions parsed, capacities) and runs the program; kubedra's `DeviceView.of(driver,
  device)` and `CompiledSelector.evaluate` on it;
- program only: the compiled program on a device built once (upstream: the activation
  DeviceMatches would build; kubedra: one `DeviceView.of`, reused).

Compiling is left out of both (the allocator keeps compiled selectors in a cache). Times
are the CPU time of the process doing the work (CLOCK_PROCESS_CPUTIME_ID on both sides, so
Go's garbage collector counts) per call: the median of rounds that alternate Go and Python,
who goes first alternating too, after a full collection before each round. Without Go,
upstream's column says why it is missing; kubedra's figures still stand.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from bench.harness import Row, per_call, quick, sized
from kubedra.api.resource import Device
from kubedra.catalog import profile
from kubedra.cel import DeviceView, compile_selector
from kubedra.cel.selector import compile_selector as cached_compile
from kubedra.devcluster.gotool import GoTool

GPU = "gpu.nvidia.com"
PCI = "resource.kubernetes.io"
# What real DeviceClasses and claims select on (examples/, the Helm chart's classes, the
# catalog's attributes), one language feature each, then all of them together.
EXPRESSIONS = {
    "string ==": f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "gpu"',
    "quantity compareTo": f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0',
    "semver isGreaterThan": (
        f'device.attributes["{GPU}"].driverVersion.isGreaterThan(semver("550.0.0"))'
    ),
    "matches()": f'device.attributes["{GPU}"].productName.matches("^NVIDIA H(100|200)")',
    "in / has()": f'"{PCI}" in device.attributes && has(device.attributes["{GPU}"].nvlinkDomain)',
    "int ==": f'device.attributes["{PCI}"].numaNode == 0',
    "&& / || of all": (
        f'device.driver == "{GPU}" && '
        f'(device.attributes["{GPU}"].architecture == "Hopper" || '
        f'device.attributes["{GPU}"].architecture == "Blackwell") && '
        f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0 && '
        f'device.attributes["{GPU}"].driverVersion.isGreaterThan(semver("550.0.0")) && '
        f'device.attributes["{GPU}"].productName.matches("^NVIDIA H(100|200)")'
    ),
}
TARGET_RATIO = 1.0  # kubedra's per-call figure at most upstream's
CELBENCH = GoTool("celbench", "celbench", ".", "dra-v0.37.2")
MODES = ("per call", "program")


def catalog_device() -> Device:
    """GPU 0 of an h100x8 node, as the simulated driver publishes it."""
    inventory = profile("h100x8").inventories("node-0")
    return next(i for i in inventory if i.driver == GPU).devices[0]


def _compiled(expression: str) -> Callable[[DeviceView], bool]:
    # As the allocator compiles a stored selector (Inventory.matches).
    return compile_selector(
        expression, strict=True, list_attributes=True, enforce_cost_limit=False
    ).evaluate


class Kubedra:
    """kubedra's side: one round times every selector both ways."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.selectors = [_compiled(e) for e in EXPRESSIONS.values()]
        self.view = DeviceView.of(GPU, device)
        self.results = [evaluate(DeviceView.of(GPU, device)) for evaluate in self.selectors]

    def round(self, calls: int) -> list[dict[str, float]]:
        out = []
        device, of = self.device, DeviceView.of
        for evaluate in self.selectors:
            gc.collect()
            start = time.process_time_ns()
            for _ in range(calls):
                evaluate(of(GPU, device))
            per = (time.process_time_ns() - start) / calls
            view = self.view
            start = time.process_time_ns()
            for _ in range(calls):
                evaluate(view)
            out.append({"per call": per, "program": (time.process_time_ns() - start) / calls})
        return out


class Upstream:
    """upstream's side: the celbench process, one JSON line per round."""

    def __init__(self, device: Device) -> None:
        self.proc = subprocess.Popen(
            [str(CELBENCH.build())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        wire = msgspec.to_builtins(device, enc_hook=str)
        setup = {
            "device": {"driver": GPU, **{k: wire.get(k, {}) for k in ("attributes", "capacity")}},
            "expressions": list(EXPRESSIONS.values()),
        }
        self._send(setup)
        first = self.round(1)
        self.results = [bool(t["match"]) and not t.get("error") for t in first]

    def _send(self, message: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def round(self, calls: int) -> list[dict[str, Any]]:
        self._send({"calls": calls})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"celbench exited (code {self.proc.wait()})")
        answer: list[dict[str, Any]] = json.loads(line)
        return [{**t, "per call": t["perCallNs"], "program": t["programNs"]} for t in answer]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _upstream(device: Device) -> tuple[Upstream | None, str]:
    why = CELBENCH.unavailable()
    if why is not None:
        return None, why
    if quick() and not os.access(CELBENCH.binary(), os.X_OK):
        return None, "tools/celbench is not built yet and quick mode does not build it"
    try:
        return Upstream(device), ""
    except Exception as exc:
        return None, f"tools/celbench could not be built or started: {exc}"


@dataclass
class Figures:
    kubedra: dict[str, dict[str, float]]  # expression name -> mode -> µs
    upstream: dict[str, dict[str, float]] | None
    agree: dict[str, bool]


def measure(device: Device, calls: int, rounds: int) -> tuple[Figures, str]:
    ours = Kubedra(device)
    theirs, missing = _upstream(device)
    names = list(EXPRESSIONS)
    ours_ns: dict[str, dict[str, list[float]]] = {n: {m: [] for m in MODES} for n in names}
    theirs_ns: dict[str, dict[str, list[float]]] = {n: {m: [] for m in MODES} for n in names}
    try:
        for r in range(rounds):
            sides: list[tuple[Callable[[int], list[dict[str, Any]]], dict[str, Any]]]
            sides = [(ours.round, ours_ns)]  # type: ignore[list-item]
            if theirs is not None:
                sides.append((theirs.round, theirs_ns))
            if r % 2:
                sides.reverse()
            for side, figures in sides:
                for name, timing in zip(names, side(calls), strict=True):
                    for mode in MODES:
                        figures[name][mode].append(timing[mode])
    finally:
        if theirs is not None:
            theirs.close()

    def medians(ns: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
        return {
            n: {m: statistics.median(v) / 1e3 for m, v in modes.items()} for n, modes in ns.items()
        }

    agree = {n: theirs is None or ours.results[i] == theirs.results[i] for i, n in enumerate(names)}
    return Figures(medians(ours_ns), medians(theirs_ns) if theirs else None, agree), missing


def rows_for(fig: Figures, missing: str) -> list[Row]:
    rows = []
    for name in EXPRESSIONS:
        for mode in MODES:
            ours = fig.kubedra[name][mode]
            label = f"{name}, {mode}"
            if fig.upstream is None:
                note = f"upstream: MISSING ({missing})"
                rows.append(Row("cel.vs-upstream", label, ours, "µs CPU/call", "", None, note))
                continue
            up = fig.upstream[name][mode]
            ratio = ours / up
            note = f"upstream {up:,.2f} µs; kubedra/upstream {ratio:.2f}x"
            if not fig.agree[name]:
                note += "; RESULTS DIFFER"
            judged = mode == "per call"
            target = f"≤ {TARGET_RATIO:g}x upstream" if judged else ""
            ok = (ratio <= TARGET_RATIO and fig.agree[name]) if judged else None
            rows.append(Row("cel.vs-upstream", label, ours, "µs CPU/call", target, ok, note))
    return rows


def run() -> list[Row]:
    device = catalog_device()
    fig, missing = measure(device, calls=sized(20_000, 500), rounds=sized(7, 2))
    rows = rows_for(fig, missing)
    view = per_call(lambda: DeviceView.of(GPU, device).fault(True), 20_000)
    rows.append(Row("cel.device", "DeviceView.of + device check", view * 1e6, "µs/device"))
    whole = per_call(lambda: _whole(DeviceView.of(GPU, device)), 20_000)
    rows.append(Row("cel.device", "DeviceView.of, whole maps built", whole * 1e6, "µs/device"))
    uncached = cached_compile.__wrapped__
    for name, expression in EXPRESSIONS.items():
        cost = per_call(lambda e=expression: uncached(e, strict=True), sized(200, 20))  # type: ignore[misc]
        rows.append(Row("cel.compile", name, cost * 1e6, "µs"))
    return rows


def _whole(view: DeviceView) -> object:
    return view.attributes, view.capacity
