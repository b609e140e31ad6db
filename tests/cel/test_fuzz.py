"""Fuzzing of every CEL entry point: no traceback, no case over 10 s or 1 GiB.

`make test` runs a fixed-seed sample; KUBEDRA_FUZZ_CEL=N runs N cases instead (the long
mode, e.g. `KUBEDRA_FUZZ_CEL=20000 .venv/bin/python -m pytest tests/cel/test_fuzz.py -s`,
or `python -m tests.cel.fuzz 20000` for the report alone).
"""

from __future__ import annotations

import os

from tests.cel.fuzz import fuzz, report

CASES = int(os.environ.get("KUBEDRA_FUZZ_CEL", "400"))


def test_fuzz_cel_entry_points() -> None:
    stats = fuzz(CASES, seed_value=20250)
    print(report(stats))
    assert stats.runs.count >= 3 * CASES  # three entry points per expression
    assert stats.runs.crashes == [], report(stats)
    assert stats.runs.slow == [], report(stats)
