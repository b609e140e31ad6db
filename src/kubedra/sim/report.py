"""Run outputs: CSVs, PNG plots (matplotlib, Agg), terminal tables, and docs/results.md.

The FGD paper's published per-run curves (fgd-atc23-results) are read here too, so the
report can put them beside ours for the same trace variant.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kubedra.sim.engine import RunResult
from kubedra.sim.trace import FGD_RESULTS_DIR

PAPER_POLICIES = ("01-Random", "02-DotProd", "03-GpuClustering", "04-GpuPacking", "05-BestFit",
                  "06-FGD")  # fmt: skip


def write_csv(result: RunResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not result.rows:
        path.write_text("")
        return path
    keys = list(result.rows[0])
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for row in result.rows:
            w.writerow({k: _fmt(row.get(k, math.nan)) for k in keys})
    return path


def _fmt(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


# --- the paper's curves --------------------------------------------------------------------


def paper_curves(
    workload: str, kind: str = "allo", results_dir: Path = FGD_RESULTS_DIR
) -> dict[str, list[float]]:
    """Median over seeds of the paper's curve per policy: kind 'allo' (GPU allocation %)
    or 'frag' (fragmented GPU % of the cluster), at arrived 0..130 %. Empty if absent."""
    path = results_dir / f"analysis_{kind}_discrete.csv"
    if not path.exists():
        return {}
    runs: dict[str, list[list[float]]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["workload"] != workload:
                continue
            curve = [float(row[str(k)]) if row.get(str(k)) else math.nan for k in range(131)]
            runs.setdefault(row["sc_policy"], []).append(curve)
    return {
        policy: [statistics.median(c[k] for c in curves) for k in range(131)]
        for policy, curves in sorted(runs.items())
    }


def paper_summary(workload: str, results_dir: Path = FGD_RESULTS_DIR) -> dict[str, dict[str, str]]:
    path = results_dir / "summary_unallocated_by_policy.csv"
    if not path.exists():
        return {}
    with path.open(newline="") as fh:
        return {r["policy"]: r for r in csv.DictReader(fh) if r["workload"] == workload}


# --- plots ------------------------------------------------------------------------------


def plot_saturate(
    results: Sequence[RunResult],
    path: Path,
    *,
    key: str = "alloc_pct",
    title: str = "",
    paper: Mapping[str, Sequence[float]] | None = None,
    note: str = "",
) -> Path:
    """Our curves (one line per policy) vs arrived workload; with `paper`, a second panel
    with the paper's published curves for the same trace; `note`: a line under the plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if paper else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.2 * panels, 4.2), sharey=True, squeeze=False)
    ylabel = "GPU allocation ratio (%)" if key == "alloc_pct" else "fragmented GPU (% of cluster)"
    ax = axes[0][0]
    for r in results:
        xs = [row["arrived_pct"] for row in r.rows]
        ax.plot(xs, [row[key] for row in r.rows], label=r.policy, linewidth=1.4)
    ax.set_title(f"kubedra: {title}" if title else "kubedra")
    if paper:
        pax = axes[0][1]
        for policy, ys in paper.items():
            pax.plot(range(len(ys)), ys, label=policy, linewidth=1.2, linestyle="--")
        pax.set_title("FGD paper (published, median of 10 seeds)")
    for a in axes[0]:
        a.set_xlabel("arrived GPU demand (% of cluster GPU capacity)")
        a.set_xlim(0, 130)
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="upper left")
    axes[0][0].set_ylabel(ylabel)
    if key == "alloc_pct":
        for a in axes[0]:
            a.plot([0, 100], [0, 100], color="grey", linewidth=0.6, linestyle=":")
    if note:
        fig.text(0.5, 0.01, note, ha="center", va="bottom", fontsize=7, wrap=True)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
    else:
        fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# Under the fragmentation plot of `sim run` / `sim compare`: why it is not the lead figure.
FRAGMENTATION_NOTE = (
    "Fragmentation counts the free GPU capacity that the trace's task types cannot use. The "
    "device-plugin model rounds each shared-GPU pod up to a whole GPU, which it holds: that "
    "capacity is neither free nor fragmented, so its curve looks close to DRA's while its "
    "GPU allocation (allocation.png) is far lower and more pods are not placed."
)


