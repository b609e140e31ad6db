"""`bench.lp_solvers`: its column generation with the policies' solver is `share_prices`',
its configuration enumeration is complete, and kubedra's former simplex (the reference the
switch to HiGHS was measured against) finds the same prices."""

from __future__ import annotations

import pytest

from bench import lp_solvers
from kubedra.scheduler.policies.pricing import share_prices

MIX = {160: 0.2, 230: 0.3, 470: 0.4, 810: 0.1}


def test_column_generation_is_share_prices() -> None:
    y, _ = lp_solvers.column_generation(MIX, lp_solvers.Incremental())
    own = share_prices(MIX, lp_solvers.CAPACITY)
    assert [v * lp_solvers.CAPACITY for v in y] == [own.price[s] for s in sorted(MIX)]


def test_maximal_configurations() -> None:
    full = lp_solvers.maximal_configurations([300, 500], 100)
    assert sorted(full or []) == [[0.0, 2.0], [1.0, 1.0], [3.0, 0.0]]
    assert lp_solvers.maximal_configurations(list(range(10, 1000, 10)), 100) is None


def test_former_simplex_matches() -> None:
    highs, _ = lp_solvers.column_generation(MIX, lp_solvers.Incremental())
    simplex, _ = lp_solvers.column_generation(MIX, lp_solvers.simplex_solve)
    assert simplex == pytest.approx(highs, abs=1e-9)
