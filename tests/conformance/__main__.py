"""`python -m tests.conformance`: the large differential runs of `make conformance`.

Runs allocator scenarios, CEL selectors and plain CEL expressions against upstream in batches (a fixed seed per
batch, so any run can be repeated) and writes the report. The three kinds run side by side,
each in its own process with its own oracle. An unexplained mismatch stops the run with the
shrunk case and exit status 1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

from tests.conformance.oracle import Oracle, build
from tests.conformance.report import render
from tests.conformance.runner import Tally, run_allocator, run_cel, run_values

BATCH = 2000
RUNS = {"allocator": run_allocator, "cel": run_cel, "values": run_values}


def run_kind(what: str, total: int, seed: int) -> Tally:
    """One kind's batches against one oracle process."""
    tally = Tally()
    with Oracle(build()) as oracle:
        for batch, start in enumerate(range(0, total, BATCH)):
            RUNS[what](oracle, min(BATCH, total - start), seed + batch, tally)
            print(f"{what}: {tally.cases}/{total} ({tally.seconds:.0f} s)", flush=True)
    return tally


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance")
    parser.add_argument("--allocator", type=int, default=20_000, help="allocator scenarios")
    parser.add_argument("--cel", type=int, default=50_000, help="CEL selectors")
    parser.add_argument("--values", type=int, default=20_000, help="plain CEL expressions")
    parser.add_argument("--seed", type=int, default=137)
    parser.add_argument("--report", type=Path, help="write the markdown report here")
    args = parser.parse_args(argv)
    build()  # once, before the workers start
    totals = {"allocator": args.allocator, "cel": args.cel, "values": args.values}
    with multiprocessing.Pool(len(totals)) as pool:  # leaving it stops the other workers
        pending = {w: pool.apply_async(run_kind, (w, n, args.seed)) for w, n in totals.items()}
        try:
            while not all(result.ready() for result in pending.values()):
                for result in pending.values():
                    if result.ready() and not result.successful():
                        result.get()  # raises the worker's mismatch now, not at the end
                time.sleep(1)
            tallies = {what: result.get() for what, result in pending.items()}
        except Exception as exc:  # a Mismatch, or Hypothesis' group of them
            print(f"conformance run failed ({type(exc).__name__}):\n{exc}", file=sys.stderr)
            return 1
    if args.report is not None:
        args.report.write_text(
            render(tallies["allocator"], tallies["cel"], tallies["values"], args.seed)
        )
        print(f"wrote {args.report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
