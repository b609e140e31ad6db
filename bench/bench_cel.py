"""CEL selector benchmarks: compile time, per-device evaluation vs cel-python, DeviceView cost."""

from __future__ import annotations

import random
from collections.abc import Callable

import celpy
from celpy import celtypes

from bench.harness import Row, best_of, per_call, sized
from kubedra.api.quantity import Quantity
from kubedra.api.semver import Semver
from kubedra.cel import DeviceView, compile_selector
from kubedra.cel.selector import compile_selector as cached_compile

DRIVER = "gpu.nvidia.com"
DEVICES = sized(40_000, 4_000)
REFERENCE_DEVICES = sized(2_000, 200)
EXPRESSIONS = {
    "driver": f'device.driver == "{DRIVER}"',
    "seed-class": 'device.capacity["memory"].isGreaterThan(quantity("40Gi"))',
    "4-clause": (
        f'device.attributes["{DRIVER}"].productName.startsWith("NVIDIA H") && '
        f'device.attributes["{DRIVER}"].architecture == "Hopper" && '
        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0 && '
        f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("550.0.0"))'
    ),
}
# cel-python has no lenient lookup; it gets the portable spelling of the seed class.
REFERENCE = {**EXPRESSIONS, "seed-class": (
    f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("40Gi"))')}  # fmt: skip
_PRODUCTS = ["NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-40GB", "NVIDIA L4"]
_ARCHS = ["Hopper", "Hopper", "Ampere", "Ada"]
_MEMORY = ["80Gi", "141Gi", "40Gi", "24Gi"]


def _raw_devices(count: int) -> list[tuple[str, dict[str, object], dict[str, Quantity]]]:
    rng = random.Random(7)
    out = []
    for i in range(count):
        k = rng.randrange(4)
        attributes: dict[str, object] = {
            "productName": _PRODUCTS[k], "architecture": _ARCHS[k], "index": i % 8,
            "driverVersion": Semver.parse(f"{rng.choice([535, 550, 560])}.{rng.randrange(99)}.0"),
            "uuid": f"GPU-{i:08x}",
        }  # fmt: skip
        out.append((DRIVER, attributes, {"memory": Quantity.parse(_MEMORY[k])}))
    return out


def _reference_activation(driver: str, attrs: dict[str, object], cap: dict[str, Quantity]) -> dict:
    def cel(value: object) -> object:
        if isinstance(value, bool):
            return celtypes.BoolType(value)
        if isinstance(value, int):
            return celtypes.IntType(value)
        return celtypes.StringType(value) if isinstance(value, str) else value

    def domain(values: dict[str, object]) -> celtypes.MapType:
        inner = {celtypes.StringType(k): cel(v) for k, v in values.items()}
        return celtypes.MapType({celtypes.StringType(driver): celtypes.MapType(inner)})

    device = {"driver": cel(driver), "attributes": domain(attrs), "capacity": domain(dict(cap))}
    return {"device": celtypes.MapType({celtypes.StringType(k): v for k, v in device.items()})}


def _reference_functions() -> dict[str, Callable[..., object]]:
    """Quantity/semver for cel-python, delegating to the same kubedra.api types."""
    return {
        "quantity": lambda s: Quantity.parse(str(s)),
        "semver": lambda s: Semver.parse(str(s)),
        "isGreaterThan": lambda a, b: celtypes.BoolType(a.compare(b) > 0),
        "compareTo": lambda a, b: celtypes.IntType(a.compare(b)),
    }


def _eval_rows(name: str, views: list[DeviceView], reference: list[dict]) -> list[Row]:
    selector = compile_selector(EXPRESSIONS[name])
    evaluate = selector.evaluate
    ours = best_of(lambda: [evaluate(d) for d in views]) / len(views)
    env = celpy.Environment()
    program = env.program(env.compile(REFERENCE[name]), functions=_reference_functions())
    theirs = best_of(lambda: [program.evaluate(a) for a in reference], repeat=1) / len(reference)
    matches = [evaluate(v) for v in views[: len(reference)]]
    agree = matches == [bool(program.evaluate(a)) for a in reference]
    speedup = theirs / ours
    group = "cel.eval"
    return [
        Row(group, f"{name}: kubedra", ours * 1e6, "µs/device", "< 5", ours * 1e6 < 5,
            f"{len(views):,} devices"),
        Row(group, f"{name}: cel-python", theirs * 1e6, "µs/device", "", None,
            f"{len(reference):,} devices; results agree: {agree}"),
        Row(group, f"{name}: speed-up", speedup, "x", ">= 20", speedup >= 20),
    ]  # fmt: skip


def run() -> list[Row]:
    raw = _raw_devices(DEVICES)
    views = [DeviceView(d, a, c) for d, a, c in raw]  # type: ignore[arg-type]
    construct = per_call(lambda: DeviceView(*raw[0]), 20_000)  # type: ignore[arg-type]
    rows = [Row("cel.device", "DeviceView construction", construct * 1e6, "µs/device")]
    uncached = cached_compile.__wrapped__
    for name, expression in EXPRESSIONS.items():
        cost = per_call(lambda e=expression: uncached(e), 200)  # type: ignore[misc]
        rows.append(Row("cel.compile", name, cost * 1e6, "µs"))
    reference = [_reference_activation(*r) for r in raw[:REFERENCE_DEVICES]]
    for name in EXPRESSIONS:
        rows.extend(_eval_rows(name, views, reference))
    return rows
