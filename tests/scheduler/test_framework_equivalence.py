"""The scheduler's decisions are those it made before it became a framework.

`decisions.json` holds, per run of `decisions.small_runs()` (every placement policy on the
synthetic mixed cluster and on a saturated sample of the Alibaba trace, the device-plugin
baseline, a replay with departures), the digest of its placements and of its messages, as
the single-class scheduler recorded them. A refactoring keeps both. A change meant to
alter decisions (a policy, the allocator's choices or its wording) records them afresh:

    python -m tests.scheduler.decisions digest tests/scheduler/decisions.json

and says in its commit which runs moved and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubedra.sim.trace import OPENB_DIR
from tests.scheduler import decisions

EXPECTED: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).parent / "decisions.json").read_text()
)
RUNS = dict(decisions.small_runs())
HAS_TRACE = (OPENB_DIR / "openb_pod_list_default.csv").exists()


def test_every_run_has_a_recorded_digest() -> None:
    assert sorted(RUNS) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_decisions_are_unchanged(name: str) -> None:
    if not name.startswith("mixed-") and not HAS_TRACE:
        pytest.skip("openb trace not available")
    lines = RUNS[name]()
    assert any(line.startswith('["O"') for line in lines)
    got = decisions.digests(lines)
    assert got["placements"] == EXPECTED[name]["placements"], f"{name}: placements changed"
    assert got["messages"] == EXPECTED[name]["messages"], f"{name}: messages changed"


def test_a_changed_decision_changes_the_digest() -> None:
    """The digests can fail: one device moved, or one word of a message, is seen."""
    lines = RUNS["mixed-first-fit"]()
    row = next(i for i, line in enumerate(lines) if '"scheduled"' in line)
    moved = json.loads(lines[row])
    moved[3] = [*moved[3][1:], "gpu.nvidia.com/elsewhere/gpu-9"]
    changed = [*lines[:row], json.dumps(moved), *lines[row + 1 :]]
    assert decisions.digests(changed)["placements"] != decisions.digests(lines)["placements"]
    failed = next(i for i, line in enumerate(lines) if "nodes are available" in line)
    worded = lines[failed].replace("nodes are available", "nodes are free")
    changed = [*lines[:failed], worded, *lines[failed + 1 :]]
    assert decisions.digests(changed)["messages"] != decisions.digests(lines)["messages"]
