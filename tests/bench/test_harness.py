"""`python -m bench`: a progress line per module with an ETA from the last run, and a quick
mode that every module sees through the harness."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import bench.__main__ as bench_main
import pytest

from bench import harness


def test_eta_from_the_last_run() -> None:
    last = {"bench_a": 30.0, "bench_b": 90.0}
    assert bench_main.eta([], last) == ""
    assert bench_main.eta(["bench_a", "bench_b"], last) == ", ETA 2 min 00 s"
    assert bench_main.eta(["bench_b", "bench_new"], last) == ", ETA 1 min 30 s + 1 module(s) never timed"
    assert bench_main.eta(["bench_new"], {}) == ", 1 module(s) to go (no earlier run to estimate from)"


def test_quick_mode_shrinks_workloads_and_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setenv(harness.QUICK_ENV, "0")
    assert harness.sized(5000, 500) == 5000
    harness.per_call(lambda: calls.append(1), 100, repeat=3)
    assert len(calls) == 300
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    calls.clear()
    assert harness.sized(5000, 500) == 500 and harness.sized(6.0, 1.0) == 1.0
    harness.per_call(lambda: calls.append(1), 100, repeat=3)
    assert len(calls) == 10
    table = harness.format_table([harness.Row("g", "n", 1.0, "s", "< 2 s", True)])
    assert table.startswith("QUICK MODE:") and " yes" not in table  # targets not judged


def test_a_line_per_module_with_times_and_eta(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_main, "DURATIONS", tmp_path / "durations.json")
    monkeypatch.setenv(harness.QUICK_ENV, "0")  # main sets it; undone after the test
    err = io.StringIO()
    assert bench_main.main(["--quick", "allocator"], err=err) == 0
    lines = err.getvalue().splitlines()
    assert lines[0] == "bench: [1/1] bench_allocator ..."
    # a heartbeat every HEARTBEAT_S while it runs (a cold machine builds the Go oracle here)
    for line in lines[1:-1]:
        assert re.fullmatch(r"bench: \[1/1\] bench_allocator still running \(.+\)", line)
    assert re.fullmatch(r"bench: \[1/1\] bench_allocator done in (\d+ min )?\d+ s; "
                        r"elapsed (\d+ min )?\d+ s", lines[-1])
    assert capsys.readouterr().out.startswith("QUICK MODE:")
    saved = json.loads((tmp_path / "durations.json").read_text())
    assert list(saved) == ["quick"] and "bench_allocator" in saved["quick"]
    err = io.StringIO()
    bench_main.main(["--quick", "allocator"], err=err)
    assert err.getvalue().splitlines()[0].startswith("bench: [1/1] bench_allocator ... (last run: ")
