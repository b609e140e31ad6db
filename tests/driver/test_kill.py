"""kill -9 of a real driver process during prepares and unprepares (see `killharness`).

`make test` runs a few kills; KUBEDRA_DRIVER_KILLS=100 (`make driver-kills`) the full count."""

from __future__ import annotations

import os
from pathlib import Path

from .killharness import run_kills

KILLS = int(os.environ.get("KUBEDRA_DRIVER_KILLS", "6"))


def test_kill_9_during_prepare_and_unprepare_keeps_checkpoint_cdi_and_status_in_agreement(
    short_dir: Path,
) -> None:
    report = run_kills(short_dir, KILLS, seed=25)
    assert report.violations == []
    assert report.kills == KILLS and report.kills_with_violations == 0
    assert report.prepares_acknowledged > 0 and report.unprepares_acknowledged > 0
    assert report.recoveries == 0  # a kill never damages the checkpoint itself
    assert report.idempotent_prepares > 0


def test_kill_9_during_mig_prepares_leaves_exactly_the_instances_of_prepared_claims(
    short_dir: Path,
) -> None:
    """Every prepare makes MIG instances, every unprepare destroys them: after each kill and
    restart the GPUs hold the instances of the checkpointed claims and nothing else."""
    kills = max(3, KILLS // 2)
    report = run_kills(short_dir, kills, seed=36, mig=True)
    assert report.violations == []
    assert report.kills == kills and report.kills_with_violations == 0
    assert report.prepares_acknowledged > 0 and report.unprepares_acknowledged > 0
    assert report.recoveries == 0
