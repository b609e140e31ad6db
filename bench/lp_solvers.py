"""Which LP solver prices share sizes: HiGHS (the policies' solver), kubedra's former
simplex or SciPy's linprog (not part of `make bench`).

    python -m bench.lp_solvers [PYTHON]    PYTHON: an interpreter with highspy and scipy
                                           installed, kubedra importable (default: this one)

The LP is the dual of the cutting-stock relaxation that `policies/pricing.py` solves for
`fragmentation-priced` (and `policies/partitions.py` for `mig-aware`): max d·y subject to
a·y <= 1 for every configuration a (a multiset of sizes that fits on one device), y >= 0.
kubedra finds it by column generation: an LP solver on the configurations found so far, a
knapsack at the current prices adding the best one while it is worth more than a device.
Compared, per mix:

- kubedra: `share_prices` as the policy calls it (HiGHS through `dual_lp.DualLP`: one model
  kept and a row added each round, so HiGHS restarts from its last basis);
- simplex-cg / linprog-cg: the same column generation with kubedra's former solver (a
  dense tableau simplex, Bland's rule, `simplex_solve`, kept here as the reference) or with
  `scipy.optimize.linprog(method="highs")` (a fresh solve each round);
- simplex-full / highs-full / linprog-full: one solve on every maximal configuration
  enumerated up front (what a solver without column generation needs; "-" where there are
  more than `FULL_CAP` of them, or `OWN_FULL_CAP` for the dense tableau).

The mixes: those `fragmentation-priced` prices on the Alibaba openb traces (the primed mix,
FGD's typical pods covering 95 % of the tasks, and the full one; shares of each share size
in milli), the mixes it learns unprimed from the first pods of the default trace, synthetic
mixes with many sizes, and the H100 MIG mixes `mig-aware` prices (`shape_prices`, the same
solver, column generation over MIG placements).

Reported: for each mix the sizes, configurations, CPU time per solve (median of `REPEATS`),
the largest difference of a price from kubedra's (in milli, relative to the capacity) and
of the objective, and whether every price vector is optimal (feasible for the full set
of configurations, objective equal within 1e-6); then the import time of each solver
(median of 5 fresh interpreters) and the installed size of what it adds to kubedra.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial, reduce
from math import gcd
from pathlib import Path
from typing import Any

from bench.progress_libs import import_ms, installed

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "alibaba-gpu-2023"
REPEATS = 5
FULL_CAP = 20_000  # maximal configurations enumerated at most for the full-set solves
OWN_FULL_CAP = 3_000  # the same for the dense tableau (rows x (rows + sizes))
FULL = ("simplex-full", "highs-full", "linprog-full")
EPS = 1e-9  # the former simplex's tolerance
TOL = 1e-6
CAPACITY = 1000

IMPORTS = {
    "simplex": "import numpy",  # the former simplex needs only numpy, a dependency
    "highspy": "import highspy",  # a dependency since it replaced the simplex
    "scipy": "from scipy.optimize import linprog",
}

Solve = Callable[[Sequence[float], Sequence[Sequence[float]]], list[float]]


# --- the solvers --------------------------------------------------------------------------


def simplex_solve(profit: Sequence[float], rows: Sequence[Sequence[float]]) -> list[float]:
    """kubedra's former solver (the policies' until HiGHS replaced it), kept here as the
    reference the decision was measured against: max profit·y subject to rows @ y <= 1,
    y >= 0, a dense tableau simplex from the slack basis with Bland's rule."""
    import numpy as np

    m, n = len(rows), len(profit)
    t = np.zeros((m + 1, n + m + 1))
    t[:m, :n], t[:m, n : n + m], t[:m, -1] = rows, np.eye(m), 1.0
    t[m, :n] = [-p for p in profit]
    basis = list(range(n, n + m))
    while True:
        entering = np.flatnonzero(t[m, :-1] < -EPS)
        if entering.size == 0:
            break
        j = int(entering[0])
        column = t[:m, j]
        rising = column > EPS
        ratios = np.full(m, np.inf)
        ratios[rising] = t[:m, -1][rising] / column[rising]
        ties = np.flatnonzero(ratios <= ratios.min() + EPS)
        i = min((int(k) for k in ties), key=lambda k: basis[k])
        t[i] /= t[i, j]
        for k in range(m + 1):
            if k != i and t[k, j] != 0.0:
                t[k] -= t[k, j] * t[i]
        basis[i] = j
    y = [0.0] * n
    for i, b in enumerate(basis):
        if b < n:
            y[b] = float(t[i, -1])
    return y


