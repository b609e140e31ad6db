"""The restricted master LP of a column generation, solved by HiGHS.

Both pricing policies (`fragmentation-priced` over share sizes, `mig-aware` over MIG
profiles) price items by the dual of a cutting-stock relaxation: maximise profit·y subject
to a·y <= 1 for every known configuration a of one device, y >= 0. Each round of their
column generation adds the configuration worth more than one device at the current prices
and solves again. One HiGHS model is kept for the whole generation: a round adds one row and
HiGHS restarts from its last basis, instead of solving from scratch (docs/decisions.md has
the measurements against kubedra's former simplex and SciPy's linprog).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

_banner_shown = False


class DualLP:
    """max profit·y subject to row·y <= 1 for each row added, y >= 0."""

    def __init__(self, profit: Sequence[float]) -> None:
        # Imported here: only a scheduler whose policy prices pays for loading HiGHS.
        import highspy
        import numpy as np

        self._highs = _new_highs()
        self._highs.setOptionValue("output_flag", False)  # no solver log
        n = len(profit)
        self._width = n
        self._highs.addVars(n, np.zeros(n), np.full(n, highspy.kHighsInf))
        self._highs.changeColsCost(n, np.arange(n, dtype=np.int32), np.asarray(profit, float))
        self._highs.changeObjectiveSense(highspy.ObjSense.kMaximize)

    def add(self, row: Sequence[float]) -> None:
        """One more configuration: row·y <= 1 (only its non-zero entries are stored)."""
        import highspy
        import numpy as np

        if len(row) != self._width:
            raise ValueError(f"row of {len(row)} entries for an LP of {self._width} items")
        values = np.asarray(row, float)
        index = np.flatnonzero(values).astype(np.int32)
        self._highs.addRow(-highspy.kHighsInf, 1.0, len(index), index, values[index])

    def solve(self) -> list[float]:
        """The optimal y. Every row so far must bound every item (each item has a row with a
        positive entry), else the LP is unbounded and this raises."""
        import highspy

        self._highs.run()
        status = self._highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise ArithmeticError(f"LP not solved: {self._highs.modelStatusToString(status)}")
        # y >= 0 holds up to HiGHS's tolerances: a -1e-13 is a zero.
        return [float(v) if v > 0.0 else 0.0 for v in self._highs.getSolution().col_value]


def _new_highs() -> Any:
    """A HiGHS instance, without the banner HiGHS writes to the process's stdout the first
    time one is made (before any option can turn it off): kubedra's commands print
    parseable output there. The banner is written at the C level, so the first
    construction runs with file descriptor 1 pointed at /dev/null."""
    import highspy

    global _banner_shown
    if _banner_shown:
        return highspy.Highs()  # type: ignore[no-untyped-call]  # its __init__ is unannotated
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        return highspy.Highs()  # type: ignore[no-untyped-call]
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
        _banner_shown = True
