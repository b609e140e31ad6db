"""How fast the `kubedra` command answers, as a user types it (a new process each time).

Target (issue 38): under 150 ms for `get`, `describe`, `--help` and shell completion on a
small embedded store (kubectl answers in about 0.1 s). Each command runs as the console
script does, `python -m kubedra`, median of interleaved runs; `python -c pass` is the floor
(the interpreter's own start) and is printed beside them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import Row, sized

RUNS = sized(15, 3)
TARGET_S = 0.150
COMMANDS = {
    "get pods": ["get", "pods"],
    "get rc -o wide": ["get", "rc", "-o", "wide"],
    "describe node": ["describe", "node", "h100x8-0"],
    "--help": ["--help"],
}


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=False)
    return time.perf_counter() - start


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="kubedra-bench-cli-") as folder:
        store = str(Path(folder) / "state.db")
        env = {**os.environ, "KUBEDRA_STORE": store}
        base = [sys.executable, "-m", "kubedra"]
        subprocess.run([*base, "cluster", "create", "--node-profile", "h100x8=2"], env=env,
                       capture_output=True, check=True)  # fmt: skip
        subprocess.run([*base, "apply", "-f", "examples/seed"], env=env, capture_output=True,
                       check=True)  # fmt: skip
        complete = {**env, "_KUBEDRA_COMPLETE": "bash_complete", "COMP_WORDS": "kubedra get po",
                    "COMP_CWORD": "2"}  # fmt: skip
        runs: dict[str, list[float]] = {name: [] for name in [*COMMANDS, "completion", "floor"]}
        for _ in range(RUNS):  # interleaved: a slow moment of the machine hits every command
            for name, args in COMMANDS.items():
                runs[name].append(_time([*base, *args], env))
            runs["completion"].append(_time(base, complete))
            runs["floor"].append(_time([sys.executable, "-c", "pass"], env))
    rows = []
    for name, times in runs.items():
        median = statistics.median(times)
        if name == "floor":
            rows.append(Row("cli", "python -c pass (the floor)", median * 1e3, "ms"))
            continue
        rows.append(Row("cli", f"kubedra {name}", median * 1e3, "ms", "< 150 ms",
                        median < TARGET_S, f"median of {len(times)}"))  # fmt: skip
    return rows
