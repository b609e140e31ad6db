"""`bench.lp_solvers`: its column generation with kubedra's simplex is `share_prices`', its
configuration enumeration is complete, and HiGHS (where installed) finds the same prices."""

from __future__ import annotations

import pytest

from bench import lp_solvers
from kubedra.scheduler.policies.pricing import share_prices

MIX = {160: 0.2, 230: 0.3, 470: 0.4, 810: 0.1}


def test_column_generation_is_share_prices() -> None:
    y, _ = lp_solvers.column_generation(MIX, lp_solvers.kubedra_solve)
    own = share_prices(MIX, lp_solvers.CAPACITY)
    assert [v * lp_solvers.CAPACITY for v in y] == pytest.approx(
        [own.price[s] for s in sorted(MIX)]
    )


def test_maximal_configurations() -> None:
    full = lp_solvers.maximal_configurations([300, 500], 100)
    assert sorted(full or []) == [[0.0, 2.0], [1.0, 1.0], [3.0, 0.0]]
    assert lp_solvers.maximal_configurations(list(range(10, 1000, 10)), 100) is None


def test_highs_matches() -> None:
    pytest.importorskip("highspy")
    own, _ = lp_solvers.column_generation(MIX, lp_solvers.kubedra_solve)
    got, _ = lp_solvers.column_generation(MIX, lp_solvers.HighsIncremental())
    assert got == pytest.approx(own, abs=1e-9)
