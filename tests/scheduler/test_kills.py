"""kill -9 among 4 writer and 2 scheduler processes on one store (see `killharness`).

`make test` runs a few kills over short writers; KUBEDRA_STORE_KILLS=60 (`make store-kills`)
runs 60 kills over 4 writers x 500 operations."""

from __future__ import annotations

import os
from pathlib import Path

from tests.scheduler.killharness import run_kills

KILLS = int(os.environ.get("KUBEDRA_STORE_KILLS", "6"))
OPS = 500 if KILLS >= 60 else 40


def test_kill_9_loses_no_acknowledged_write_and_allocates_no_device_twice(tmp_path: Path) -> None:
    report = run_kills(tmp_path, KILLS, OPS, seed=25)
    assert report.violations == []
    assert report.kills == KILLS and report.kills_with_violations == 0
    assert report.writer_kills > 0 and report.scheduler_kills > 0
    assert report.acknowledged == 4 * OPS
    assert report.bound > 0
