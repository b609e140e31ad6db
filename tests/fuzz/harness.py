"""What the fuzzing harnesses share: the bounds every run must stay within, and how a run
is timed, measured and recorded (`tests.fuzz.inputs` for manifests, `tests.cel.fuzz` for
CEL expressions)."""

from __future__ import annotations

import random
import resource
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

MAX_SECONDS = 10.0
MAX_GROWTH_BYTES = 1 << 30

T = TypeVar("T")


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


def span_edit(rng: random.Random, text: str, tokens: list[str], longest: int) -> str:
    """The edit every mutator here starts from: splice in a token, delete a span of up to
    `longest` characters, or repeat a span up to 30 times."""
    pos = rng.randint(0, len(text))
    op = rng.randrange(3)
    if op == 0:
        return text[:pos] + rng.choice(tokens) + text[pos:]
    if op == 1:
        return text[:pos] + text[min(len(text), pos + rng.randint(1, longest)) :]
    start = rng.randint(0, pos)
    return text[:pos] + text[start:pos] * rng.randint(1, 30) + text[pos:]


def run_drawn(strategy: st.SearchStrategy[T], count: int, seed_value: int,
              each: Callable[[T], None]) -> None:  # fmt: skip
    """Call `each` on `count` values drawn from `strategy`, reproducibly for a seed (no
    shrinking, no example database: every case is a fresh draw)."""

    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @seed(seed_value)
    @given(strategy)
    def one(drawn: T) -> None:
        each(drawn)

    one()


class Fuzzed(Protocol):
    runs: Runs


F = TypeVar("F", bound=Fuzzed)


def main(argv: list[str], fuzz: Callable[[int, int], F], report: Callable[[F], str]) -> int:
    """`python -m ... N [SEED]`: run N cases, print the report, fail on crashes."""
    stats = fuzz(int(argv[0]) if argv else 1000, int(argv[1]) if len(argv) > 1 else 0)
    print(report(stats))
    return 0 if stats.runs.clean else 1
