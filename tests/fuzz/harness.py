"""What the fuzzing harnesses share: the bounds every run must stay within, and how a run
is timed, measured and recorded (`tests.fuzz.inputs` for manifests, `tests.cel.fuzz` for
CEL expressions)."""

from __future__ import annotations

import resource
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MAX_SECONDS = 10.0
MAX_GROWTH_BYTES = 1 << 30


def peak_bytes() -> int:
    """The process's peak resident memory so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Runs:
    """Entry-point runs: how many, how long, which crashed and which broke a bound."""

    count: int = 0
    seconds: float = 0.0
    worst: float = 0.0
    worst_run: str = ""
    crashes: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)

    def run(self, step: str, fn: Callable[[], object], expected: tuple[type[Exception], ...],
            shown: str) -> object:  # fmt: skip
        """Run one entry point: its result, or the expected error it raised (None after a
        crash: any other exception, recorded with where it was raised)."""
        self.count += 1
        start, peak = time.perf_counter(), peak_bytes()
        result: object = None
        try:
            result = fn()
        except expected as err:
            result = err
        except Exception as exc:  # the invariant under test: nothing else escapes
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            self.crashes.append(f"{step}: {type(exc).__name__} at {where}: {shown}")
        elapsed = time.perf_counter() - start
        self.seconds += elapsed
        if elapsed > self.worst:
            self.worst, self.worst_run = elapsed, f"{step} on {shown}"
        growth = peak_bytes() - peak
        if elapsed > MAX_SECONDS or growth > MAX_GROWTH_BYTES:
            self.slow.append(f"{step}: {elapsed:.1f} s, +{growth >> 20} MiB: {shown}")
        return result

    def summary(self) -> str:
        return (f"{self.count} entry-point runs in {self.seconds:.1f} s, {len(self.crashes)} "
                f"crashes, {len(self.slow)} over {MAX_SECONDS:.0f} s or 1 GiB; slowest "
                f"{self.worst:.2f} s ({self.worst_run[:160]}); peak RSS {peak_bytes() >> 20} MiB")  # fmt: skip

    def details(self) -> list[str]:
        return ["  " + line for line in sorted(set(self.crashes))[:40] + self.slow[:10]]

    @property
    def clean(self) -> bool:
        return not self.crashes and not self.slow


def main(argv: list[str], run: Callable[[int, int], tuple[str, bool]]) -> int:
    """`python -m ... N [SEED]`: run N cases, print the report, fail on crashes."""
    text, clean = run(int(argv[0]) if argv else 1000, int(argv[1]) if len(argv) > 1 else 0)
    print(text)
    return 0 if clean else 1
