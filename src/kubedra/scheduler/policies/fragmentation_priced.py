"""`fragmentation-priced`: the look-ahead, with shares steered by the mix's best packing (a
kubedra extension).

FGD and the look-ahead judge a share by whether the gap it leaves fits the mix's task
types, not by how well: a 230-milli share that takes the 350 left beside a 650 scores much
like one that takes the 530 beside a 470, though the 350 was the one gap a 320 fits
closely. Over a run such mismatches add up: on the Alibaba trace half of the capacity left
on partly used GPUs above what the best packing of the same pods would leave (seed 42:
the look-ahead leaves 4.09 % of the GPU capacity idle on GPUs holding shares, the LP bound
for the same pods, nodes and CPU set aside, is 3.57 %).

This policy prices each share size by the LP of packing the primed mix's shares into the
fewest devices (`pricing`), and rates a pod that shares a device by the look-ahead's score
less the milli the share loses against that packing, one score point per milli: the loss
decides (a share goes where it completes, or starts, a configuration of an optimal
packing), the look-ahead breaks ties among placements that lose alike. Pods of whole
devices are rated as by the look-ahead.

Prices are solved when the mix is drawn (about 25 ms for the trace's 20 share sizes). An
observed mix is redrawn after every pod; its prices are kept while no size's share has
moved by more than `REPRICE` of itself since they were solved, so a scheduler that learns
the mix online does not solve an LP per pod. A primed mix is drawn once: exact prices.
"""

from __future__ import annotations

from kubedra.scheduler.policies.fragmentation import MILLI, TaskShape, taken_from
from kubedra.scheduler.policies.fragmentation_lookahead import FragmentationLookahead
from kubedra.scheduler.policies.pricing import SharePrices, share_prices

REPRICE = 0.01


class FragmentationPriced(FragmentationLookahead):
    name = "fragmentation-priced"
    loss_weight = 1.0  # score points per milli lost (0.2 and 5 rank the same on the trace)

    def __init__(self) -> None:
        super().__init__()
        self._prices: SharePrices | None = None  # None: the mix has no shares
        self._priced_for: dict[int, float] = {}  # the shares the prices were solved for

    def mix(self) -> list[tuple[TaskShape, float]]:
        drawn = self._mix is None
        mix = super().mix()
        if drawn:
            shares: dict[int, float] = {}
            for shape, p in mix:
                if shape.shares_a_device:
                    shares[shape.milli] = shares.get(shape.milli, 0.0) + p
            self._reprice(shares)
        return mix

    def _reprice(self, shares: dict[int, float]) -> None:
        """Solve the prices for `shares` unless those of shares within `REPRICE` stand."""
        was = self._priced_for
        if shares.keys() == was.keys() and all(
            abs(shares[s] - q) <= REPRICE * q for s, q in was.items()
        ):
            return
        self._prices = share_prices(shares, MILLI) if shares else None
        self._priced_for = shares

    def prices(self) -> SharePrices | None:
        """The prices of the mix's share sizes (None: it has no shares)."""
        self.mix()
        return self._prices

    def _penalty(self, before: tuple[int, ...], after: tuple[int, ...]) -> float:
        """A share's loss against the best packing of the mix, in score points."""
        pod, prices = self._pod, self.prices()
        if pod is None or not pod.shares_a_device or prices is None:
            return 0.0
        return self.loss_weight * prices.loss(taken_from(before, after), pod.milli)
