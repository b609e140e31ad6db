"""Share prices: the duals of packing a mix of device shares into the fewest devices."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedra.scheduler.policies import make_policy
from kubedra.scheduler.policies.fragmentation import TaskShape
from kubedra.scheduler.policies.fragmentation_priced import FragmentationPriced
from kubedra.scheduler.policies.pricing import SharePrices, share_prices


def _worth(prices: SharePrices, shares: dict[int, float]) -> float:
    """The LP's objective at the prices, in devices: at the optimum, the fewest devices a
    fractional packing of `shares` takes."""
    return sum(shares[s] * prices.price[s] for s in shares) / 1000


def test_prices_by_hand() -> None:
    # 600 and twice as much 400: one device holds a 600 and a 400, the other 400s go two to
    # a device: 1 + 1/2 devices. The only prices that certify it: 500 each.
    shares = {600: 1.0, 400: 2.0}
    prices = share_prices(shares, 1000)
    assert prices.price == pytest.approx({600: 500.0, 400: 500.0})
    assert _worth(prices, shares) == pytest.approx(1.5)


def test_losses_by_hand() -> None:
    # The best packing: 650 with 320, 470 with 470, 230s four to a device: 2.25 devices.
    shares = {650: 1.0, 320: 1.0, 470: 2.0, 230: 1.0}
    prices = share_prices(shares, 1000)
    assert _worth(prices, shares) == pytest.approx(2.25)
    assert prices.price == pytest.approx({650: 2000 / 3, 320: 1000 / 3, 470: 500.0, 230: 250.0})
    # The 350 beside a 650 is a 320's: a 230 there loses (350 worth 1/3, its 120 nothing).
    assert prices.loss(350, 320) == 0.0
    assert prices.loss(350, 230) == pytest.approx(1000 / 3 - 250)
    # The 530 beside a 470 is another 470's; a 230 there starts a fill as good (530 - 230 =
    # 300 still holds a 230 at 250), a 320 does not.
    assert prices.loss(530, 230) == 0.0
    assert prices.loss(530, 320) == pytest.approx(500 - 1000 / 3)
    # A fresh device loses nothing to any size of an optimal configuration.
    assert [prices.loss(1000, s) for s in shares] == [0.0] * 4
    # A size outside the mix is priced as the best fill of its own size (a 700 as a 650).
    assert prices.loss(1000, 700) == pytest.approx(1000 - 1000 / 3 - 2000 / 3)


def test_gap_values_step_with_the_sizes() -> None:
    prices = share_prices({500: 1.0}, 1000)
    assert prices.step == 500
    assert [prices.gap_value(g) for g in (0, 499, 500, 999, 1000, 5000)] == [
        0,
        0,
        500,
        500,
        1000,
        1000,
    ]


sizes = st.sampled_from(range(50, 1001, 10))
mixes = st.dictionaries(sizes, st.integers(1, 9).map(float), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(mixes)
def test_prices_are_an_optimal_dual(shares: dict[int, float]) -> None:
    prices = share_prices(shares, 1000)
    # Feasible: no multiset of sizes that fits on a device is worth more than the device.
    assert prices.gap_value(1000) <= 1000 + 1e-6
    # Between the volume bound and the packing that puts each size alone on devices.
    devices = _worth(prices, shares)
    assert devices >= sum(s * n for s, n in shares.items()) / 1000 - 1e-9
    assert devices <= sum(n / (1000 // s) for s, n in shares.items()) + 1e-9
    # Optimal: some fractional packing of that many devices exists. Checked for two sizes
    # against every mix of the configurations of two sizes (enumerated).
    if len(shares) == 2:
        assert devices == pytest.approx(_two_size_optimum(shares), abs=1e-6)
    # Losses are never negative.
    for gap, s in itertools.product(range(0, 1001, 10), shares):
        assert prices.loss(gap, s) >= 0.0


def _two_size_optimum(shares: dict[int, float]) -> float:
    """The fewest devices a fractional packing of two sizes takes: the best of the
    configurations (a of one, b of the other) taken two at a time, by Cramer's rule."""
    (s, n), (t, m) = sorted(shares.items())
    configs = [(a, b) for a in range(1000 // s + 1) for b in range((1000 - a * s) // t + 1)]
    best = n / (1000 // s) + m / (1000 // t)  # each size alone
    for (a1, b1), (a2, b2) in itertools.combinations(configs, 2):
        det = a1 * b2 - a2 * b1
        if det == 0:
            continue
        x1, x2 = (n * b2 - m * a2) / det, (a1 * m - b1 * n) / det
        if x1 >= -1e-12 and x2 >= -1e-12:
            best = min(best, x1 + x2)
    for a, b in configs:  # one configuration covering both
        if a and b:
            best = min(best, max(n / a, m / b))
    return best


def test_the_policy_reprices_only_when_the_mix_moves() -> None:
    policy = make_policy("fragmentation-priced")
    assert isinstance(policy, FragmentationPriced)
    assert policy.prices() is None  # no mix yet
    policy.prime({TaskShape(1, 650): 100, TaskShape(1, 320): 100, TaskShape(1, 1000): 50})
    first = policy.prices()
    assert first is not None and first.price[650] + first.price[320] == pytest.approx(1000)  # a pair fills a GPU
    # Shares within 1 % of those priced (an observed mix moves like this per pod): kept.
    policy.prime({TaskShape(1, 650): 100, TaskShape(1, 320): 101, TaskShape(1, 1000): 50})
    assert policy.prices() is first
    # 10 % more 320s: solved again.
    policy.prime({TaskShape(1, 650): 100, TaskShape(1, 320): 110, TaskShape(1, 1000): 50})
    again = policy.prices()
    assert again is not first and again is not None
    # No shares in the mix: nothing to price.
    policy.prime({TaskShape(1, 1000): 1})
    assert policy.prices() is None
