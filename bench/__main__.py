"""Run every benchmark module (or those named on the command line) and print one table."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from bench.harness import Row, format_table


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if argv:
        names = [n for n in names if any(a in n for a in argv)]
    rows: list[Row] = []
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        module = importlib.import_module(f"bench.{name}")
        rows.extend(module.run())
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
