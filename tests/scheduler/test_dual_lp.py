"""`DualLP`: the column generation's LP on HiGHS, solved again after each added row, and
quiet on stdout (kubedra's commands print parseable output there)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubedra.scheduler.policies.dual_lp import DualLP


def test_optimum_moves_as_rows_are_added() -> None:
    lp = DualLP([1.0, 1.0])
    lp.add([2.0, 0.0])
    lp.add([0.0, 2.0])
    assert lp.solve() == pytest.approx([0.5, 0.5])
    lp.add([1.0, 1.0])  # a configuration holding one of each: now worth at most 1 together
    y = lp.solve()
    assert sum(y) == pytest.approx(1.0)
    assert all(0.0 <= v <= 0.5 + 1e-9 for v in y)


def test_prices_are_never_negative() -> None:
    lp = DualLP([0.0, 1.0])  # an item of no profit: its price is 0, not -0 or -1e-13
    lp.add([1.0, 3.0])
    lp.add([4.0, 0.0])
    y = lp.solve()
    assert y == [0.0, pytest.approx(1 / 3)]
    assert str(y[0]) == "0.0"


def test_unbounded_is_an_error() -> None:
    lp = DualLP([1.0, 1.0])
    lp.add([1.0, 0.0])  # nothing bounds the second item
    with pytest.raises(ArithmeticError, match="not solved"):
        lp.solve()


def test_row_of_the_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="row of 3 entries for an LP of 2 items"):
        DualLP([1.0, 1.0]).add([1.0, 0.0, 0.0])


def test_highs_banner_does_not_reach_stdout() -> None:
    code = (
        "from kubedra.scheduler.policies.pricing import share_prices\n"
        "print('before', flush=True)\n"
        "p = share_prices({160: 0.2, 230: 0.3, 470: 0.4, 810: 0.1}, 1000)\n"
        "print('after', round(p.price[470]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out == "before\nafter 500\n"