def is_baseline(policy: str) -> bool:
    """The device-plugin model (`device-plugin`, `device-plugin+POLICY`)."""
    return policy.split("+", 1)[0] == "device-plugin"


def plot_gain(results: Sequence[RunResult], path: Path, *, title: str = "") -> Path:
    """The lead figure of a comparison, what DRA gains: GPU allocation (left) and pods not
    placed (right) against arrived demand, one line per policy, the device-plugin model
    dashed; each policy's final figure in its legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12.4, 4.2))
    for r in results:
        xs = [row["arrived_pct"] for row in r.rows]
        style = "--" if is_baseline(r.policy) else "-"
        a1.plot(xs, [row["alloc_pct"] for row in r.rows], linestyle=style, linewidth=1.4,
                label=f"{r.policy}: {r.summary.get('alloc_pct', math.nan):.1f} %")
        a2.plot(xs, [row.get("failed", 0.0) for row in r.rows], linestyle=style, linewidth=1.4,
                label=f"{r.policy}: {round(r.summary.get('failed', 0.0)):,}")  # fmt: skip
    a1.plot([0, 100], [0, 100], color="grey", linewidth=0.6, linestyle=":")
    a1.set_ylabel("GPU allocation ratio (% of cluster GPU capacity)")
    a1.set_title(f"GPU allocated: {title}" if title else "GPU allocated")
    a2.set_ylabel("pods not placed (no room when they arrived)")
    a2.set_title("pods not placed")
    for a in (a1, a2):
        a.set_xlabel("arrived GPU demand (% of cluster GPU capacity)")
        a.set_xlim(0, 130)
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def lead_lines(results: Sequence[RunResult]) -> list[str]:
    """What each model achieves, before any table: GPU allocation and pods placed and not
    (replay: waiting) per policy; with the device-plugin model among them, what each DRA
    policy gains over it. The answer to "what does DRA gain", in figures."""
    if not results:
        return []
    width = max(len(r.policy) for r in results)
    saturate = results[0].mode == "saturate"
    if saturate:
        s = results[0].summary
        lines = [
            f"GPU allocation once all {round(s.get('pods', 0)):,} pods have arrived "
            f"({s.get('arrived_pct', math.nan):.0f} % of the cluster's GPUs asked for), "
            "pods placed and not placed:"
        ]
        # the device plugin holds a whole GPU for a share: say how much it holds
        held = any(abs(r.summary["reserved_pct"] - r.summary["alloc_pct"]) > 0.005 for r in results)
        for r in results:
            s = r.summary
            lines.append(
                f"  {r.policy.ljust(width)}  {s['alloc_pct']:6.2f} %  "
                f"{round(s['placed']):>7,} placed  {round(s['failed']):>7,} not placed"
                + (f"  ({s['reserved_pct']:.2f} % of the GPUs held)" if held else "")
            )
    else:
        lines = [
            "Mean GPU allocation over the arrival window, pods placed, waiting (mean, most) "
            "and never placed:"
        ]
        for r in results:
            s = r.summary
            lines.append(
                f"  {r.policy.ljust(width)}  {s['mean_alloc_pct']:6.2f} %  "
                f"{round(s['placed']):>7,} placed  waiting {s['mean_pending']:,.1f} mean, "
                f"{round(s['max_pending']):,} most  {round(s['never_placed']):,} never placed"
            )
    base = next((r for r in results if is_baseline(r.policy)), None)
    if base is None:
        return lines
    for r in results:
        if is_baseline(r.policy):
            continue
        if saturate:
            gain = r.summary["alloc_pct"] - base.summary["alloc_pct"]
            placed = round(r.summary["placed"] - base.summary["placed"])
            lines.append(
                f"DRA ({r.policy}) over the device plugin ({base.policy}): {gain:+.2f} points "
                f"of GPU allocation, {placed:+,} pods placed"
            )
        else:
            gain = r.summary["mean_alloc_pct"] - base.summary["mean_alloc_pct"]
            waiting = r.summary["mean_pending"] - base.summary["mean_pending"]
            lines.append(
                f"DRA ({r.policy}) over the device plugin ({base.policy}): {gain:+.2f} points "
                f"of mean GPU allocation, {waiting:+,.1f} pods waiting on average"
            )
    return lines


def plot_replay(results: Sequence[RunResult], path: Path, *, title: str = "") -> Path:
    """Allocation and pending pods over the arrival window (a run goes on until its longest
    pod leaves, weeks later: the drain would squeeze the window of interest to a spike)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unit, per, (start, end) = replay_axis(results)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    for r in results:
        xs = [row["time_s"] / per for row in r.rows]
        a1.plot(xs, [row["alloc_pct"] for row in r.rows], label=r.policy, linewidth=1)
        a2.plot(xs, [row["pending"] for row in r.rows], label=r.policy, linewidth=1)
    a1.set_ylabel("GPU allocation ratio (%)")
    a2.set_ylabel("pending pods")
    for a in (a1, a2):
        a.set_xlabel(f"simulated time ({unit}; the arrival window)")
        if end > start:
            a.set_xlim(start, end)
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    a1.set_title(title or "replay")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def replay_axis(results: Sequence[RunResult]) -> tuple[str, float, tuple[float, float]]:
    """The replay plot's time unit, seconds per unit, and x range: the runs' arrival
    window, in hours (days when it spans over two)."""
    start = min((r.summary.get("arrivals_from_s", 0.0) for r in results), default=0.0)
    end = max((r.summary.get("arrivals_to_s", 0.0) for r in results), default=0.0)
    unit, per = ("days", 86400.0) if end - start > 2 * 86400 else ("hours", 3600.0)
    return unit, per, (start / per, end / per)


