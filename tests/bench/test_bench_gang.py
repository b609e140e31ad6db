"""bench_gang on a small cluster: its background load leaves domains that differ, every
case binds the whole gang (in one domain when it asks for one), and it gives its rows."""

from __future__ import annotations

import pytest

from bench import bench_gang, harness


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    monkeypatch.setattr(bench_gang, "NODES", 264)  # 8 racks, 2 blocks and 8 nodes more
    monkeypatch.setattr(bench_gang, "GANG", 8)
    monkeypatch.setattr(bench_gang, "REPEATS", 1)


@pytest.mark.usefixtures("small")
def test_the_background_load_makes_racks_differ() -> None:
    free = bench_gang.domains()
    racks = {label: f for label, (f, _) in free.items() if label.startswith("rack")}
    assert len(racks) == 9 and racks["rack-008"] == 0  # the short rack is full
    assert len(set(racks.values())) == 9
    blocks = {label: whole for label, (_, whole) in free.items() if label.startswith("block")}
    assert blocks == {"block-000": 40, "block-001": 72, "block-002": 0}


@pytest.mark.usefixtures("small")
def test_rows_for_every_case() -> None:
    rows = bench_gang.run()
    names = [r.name for r in rows]
    assert names == [
        f"8 pods x {gpus} GPU, 264 nodes: {case}"
        for gpus, where in ((1, "rack"), (8, "block"))
        for case in (
            "pod by pod",
            "gang",
            "gang, vs pod by pod",
            f"gang, one {where}",
            f"gang, one {where}, vs pod by pod",
        )
    ]
    for row in rows:
        assert row.value > 0 and row.unit == ("x" if "vs pod by pod" in row.name else "ms")
        if row.unit == "ms":
            assert "8/8 bound" in row.note, row
    one_domain = [r for r in rows if "one " in r.name and r.unit == "ms"]
    assert all("in 1 rack(s)" in r.note or "in 1 block(s)" in r.note for r in one_domain)
