"""What each size of device share is worth in the best packing of a workload mix.

Packing the shares of a mix (size -> share of the pods) into the fewest devices is the
cutting-stock problem; the duals y_s of its LP relaxation price each size in devices: a
device holding one of the optimal configurations is worth exactly its capacity, and no
multiset of sizes that fits on a device is worth more. From the prices, the value v(g) of a
free gap of g milli is the best priced fill of it (a knapsack), and a share of s placed in
a gap g loses

    v(g) - v(g - s) - y_s  >= 0

milli against the best packing: 0 when the share completes, or starts, a configuration of
an optimal packing, more when it takes a gap that a better fitting size was worth more in.
`fragmentation-priced` uses that loss to steer shares (docs/decisions.md).

The LP is small (one variable per size, one row per configuration found), so it is solved
by column generation: HiGHS on the configurations found so far (`dual_lp.DualLP`), each
round adding the configuration a knapsack at the current prices finds worth more than one
device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce

from kubedra.scheduler.policies.dual_lp import DualLP

_EPS = 1e-9
_MAX_ROUNDS = 10_000  # configurations to add at most: a safety net, not a tuning


@dataclass(frozen=True)
class SharePrices:
    """Prices of share sizes (milli of a device each) and values of gaps, in milli."""

    price: Mapping[int, float]
    step: int  # the gcd of the sizes and the capacity: gap values change only at its multiples
    values: tuple[float, ...]  # v(k * step), k = 0 .. capacity / step

    def gap_value(self, gap: int) -> float:
        """v(gap): the best priced fill of `gap` milli."""
        if gap <= 0:
            return 0.0
        return self.values[min(gap // self.step, len(self.values) - 1)]

    def loss(self, gap: int, milli: int) -> float:
        """What a share of `milli` placed in a free `gap` loses against the best packing
        (milli; a size outside the mix is priced as the best fill of its own size)."""
        price = self.price.get(milli)
        if price is None:
            price = self.gap_value(milli)
        lost = self.gap_value(gap) - self.gap_value(gap - milli) - price
        return lost if lost > 1e-6 else 0.0  # below: rounding of an exact fit


def share_prices(shares: Mapping[int, float], capacity: int) -> SharePrices:
    """Prices of packing `shares` (size in milli -> positive share) on devices of `capacity`
    milli: the LP duals, found by column generation."""
    sizes = sorted(s for s, p in shares.items() if 0 < s <= capacity and p > 0)
    step = reduce(math.gcd, sizes, capacity)
    units = [s // step for s in sizes]
    demand = [shares[s] for s in sizes]
    # Start from one configuration per size (as many of it as fit): the LP is bounded.
    lp = DualLP(demand)
    for s in sizes:
        lp.add([float(capacity // s if t == s else 0) for t in sizes])
    for _ in range(_MAX_ROUNDS):
        y = lp.solve()
        values, best = _knapsack(units, y, capacity // step)
        if values[-1] <= 1 + _EPS:
            break
        lp.add([float(best.count(u)) for u in units])
    else:
        raise ArithmeticError(f"share prices: no optimum after {_MAX_ROUNDS} configurations")
    return SharePrices(
        {s: p * capacity for s, p in zip(sizes, y, strict=True)},
        step,
        tuple(v * capacity for v in values),
    )


def _knapsack(sizes: list[int], price: list[float], capacity: int) -> tuple[list[float], list[int]]:
    """The best total price of sizes (any number of each) within each capacity 0..`capacity`
    (in steps), and a multiset of sizes reaching it at `capacity`."""
    value, last = [0.0] * (capacity + 1), [0] * (capacity + 1)
    for c in range(1, capacity + 1):
        value[c] = value[c - 1]
        for s, p in zip(sizes, price, strict=True):
            if s <= c and value[c - s] + p > value[c] + _EPS:
                value[c], last[c] = value[c - s] + p, s
    chosen, c = [], capacity
    while c > 0:
        if last[c]:
            chosen.append(last[c])
            c -= last[c]
        else:
            c -= 1
    return value, chosen
