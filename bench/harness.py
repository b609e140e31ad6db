"""The benchmark harness: rows, timing helpers, and the table printer.

Each `bench/bench_*.py` module exposes `run() -> list[Row]`. Targets are checked here and
shown in the table, never asserted by unit tests (timings depend on the machine).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / ".data"


@dataclass(frozen=True)
class Row:
    """One measured figure, with its target when the issue sets one."""

    group: str
    name: str
    value: float
    unit: str
    target: str = ""
    ok: bool | None = None
    note: str = ""


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of `repeat` runs, in seconds, with the GC paused (less noise)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def per_call(fn: Callable[[], object], calls: int, repeat: int = 3) -> float:
    """Best time of one call, in seconds, averaged over `calls` calls per run."""

    def loop() -> None:
        for _ in range(calls):
            fn()

    return best_of(loop, repeat) / calls


def format_table(rows: list[Row]) -> str:
    """Render rows as a fixed-width table."""
    header = ("group", "benchmark", "value", "unit", "target", "ok", "note")
    body = [
        (
            r.group,
            r.name,
            f"{r.value:,.3f}" if r.value < 1000 else f"{r.value:,.0f}",
            r.unit,
            r.target,
            "" if r.ok is None else ("yes" if r.ok else "NO"),
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, strict=False)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(lines)
