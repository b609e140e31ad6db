"""`python -m bench.mig_placement --quick` runs (small sizes) and ends with its JSON line;
the static layouts and the unconstrained reference are what they claim; bench_mig gives its rows."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench import harness, mig_placement
from kubedra.allocator import Inventory, NodeInfo
from kubedra.scheduler.policies.partitions import Model, Shape


def run_main(*argv: str) -> list[str]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert mig_placement.main(list(argv)) == 0
    return out.getvalue().splitlines()


def test_quick_mode_runs_and_its_last_line_is_the_json(tmp_path: Path) -> None:
    lines = run_main("--quick", "--gpus", "8", "--arrivals", "120", "--plot", str(tmp_path / "p.png"))
    last = json.loads(lines[-1])
    assert set(last) == {"kubedra", "first_fit", "static"}
    assert all(isinstance(v, int) and 0 < v <= 120 for v in last.values())
    text = "\n".join(lines)
    assert "first fit (upstream) (seed 0): " in text  # the oracle, or FALLBACK and why
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_without_go_first_fit_falls_back_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mig_placement, "oracle_unavailable", lambda: "no Go here")
    lines = run_main("--quick", "--gpus", "4", "--arrivals", "40")
    assert any("FALLBACK: kubedra's allocator in first-fit mode (no Go here)" in x for x in lines)
    json.loads(lines[-1])


def shape() -> Shape:
    slices, nodes = mig_placement.build_cluster(1)
    model = Model(Inventory.build(slices), [NodeInfo(n.name, {}) for n in nodes])
    (only,) = model.shapes
    return only


def test_static_layouts_are_legal_and_follow_the_mix() -> None:
    s = shape()
    balanced = mig_placement.arrange(s, mig_placement.ALL_BALANCED)
    assert balanced is not None and sorted(s.kinds[d] for d in balanced) == sorted(
        mig_placement.ALL_BALANCED
    )
    layouts = mig_placement.static_layouts(20, s, mig_placement.MIX)
    for layout in layouts:
        assert min(s.after(layout)) >= 0  # the counters hold every layout
    made = [s.kinds[d] for layout in layouts for d in layout]
    assert set(made) == set(mig_placement.MIX)
    assert made.count("1g.10gb") > made.count("7g.80gb")


def test_stream_is_seeded_and_without_placement_rules_more_fits() -> None:
    a = mig_placement.stream(3, 8, 200, 1.0)
    assert a == mig_placement.stream(3, 8, 200, 1.0) != mig_placement.stream(4, 8, 200, 1.0)
    assert {r.kind for r in a} <= set(mig_placement.MIX)
    unconstrained = mig_placement.run_unconstrained(a, 8)
    s = shape()
    static = mig_placement.run_static(a, s, mig_placement.static_layouts(8, s, mig_placement.MIX))
    assert unconstrained.accepted >= static.accepted


def test_bench_mig_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import bench_mig

    monkeypatch.setenv(harness.QUICK_ENV, "1")
    monkeypatch.setattr(bench_mig, "GPUS", 64)
    rows = bench_mig.run()
    assert [r.name for r in rows] == [
        "placement per claim, 64 MIG GPUs (mig-aware)",
        "placement per claim, 64 MIG GPUs (first-fit)",
    ]
    assert all(r.value > 0 and r.unit == "ms/claim" for r in rows)
