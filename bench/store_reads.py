"""Read-only command latency on the embedded store while writers are busy, in own processes.

    python -m bench.store_reads WRITERS SECONDS   -> one JSON line of measurements

WRITERS processes apply batches back to back (one transaction of 50 updates each, as
`kubedra apply` writes a directory). Meanwhile this process does what a read-only command
does with the store, over and over: open it, get one object, list a kind, close it. A
second measure runs the real `kubedra get node NAME` as a subprocess (Python start-up
included). The kubedra measured is the one on PYTHONPATH, so an older tree can be measured
the same way (see bench_store.py).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.core import Node
from kubedra.api.meta import ObjectMeta
from kubedra.cluster import SqliteStore

OBJECTS = 500
BATCH = 50
CLI_RUNS = 12


def populate(path: Path) -> None:
    store = SqliteStore(path)
    with store.transaction():
        for i in range(OBJECTS):
            store.create(Node(metadata=ObjectMeta(name=f"node-{i:04d}", labels={"v": "0"})))
    store.close()


def write_forever(path: str, writer: int) -> None:
    """Apply-like batches back to back: each holds the write lock for its whole transaction."""
    store = SqliteStore(path)
    version = 0
    while True:
        version += 1
        with store.transaction():
            for i in range(BATCH):
                name = f"node-{(writer * BATCH + i) % OBJECTS:04d}"
                node = store.get(Node, name)
                meta = msgspec.structs.replace(node.metadata, labels={"v": str(version)})
                store.update(msgspec.structs.replace(node, metadata=meta))


def read_once(path: Path) -> float:
    start = time.perf_counter()
    store = SqliteStore(path)
    store.get(Node, "node-0001")
    store.list(Node)
    store.close()
    return time.perf_counter() - start


def cli_once(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kubedra", "--store", str(path), "get", "node", "node-0001"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return time.perf_counter() - start


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "mean_ms": 1e3 * statistics.fmean(ordered),
        "p50_ms": 1e3 * statistics.median(ordered),
        "p90_ms": 1e3 * ordered[int(0.9 * (len(ordered) - 1))],
        "max_ms": 1e3 * ordered[-1],
    }


def measure(writers: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kd-bench-reads-") as tmp:
        path = Path(tmp) / "state.db"
        populate(path)
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.store_reads", "--write", str(path), str(w)]
            )
            for w in range(writers)
        ]
        try:
            time.sleep(1.0 if writers else 0)  # the writers are under way
            reads, deadline = [], time.monotonic() + seconds
            while time.monotonic() < deadline:
                reads.append(read_once(path))
            cli = [cli_once(path) for _ in range(CLI_RUNS)]
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    return {"writers": writers, "open_get_list": summary(reads), "cli_get": summary(cli)}


def main(argv: list[str]) -> None:
    if argv[0] == "--write":
        write_forever(argv[1], int(argv[2]))
        return
    print(json.dumps(measure(int(argv[0]), float(argv[1]))))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
