"""kubedra's allocator and CEL against upstream's, on a fixed-seed sample of generated cases.

`make conformance` runs the large counts; KUBEDRA_CONFORMANCE_ALLOC / _CEL / _VALUES set
the sample sizes here.
"""

from __future__ import annotations

import os

from tests.conformance.oracle import Oracle
from tests.conformance.runner import Tally, run_allocator, run_cel, run_values

ALLOCATOR_CASES = int(os.environ.get("KUBEDRA_CONFORMANCE_ALLOC", "400"))
CEL_CASES = int(os.environ.get("KUBEDRA_CONFORMANCE_CEL", "1000"))
VALUE_CASES = int(os.environ.get("KUBEDRA_CONFORMANCE_VALUES", "500"))


def test_allocator_matches_upstream(oracle: Oracle) -> None:
    tally = run_allocator(oracle, ALLOCATOR_CASES, 20, Tally())
    assert tally.cases >= ALLOCATOR_CASES * 0.9
    # The sample must reach every outcome, or it proves little.
    assert {"allocated", "unsatisfiable", "error"} <= set(tally.outcomes), tally.outcomes


def test_cel_matches_upstream(oracle: Oracle) -> None:
    tally = run_cel(oracle, CEL_CASES, 20, Tally())
    assert tally.cases >= CEL_CASES * 0.9
    assert tally.outcomes["compiled"] and tally.outcomes["compile error"], tally.outcomes


def test_cel_libraries_match_upstream(oracle: Oracle) -> None:
    tally = run_values(oracle, VALUE_CASES, 20, Tally())
    assert tally.cases >= VALUE_CASES * 0.9
    assert {"value", "error"} <= set(tally.outcomes), tally.outcomes
