"""Run every benchmark module (or those named on the command line) and print one table.

    python -m bench [--quick] [NAME ...]

Progress goes to stderr, one plain line per step, so it reads the same on a terminal and
in a CI log: each module's start (with how long it took last time), a line every 30 s
while it runs, and its end with the time taken and an ETA for the rest. The ETA uses the
durations of the last run of each module (kept in bench/.data/durations.json, per mode);
a module never run before has none, so the ETA says how many modules it leaves out.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from bench.harness import DATA_DIR, QUICK_ENV, Row, format_table, quick

HEARTBEAT_S = 30.0
DURATIONS = DATA_DIR / "durations.json"


def main(argv: list[str], err: TextIO = sys.stderr) -> int:
    if "--quick" in argv:
        os.environ[QUICK_ENV] = "1"
        argv = [a for a in argv if a != "--quick"]
    here = Path(__file__).resolve().parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if argv:
        names = [n for n in names if any(a in n for a in argv)]
    mode = "quick" if quick() else "full"
    last = _durations().get(mode, {})
    rows: list[Row] = []
    taken: dict[str, float] = {}
    start = time.monotonic()
    for i, name in enumerate(names, 1):
        step = f"bench: [{i}/{len(names)}] {name}"
        before = f" (last run: {_duration(last[name])})" if name in last else ""
        print(f"{step} ...{before}", file=err, flush=True)
        began = time.monotonic()
        with _heartbeat(step, began, err):
            module = importlib.import_module(f"bench.{name}")
            rows.extend(module.run())
        taken[name] = time.monotonic() - began
        rest = eta(names[i:], last)
        print(
            f"{step} done in {_duration(taken[name])}; elapsed "
            f"{_duration(time.monotonic() - start)}{rest}",
            file=err,
            flush=True,
        )
        _save(mode, taken)
    print(format_table(rows))
    return 0


def eta(remaining: list[str], last: dict[str, float]) -> str:
    """`, ETA 4 min 10 s` from the last run's durations of the modules still to run."""
    if not remaining:
        return ""
    known = [last[n] for n in remaining if n in last]
    unknown = len(remaining) - len(known)
    if not known:
        return f", {unknown} module(s) to go (no earlier run to estimate from)"
    more = f" + {unknown} module(s) never timed" if unknown else ""
    return f", ETA {_duration(sum(known))}{more}"


@contextmanager
def _heartbeat(step: str, began: float, err: TextIO) -> Iterator[None]:
    """A line every HEARTBEAT_S seconds while a module runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            running = _duration(time.monotonic() - began)
            print(f"{step} still running ({running})", file=err, flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _durations() -> dict[str, dict[str, float]]:
    try:
        data = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(mode: str, taken: dict[str, float]) -> None:
    data = _durations()
    data[mode] = {**data.get(mode, {}), **taken}
    DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    DURATIONS.write_text(json.dumps(data, indent=1, sort_keys=True))


def _duration(seconds: float) -> str:
    from kubedra.cli.progress import duration

    return duration(seconds)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