# --- tables -----------------------------------------------------------------------------

SATURATE_COLUMNS = (
    ("policy", "policy"),
    ("alloc_at_100", "alloc@100%"),
    ("alloc_at_130", "alloc@130%"),
    ("unalloc_at_130", "unalloc@130%"),
    ("frag_at_50", "frag@50%"),
    ("frag_at_90", "frag@90%"),
    ("frag_at_100", "frag@100%"),
    ("reserved_pct", "reserved@end"),
    ("failed", "failed pods"),
    ("wall_s", "wall s"),
)
REPLAY_COLUMNS = (
    ("policy", "policy"),
    ("mean_alloc_pct", "mean alloc %"),
    ("mean_idle_gpus", "mean idle GPUs"),
    ("mean_pending", "mean pending"),
    ("max_pending", "max pending"),
    ("delay_p50_s", "delay p50 s"),
    ("delay_p99_s", "delay p99 s"),
    ("never_placed", "never placed"),
    ("wall_s", "wall s"),
)


# Columns that count pods: printed as integers, never `2,559.0`.
COUNT_COLUMNS = frozenset({"failed", "max_pending", "never_placed"})


def summary_rows(results: Sequence[RunResult]) -> list[dict[str, str]]:
    out = []
    for r in results:
        values: dict[str, float] = {**r.summary, "wall_s": r.wall_s}
        if "alloc_at_130" in values:
            values["unalloc_at_130"] = 100.0 - values["alloc_at_130"]
        cols = SATURATE_COLUMNS if r.mode == "saturate" else REPLAY_COLUMNS
        row = {"policy": r.policy}
        for key, label in cols[1:]:
            row[label] = _cell(values.get(key, math.nan), key in COUNT_COLUMNS)
        out.append(row)
    return out


def _cell(value: float, count: bool) -> str:
    if math.isnan(value):
        return "n/a"
    if count:
        return f"{round(value):,}"
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}"


def text_table(rows: Sequence[Mapping[str, str]]) -> str:
    if not rows:
        return "(no runs)"
    header = list(rows[0])
    widths = [max(len(h), *(len(r.get(h, "")) for r in rows)) for h in header]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(r.get(h, "").ljust(w) for h, w in zip(header, widths, strict=True)) for r in rows
    ]
    return "\n".join(lines)


