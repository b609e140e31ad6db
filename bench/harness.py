"""The benchmark harness: rows, timing helpers, the quick mode, and the table printer.

Each `bench/bench_*.py` module exposes `run() -> list[Row]`. Targets are checked here and
shown in the table, never asserted by unit tests (timings depend on the machine).

Quick mode (`python -m bench --quick`, `make bench-quick`, or KUBEDRA_BENCH_QUICK=1) is a
check that every benchmark still runs, not a measurement: `best_of` and `per_call` time
once, on a tenth of the calls, and a module sizes its workload with `sized(full, quick)`.
Its figures are marked as quick in the table.
"""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

N = TypeVar("N", int, float)
DATA_DIR = Path(__file__).resolve().parent / ".data"
QUICK_ENV = "KUBEDRA_BENCH_QUICK"


def quick() -> bool:
    """Whether this is a quick pass (read from the environment, so that the benchmarks'
    own subprocesses see it too)."""
    return os.environ.get(QUICK_ENV, "") not in ("", "0")


def sized(full: N, small: N) -> N:
    """A workload size: `full` for a measurement, `small` in quick mode."""
    return small if quick() else full


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
    """Best wall time of `repeat` runs (one in quick mode), in seconds, with the GC paused
    (less noise)."""
    best = float("inf")
    for _ in range(1 if quick() else repeat):
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
    """Best time of one call, in seconds, averaged over `calls` calls per run (a tenth of
    them in quick mode)."""
    calls = max(1, calls // 10) if quick() else calls

    def loop() -> None:
        for _ in range(calls):
            fn()

    return best_of(loop, repeat) / calls


def format_table(rows: list[Row]) -> str:
    """Render rows as a fixed-width table (in quick mode, said above it: its figures come
    from smaller workloads and single runs, so targets are not judged)."""
    if quick():
        rows = [Row(r.group, r.name, r.value, r.unit, r.target, None, r.note) for r in rows]
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
    if quick():
        lines.insert(0, "QUICK MODE: small workloads, single runs; not measurements")
    return "\n".join(lines)


def free_port() -> int:
    """A TCP port free on localhost now (for a process the bench starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(
    process: subprocess.Popen[bytes], url: str, tail: Callable[[], str], what: str,
    timeout: float = 120.0,
) -> None:
    """Wait until `url` answers 200 (a started process's readiness endpoint); raise with
    the end of its log when it exits first or does not get ready in `timeout` s."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited:\n{tail()}")
        try:
            with opener.open(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready in {timeout:g} s:\n{tail()}")