def highs_solve(profit: Sequence[float], rows: Sequence[Sequence[float]]) -> list[float]:
    """max profit·y, rows @ y <= 1, y >= 0 through highspy, a fresh model."""
    import highspy  # type: ignore[import-not-found]  # only in the PYTHON compared
    import numpy as np

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    n = len(profit)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(rows)
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = np.asarray(profit, dtype=float)
    lp.col_lower_, lp.col_upper_ = np.zeros(n), np.full(n, highspy.kHighsInf)
    lp.row_lower_ = np.full(len(rows), -highspy.kHighsInf)
    lp.row_upper_ = np.ones(len(rows))
    a = np.asarray(rows, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, len(rows)
    nz = a != 0
    lp.a_matrix_.start_ = np.concatenate(([0], np.cumsum(nz.sum(axis=1)))).astype(np.int32)
    lp.a_matrix_.index_ = np.nonzero(nz)[1].astype(np.int32)
    lp.a_matrix_.value_ = a[nz]
    h.passModel(lp)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return list(h.getSolution().col_value)


class Incremental:
    """The policies' solver (`DualLP`: one HiGHS model, a row added each round, restarted
    from its last basis) behind the bench's solve signature."""

    def __init__(self) -> None:
        self.lp: Any = None
        self.rows = 0

    def __call__(self, profit: Sequence[float], rows: Sequence[Sequence[float]]) -> list[float]:
        from kubedra.scheduler.policies.dual_lp import DualLP

        if self.lp is None:
            self.lp = DualLP(profit)
        for row in rows[self.rows :]:
            self.lp.add(row)
        self.rows = len(rows)
        return list(self.lp.solve())


def rows_lp(solve: Solve) -> type:
    """A `DualLP` stand-in that solves all its rows afresh with `solve` (for `mig-aware`,
    whose column generation builds its LP itself)."""

    class RowsLP:
        def __init__(self, profit: Sequence[float]) -> None:
            self.profit, self.rows = list(profit), list[list[float]]()

        def add(self, row: Sequence[float]) -> None:
            self.rows.append(list(row))

        def solve(self) -> list[float]:
            return solve(self.profit, self.rows)

    return RowsLP


def linprog_solve(profit: Sequence[float], rows: Sequence[Sequence[float]]) -> list[float]:
    from scipy.optimize import linprog  # type: ignore[import-untyped]

    res = linprog([-p for p in profit], A_ub=rows, b_ub=[1.0] * len(rows), method="highs")
    assert res.status == 0, res.message
    return [float(v) for v in res.x]


# --- the LPs ------------------------------------------------------------------------------


def column_generation(shares: Mapping[int, float], solve: Solve) -> tuple[list[float], int]:
    """`share_prices`' loop with `solve` for its simplex: the prices (fractions of a device,
    by ascending size) and the configurations it ended with."""
    from kubedra.scheduler.policies.pricing import _EPS, _knapsack

    sizes = sorted(shares)
    step = reduce(gcd, sizes, CAPACITY)
    units = [s // step for s in sizes]
    demand = [shares[s] for s in sizes]
    configurations = [[float(CAPACITY // s if t == s else 0) for t in sizes] for s in sizes]
    while True:
        y = solve(demand, configurations)
        values, best = _knapsack(units, y, CAPACITY // step)
        if values[-1] <= 1 + _EPS:
            return y, len(configurations)
        configurations.append([float(best.count(u)) for u in units])


def maximal_configurations(sizes: Sequence[int], cap: int) -> list[list[float]] | None:
    """Every multiset of `sizes` that fits in CAPACITY with no room for one more (None: more
    than `cap` of them)."""
    order = sorted(sizes, reverse=True)
    smallest = order[-1]
    found: list[list[float]] = []

    def walk(i: int, left: int, counts: list[int]) -> bool:
        if i == len(order):
            if left < smallest:
                found.append([float(counts[order.index(s)]) for s in sorted(sizes)])
            return len(found) <= cap
        for k in range(left // order[i], -1, -1):
            counts[i] = k
            if not walk(i + 1, left - k * order[i], counts):
                return False
        counts[i] = 0
        return True

    return found if walk(0, CAPACITY, [0] * len(order)) else None


def trace_mixes() -> dict[str, dict[int, float]]:
    """The share mixes `fragmentation-priced` prices on the openb traces (distinct ones)."""
    from kubedra.scheduler.policies.fragmentation import TaskShape
    from kubedra.sim import convert
    from kubedra.sim.engine import TYPICAL_SHARE
    from kubedra.sim.metrics import typical_types
    from kubedra.sim.trace import load_workload

    def shares_of(mix: Sequence[tuple[TaskShape, float]]) -> dict[int, float]:
        out: dict[int, float] = {}
        for shape, p in mix:
            if shape.shares_a_device:
                out[shape.milli] = out.get(shape.milli, 0.0) + p
        return out

    shape = partial(convert.task_shape, mode="dra")
    mixes: dict[str, dict[int, float]] = {}
    seen: set[tuple[tuple[int, float], ...]] = set()
    for name in ("default", "gpushare20", "gpushare100", "gpuspec33", "multigpu50"):
        tasks = load_workload(TRACES / f"openb_pod_list_{name}.csv").tasks
        for label, threshold in (("typical", TYPICAL_SHARE), ("all", 1.0)):
            shares = shares_of(typical_types(tasks, threshold, shape=shape))
            key = tuple(sorted((s, round(q, 3)) for s, q in shares.items()))
            if key not in seen:
                seen.add(key)
                mixes[f"{name}, {label}"] = shares
        if name == "default":  # what it learns unprimed: the first pods placed
            for n in (100, 1000):
                counts = Counter(shape(t) for t in tasks[:n])
                total = sum(counts.values())
                mixes[f"default, first {n}"] = shares_of(
                    [(s, c / total) for s, c in counts.items()]
                )
    return mixes


def synthetic_mixes() -> dict[str, dict[int, float]]:
    rng = random.Random(7)
    out = {}
    for n, low in ((30, 100), (60, 50), (99, 10)):
        sizes = (
            sorted(rng.sample(range(low, CAPACITY, 10), n))
            if n < 99
            else list(range(10, CAPACITY, 10))
        )
        weights = [rng.random() for _ in sizes]
        out[f"synthetic, {n} sizes >= {low}"] = {
            s: w / sum(weights) for s, w in zip(sizes, weights, strict=True)
        }
    return out


def cpu_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(REPEATS):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1e3, result


def optimal(
    y: Sequence[float], demand: Sequence[float], full: list[list[float]] | None, best: float
) -> bool:
    """Feasible on every configuration (a knapsack when they were not enumerated) and of
    the best objective."""
    if min(y) < -TOL or abs(sum(d * v for d, v in zip(demand, y, strict=True)) - best) > TOL:
        return False
    if full is not None:
        return all(sum(a * v for a, v in zip(row, y, strict=True)) <= 1 + TOL for row in full)
    return True  # checked by the caller's knapsack


def _own_prices(prices: Any, shares: Mapping[int, float]) -> list[float]:
    return [prices.price[s] / CAPACITY for s in sorted(shares)]


def compare_shares() -> None:
    from kubedra.scheduler.policies.pricing import _knapsack, share_prices

    solvers: dict[str, Callable[[dict[int, float]], tuple[list[float], int]]] = {
        "kubedra": lambda m: (_own_prices(share_prices(m, CAPACITY), m), 0),
        "simplex-cg": lambda m: column_generation(m, simplex_solve),
        "linprog-cg": lambda m: column_generation(m, linprog_solve),
    }
    print(
        f"{'mix':<30} {'sizes':>5} {'configs':>9}  "
        + "  ".join(f"{n:>12}" for n in (*solvers, *FULL))
        + f"  {'max dprice':>10} {'dobj':>8}  all optimal"
    )
    mixes = {**trace_mixes(), **synthetic_mixes()}
    worst = 0.0
    for label, shares in mixes.items():
        sizes = sorted(shares)
        demand = [shares[s] for s in sizes]
        step = reduce(gcd, sizes, CAPACITY)
        units = [s // step for s in sizes]
        results: dict[str, tuple[float, list[float]]] = {}
        cg_configs = 0
        for name, run in solvers.items():
            ms, (y, n) = cpu_ms(partial(run, shares))
            cg_configs = max(cg_configs, n)
            results[name] = (ms, y)
        full = maximal_configurations(sizes, FULL_CAP)
        if full is not None:
            full_solvers: list[tuple[str, Solve]] = [
                ("highs-full", highs_solve),
                ("linprog-full", linprog_solve),
            ]
            if len(full) <= OWN_FULL_CAP:
                full_solvers.insert(0, ("simplex-full", simplex_solve))
            for name, solve in full_solvers:
                results[name] = cpu_ms(partial(solve, demand, full))
        base = results["kubedra"][1]
        best = sum(d * v for d, v in zip(demand, base, strict=True))
        dprice = dobj = 0.0
        ok = True
        for _, y in results.values():
            dprice = max(dprice, max(abs(a - b) for a, b in zip(y, base, strict=True)))
            obj = sum(d * v for d, v in zip(demand, y, strict=True))
            dobj = max(dobj, abs(obj - best))
            ok &= (
                optimal(y, demand, full, obj)
                and _knapsack(units, y, CAPACITY // step)[0][-1] <= 1 + 1e-7
            )
        ok &= dobj <= TOL
        worst = max(worst, dprice)
        configs = f"{cg_configs}/{len(full) if full is not None else '>' + str(FULL_CAP)}"
        cells = "  ".join(
            f"{results[n][0]:>9.2f} ms" if n in results else f"{'-':>12}" for n in (*solvers, *FULL)
        )
        print(
            f"{label:<30} {len(sizes):>5} {configs:>9}  {cells}  "
            f"{dprice * CAPACITY:>10.2e} {dobj:>8.1e}  {'yes' if ok else 'NO'}"
        )
    print(f"largest price difference from kubedra's: {worst * CAPACITY:.2e} milli")
    print("configs: the ones the simplex's generation ended with / maximal ones in all")


def replay() -> None:
    """The solves `fragmentation-priced` makes unprimed on the default trace: the mix it
    observes after each pod, re-priced when a size's share moves more than `REPRICE`."""
    from kubedra.scheduler.policies.fragmentation_priced import REPRICE
    from kubedra.scheduler.policies.pricing import share_prices
    from kubedra.sim import convert
    from kubedra.sim.trace import load_workload

    tasks = load_workload(TRACES / "openb_pod_list_default.csv").tasks
    shape = partial(convert.task_shape, mode="dra")
    counts: Counter[Any] = Counter()
    solved: list[dict[int, float]] = []
    was: dict[int, float] = {}
    for task in tasks:
        counts[shape(task)] += 1
        total = sum(counts.values())
        shares: dict[int, float] = {}
        for s, c in counts.items():
            if s.shares_a_device:
                shares[s.milli] = shares.get(s.milli, 0.0) + c / total
        if shares and not (
            shares.keys() == was.keys()
            and all(abs(shares[k] - q) <= REPRICE * q for k, q in was.items())
        ):
            solved.append(shares)
            was = shares
    row = []
    for run in (
        lambda m: share_prices(m, CAPACITY),
        lambda m: column_generation(m, simplex_solve),
        lambda m: column_generation(m, linprog_solve),
    ):
        start = time.process_time()
        for shares in solved:
            run(shares)
        row.append((time.process_time() - start) * 1e3)
    print(
        f"\nunprimed on default ({len(tasks)} pods): {len(solved)} solves, CPU ms in all: "
        + ", ".join(
            f"{n} {ms:.0f}"
            for n, ms in zip(("kubedra", "simplex-cg", "linprog-cg"), row, strict=True)
        )
    )


def compare_mig() -> None:
    """`shape_prices` on the H100 with HiGHS (the policy's), the former simplex and linprog."""
    from kubedra.scheduler.policies import partitions

    shape = _h100_shape()
    own = vars(partitions)["DualLP"]
    mixes = {
        "mig, bench mix": {"1g.10gb": 0.3, "1g.20gb": 0.1, "2g.20gb": 0.2, "3g.40gb": 0.15,
                           "4g.40gb": 0.15, "7g.80gb": 0.1},
        "mig, 1g + 3g + 4g": {"1g.10gb": 0.5, "3g.40gb": 0.3, "4g.40gb": 0.2},
        "mig, every kind": {k: 1.0 / len(set(shape.kinds)) for k in set(shape.kinds)},
    }  # fmt: skip
    print(
        f"\n{'mix (H100, shape_prices)':<30} {'kubedra':>12} {'simplex':>12} {'linprog':>12}"
        f"  {'max dprice':>10}"
    )
    try:
        for label, demand in mixes.items():
            row, prices = [], []
            for lp in (own, rows_lp(simplex_solve), rows_lp(linprog_solve)):
                vars(partitions)["DualLP"] = lp
                ms, p = cpu_ms(partial(partitions.shape_prices, shape, demand))
                row.append(ms)
                prices.append(p)
            d = max(abs(p[k] - prices[0][k]) for p in prices for k in p)
            print(f"{label:<30} " + " ".join(f"{ms:>9.2f} ms" for ms in row) + f"  {d:>10.2e}")
    finally:
        vars(partitions)["DualLP"] = own


def _h100_shape() -> Any:
    from kubedra.allocator import Inventory, NodeInfo
    from kubedra.api.meta import ObjectMeta
    from kubedra.api.resource import ResourceSlice
    from kubedra.catalog import gpus
    from kubedra.catalog.inventory import gpu_functions
    from kubedra.catalog.nvidia import gpu_inventory
    from kubedra.catalog.profiles import pcie_per_gpu_layout
    from kubedra.driver.publisher import slice_specs
    from kubedra.scheduler.policies.partitions import Model

    inv = gpu_inventory("n", gpus.H100_SXM5_80GB, gpu_functions(pcie_per_gpu_layout(1)), mig=True)
    slices = [
        ResourceSlice(api_version="resource.k8s.io/v1", kind="ResourceSlice",
                      metadata=ObjectMeta(name=f"n-{i}"), spec=s)
        for i, s in enumerate(slice_specs(inv, "n", 1))
    ]  # fmt: skip
    (shape,) = Model(Inventory.build(slices), [NodeInfo("n", {})]).shapes
    return shape


# --- install and import costs -------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}


def costs(python: str) -> None:
    print(f"\n{'solver':<9} {'import':>9}  adds to kubedra")
    for name, statement in IMPORTS.items():
        ms = import_ms(python, statement, runs=5)
        if name == "simplex":
            adds = "nothing (numpy is a dependency already)"
        else:
            dists, mb = installed(python, name, versions=True)
            adds = f"{', '.join(dists)} ({mb:.1f} MB)"
        print(f"{name:<9} {ms:>6.0f} ms  {adds}")


def main(argv: list[str]) -> None:
    python = argv[0] if argv else sys.executable
    if argv[:1] == ["--here"]:
        compare_shares()
        replay()
        compare_mig()
        return
    subprocess.run([python, "-m", "bench.lp_solvers", "--here"], check=True, cwd=REPO,
                   env=_env())  # fmt: skip
    costs(python)


if __name__ == "__main__":
    main(sys.argv[1:])
