"""Read-only command latency on the embedded store while 0, 1, 2 and 4 writers are busy.

Target (store issue): reads do not queue behind writers, so a read-only command's latency
(p90: queueing shows in the tail) stays near its idle value however many writers run. Set
KUBEDRA_BENCH_BASELINE_SRC to the `src` directory of another kubedra tree (e.g. from
`git archive 0ed019b src | tar -x -C /tmp/old`) to measure it the same way, side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from bench.harness import Row, sized

WRITERS = (0, 1, 2, 4)
SECONDS = sized(6.0, 1.0)


def measure(writers: int, src: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, os.getcwd()])
    out = subprocess.run(
        [sys.executable, "-m", "bench.store_reads", str(writers), str(SECONDS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
        env=env,
    )
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def run() -> list[Row]:
    trees = [("", None)]
    baseline = os.environ.get("KUBEDRA_BENCH_BASELINE_SRC")
    if baseline:
        trees.append((" (baseline)", baseline))
    rows = []
    for label, src in trees:
        for writers in WRITERS:
            m = measure(writers, src)
            reads, cli = m["open_get_list"], m["cli_get"]
            rows.append(
                Row(
                    "store",
                    f"open+get+list, {writers} writer(s) busy{label}",
                    reads["p90_ms"],
                    "ms p90",
                    target="near idle" if writers else "",
                    note=(
                        f"p50 {reads['p50_ms']:.1f}, mean {reads['mean_ms']:.1f}, max "
                        f"{reads['max_ms']:.0f} ms ({reads['n']} reads in {SECONDS:.0f} s); "
                        f"`kubedra get` p50 {cli['p50_ms']:.0f}, max {cli['max_ms']:.0f} ms"
                    ),
                )
            )
    return rows
