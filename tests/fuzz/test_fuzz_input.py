"""Fuzzing of every manifest entry point: no traceback, no run over 10 s or 1 GiB.

`make test` runs a fixed-seed sample; KUBEDRA_FUZZ_INPUT=N runs N inputs instead (the long
mode, `make fuzz`, or `python -m tests.fuzz.inputs N` for the report alone).
"""

from __future__ import annotations

import os

from tests.fuzz.inputs import fuzz, report

INPUTS = int(os.environ.get("KUBEDRA_FUZZ_INPUT", "100"))


def test_fuzz_manifest_entry_points() -> None:
    stats = fuzz(INPUTS, seed_value=20251)
    print(report(stats))
    assert stats.inputs >= INPUTS
    assert set(stats.sources) == {"generated", "structural mutation", "text mutation"}
    assert stats.runs.crashes == [], report(stats)
    assert stats.runs.slow == [], report(stats)