def markdown_table(rows: Sequence[Mapping[str, str]]) -> str:
    if not rows:
        return "(no runs)\n"
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r.get(h, "") for h in header) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def by_policy(runs: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    """The runs grouped by policy, policies in order of first appearance."""
    return _grouped(runs, lambda r: r.policy)


def by_workload(runs: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    """The runs grouped by workload (trace variant), in order of first appearance."""
    return _grouped(runs, lambda r: r.workload)


def _grouped(
    runs: Sequence[RunResult], key: Callable[[RunResult], str]
) -> dict[str, list[RunResult]]:
    groups: dict[str, list[RunResult]] = {}
    for r in runs:
        groups.setdefault(key(r), []).append(r)
    return groups


def seeds_table(runs: Sequence[RunResult], paper: Mapping[str, str] | None) -> str:
    """Unallocated GPU % per policy and seed, each policy's mean ± sd, and the paper's FGD."""
    rows: list[dict[str, str]] = []
    for policy, mine in by_policy(runs).items():
        unalloc = {k: [100.0 - r.summary[f"alloc_at_{k}"] for r in mine] for k in (100, 130)}
        rows += [
            {"policy": policy, "seed": str(r.seed), "unalloc@100%": f"{a:.2f}",
             "unalloc@130%": f"{b:.2f}"}
            for r, a, b in zip(mine, unalloc[100], unalloc[130], strict=True)
        ]  # fmt: skip
        rows.append(
            {
                "policy": policy,
                "seed": "mean ± sd",
                **{f"unalloc@{k}%": _mean_sd(v) for k, v in unalloc.items()},
            }
        )
    if paper is not None:
        rows.append(
            {
                "policy": "paper FGD",
                "seed": "10 seeds",
                **{
                    f"unalloc@{k}%": f"{paper[f'unalloc_gpu_pct_at_arrive{k}_mean']} ± "
                    f"{paper[f'unalloc_gpu_pct_at_arrive{k}_std']}"
                    for k in (100, 130)
                },
            }
        )
    return markdown_table(rows)


def standing_table(runs: Sequence[RunResult], paper: Mapping[str, Mapping[str, str]]) -> str:
    """Ours (mean ± sd over the seeds run) and the paper's policies (over its 10 seeds) by
    unallocated GPU % at 130 % arrived, best first, each with its gap to the best."""
    entries: list[tuple[float, dict[str, str]]] = []
    for policy, mine in by_policy(runs).items():
        unalloc = {k: [100.0 - r.summary[f"alloc_at_{k}"] for r in mine] for k in (100, 130)}
        text = {k: _mean_sd(v) if len(v) > 1 else f"{v[0]:.2f}" for k, v in unalloc.items()}
        row = {"policy": f"`{policy}`", "source": "kubedra", "seeds": str(len(mine))}
        entries.append((statistics.mean(unalloc[130]), row | _unalloc_columns(text)))
    for policy, r in paper.items():
        text = {
            k: f"{float(r[f'unalloc_gpu_pct_at_arrive{k}_mean']):.2f} ± "
            f"{float(r[f'unalloc_gpu_pct_at_arrive{k}_std']):.2f}"
            for k in (100, 130)
        }
        row = {"policy": policy, "source": "paper", "seeds": "10"} | _unalloc_columns(text)
        entries.append((float(r["unalloc_gpu_pct_at_arrive130_mean"]), row))
    if not entries:
        return "(no runs)\n"
    best = min(mean for mean, _ in entries)
    entries.sort(key=lambda e: e[0])
    return markdown_table([row | {"gap to best": f"+{mean - best:.2f}"} for mean, row in entries])


def _unalloc_columns(text: Mapping[int, str]) -> dict[str, str]:
    return {f"unalloc@{k}%": text[k] for k in (100, 130)}


def _mean_sd(values: Sequence[float]) -> str:
    if len(values) < 2 or any(math.isnan(v) for v in values):
        return "n/a"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


# The verdict's rule: ours against the paper's FGD, by unallocated GPU % at 130 % arrived.
MEETS, WITHIN_NOISE, MISSES = "meets", "is within noise of", "does NOT meet"


def verdict(mine: Sequence[float], paper_mean: float, paper_sd: float, paper_seeds: int) -> str:
    """MEETS when our mean is at or below the paper's; WITHIN_NOISE when it is above by at
    most two standard errors of the difference of the means (sqrt(sd1²/n1 + sd2²/n2); with
    one seed of ours, the paper's sd stands for ours); MISSES otherwise."""
    ours = statistics.mean(mine)
    if ours <= paper_mean:
        return MEETS
    sd = statistics.stdev(mine) if len(mine) > 1 else paper_sd
    error = math.sqrt(sd**2 / len(mine) + paper_sd**2 / paper_seeds)
    return WITHIN_NOISE if ours - paper_mean <= 2 * error else MISSES
