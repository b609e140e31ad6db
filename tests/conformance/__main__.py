"""`python -m tests.conformance`: the large differential runs of `make conformance`.

Runs allocator scenarios, CEL selectors and plain CEL expressions against upstream in batches (a fixed seed per
batch, so any run can be repeated) and writes the report. An unexplained mismatch stops the
run with the shrunk case and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.conformance.oracle import Oracle, build
from tests.conformance.report import render
from tests.conformance.runner import Tally, run_allocator, run_cel, run_values

BATCH = 2000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance")
    parser.add_argument("--allocator", type=int, default=20_000, help="allocator scenarios")
    parser.add_argument("--cel", type=int, default=50_000, help="CEL selectors")
    parser.add_argument("--values", type=int, default=20_000, help="plain CEL expressions")
    parser.add_argument("--seed", type=int, default=137)
    parser.add_argument("--report", type=Path, help="write the markdown report here")
    args = parser.parse_args(argv)
    allocator, cel, values = Tally(), Tally(), Tally()
    with Oracle(build()) as oracle:
        try:
            # The CEL runs first: they are quicker, so a mismatch there shows early.
            for what, total, run, tally in (
                ("cel", args.cel, run_cel, cel),
                ("values", args.values, run_values, values),
                ("allocator", args.allocator, run_allocator, allocator),
            ):
                for batch, start in enumerate(range(0, total, BATCH)):
                    run(oracle, min(BATCH, total - start), args.seed + batch, tally)
                    print(f"{what}: {tally.cases}/{total} ({tally.seconds:.0f} s)", flush=True)
        except Exception as exc:  # a Mismatch, or Hypothesis' group of them
            print(f"conformance run failed ({type(exc).__name__}):\n{exc}", file=sys.stderr)
            return 1
    if args.report is not None:
        args.report.write_text(render(allocator, cel, values, args.seed))
        print(f"wrote {args.report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
