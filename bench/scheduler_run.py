"""One end-to-end scheduling run, in its own process (so peak RSS is this run's alone).

    python -m bench.scheduler_run NODES PODS POLICY [STORE] [--profile FILE]
                                                              -> one JSON line of measurements
    python -m bench.scheduler_run NODES PODS --prepare STORE  -> the populated store, saved

`--profile FILE`: the scheduling phase (only it: not opening the store) under cProfile,
its stats dumped to FILE for `pstats`; the timers of the split are left out then, so that
the profile shows the cycle, not the wrappers. Rates measured so are not comparable with
unprofiled ones.

With STORE, the run schedules a copy of a store populated once (`--prepare`) instead of
populating its own: the policies of one size then start from the same file, and populating
5,000 nodes and 40,000 pods (minutes) is paid once per size, not once per policy. Peak RSS
then counts opening the store and scheduling, not populating it.

Nodes are 8-GPU catalog profiles (H100, H200, A100-80GB, B200 in turn, each with its RDMA
NICs) whose slices the simulated driver would publish; every pod asks for one device of the
seed's class through a ResourceClaimTemplate, so each pod also creates its claim.
"""

from __future__ import annotations

import cProfile
import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubedra.api.codec import decode_object
from kubedra.api.loader import load
from kubedra.catalog import profile
from kubedra.cel.selector import CompiledSelector
from kubedra.cluster import SqliteStore
from kubedra.scheduler.plugins.dra import plugin as dra_plugin
from kubedra.scheduler.policies import POLICIES
from kubedra.scheduler.scheduler import Scheduler

PROFILES = ("h100x8", "h200x8", "a100-80x8", "b200x8")
SEED_CLASS = (
    Path(__file__).resolve().parents[1] / "examples/seed/01-deviceclass-high-memory-gpu.yaml"
)
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "high-memory-gpu"}}]
            }
        }
    },
}


def populate(store: SqliteStore, nodes: int, pods: int) -> None:
    from kubedra.driver.publisher import publish

    with store.transaction():
        for i in range(nodes):
            prof, name = profile(PROFILES[i % len(PROFILES)]), f"node-{i:05d}"
            store.create(prof.node(name))
            for inventory in prof.inventories(name):
                publish(store, inventory, name)
        for loaded in load([str(SEED_CLASS)]):
            store.create(loaded.obj)
        store.create(decode_object(TEMPLATE).obj)
        for i in range(pods):
            store.create(
                decode_object(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": f"pod-{i:06d}", "namespace": "default"},
                        "spec": {
                            "resourceClaims": [
                                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
                            ],
                            "containers": [
                                {"name": "vllm", "resources": {"claims": [{"name": "gpu"}]}}
                            ],
                        },
                    }
                ).obj
            )


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM starts afresh at exec; ru_maxrss would also count
    the parent's memory at fork time on Linux (the bench runner holds large inputs)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Timers:
    """Wall time spent inside selected functions (re-entrant calls counted once)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._depth: dict[str, int] = {}

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = self._depth.get(label, 0)
            self._depth[label] = depth + 1
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._depth[label] = depth
                if depth == 0:
                    self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start

        setattr(owner, attr, timed)

    def wrap_context(self, owner: Any, attr: str, label: str) -> None:
        """A method returning a context manager: its entering and leaving are timed (a
        transaction's BEGIN and COMMIT), not the block it runs."""
        original: Callable[..., Any] = getattr(owner, attr)
        timers = self

        class Timed:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def __enter__(self) -> Any:
                return timers.timed(label, self.inner.__enter__)

            def __exit__(self, *exc: Any) -> Any:
                return timers.timed(label, lambda: self.inner.__exit__(*exc))

        setattr(owner, attr, lambda *args, **kwargs: Timed(original(*args, **kwargs)))

    def timed(self, label: str, call: Callable[[], Any]) -> Any:
        """`call()`, its time counted under `label` unless a call of it is running."""
        depth = self._depth.get(label, 0)
        if depth:
            return call()
        self._depth[label] = 1
        start = time.perf_counter()
        try:
            return call()
        finally:
            self._depth[label] = 0
            self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start


def prepare(nodes: int, pods: int, saved: Path) -> None:
    store = SqliteStore(Path(tempfile.mkdtemp()) / "state.db")
    populate(store, nodes, pods)
    store.backup_to(saved)
    store.close()


def open_store(nodes: int, pods: int, saved: Path | None) -> SqliteStore:
    """A store holding the workload: a copy of `saved`, else populated here."""
    path = Path(tempfile.mkdtemp()) / "state.db"
    if saved is not None:
        shutil.copyfile(saved, path)
        return SqliteStore(path)
    store = SqliteStore(path)
    populate(store, nodes, pods)
    return store


def main(
    nodes: int, pods: int, policy: str, saved: Path | None = None, profile: Path | None = None
) -> dict[str, Any]:
    store = open_store(nodes, pods, saved)
    timers = Timers()
    if profile is None:
        # pods/binding is a store write too, and so are a transaction's BEGIN and COMMIT
        # (the commit writes the pages out): the split counted none of them before
        for method in ("get", "list", "create", "update", "update_status", "changes", "bind"):
            timers.wrap(SqliteStore, method, "store")
        timers.wrap_context(SqliteStore, "transaction", "store")
        timers.wrap(dra_plugin, "allocate", "allocator")
        timers.wrap(CompiledSelector, "evaluate", "cel")
        for method in ("prepare", "rank_nodes", "device_orders", "score"):
            timers.wrap(POLICIES[policy], method, "policy")
    latencies: list[float] = []
    original = Scheduler.schedule

    def schedule(self: Scheduler, pod: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, pod)
        finally:
            latencies.append(time.perf_counter() - start)

    Scheduler.schedule = schedule  # type: ignore[method-assign]
    sched = Scheduler(store, policy, freeze_loaded=True)  # as `kubedra scheduler run`
    profiler = cProfile.Profile() if profile is not None else None
    start, cpu = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    outcomes = sched.run_once()
    if profiler is not None:
        profiler.disable()
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    if profiler is not None and profile is not None:
        profiler.dump_stats(str(profile))
    latencies.sort()
    return {
        "nodes": nodes,
        "pods": pods,
        "policy": policy,
        "placed": sum(1 for o in outcomes if o.node),
        "seconds": total,
        "pods_per_s": len(outcomes) / total,
        "cpu_pods_per_s": len(outcomes) / cpu,
        "p50_ms": latencies[len(latencies) // 2] * 1e3,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1e3,
        "peak_rss_mb": peak_rss_mb(),
        "split": {k: v / total for k, v in timers.seconds.items()},
    }


def _options(argv: list[str]) -> tuple[list[str], Path | None]:
    """The positional arguments, and the file of `--profile FILE` (None without it)."""
    if "--profile" not in argv:
        return argv, None
    at = argv.index("--profile")
    if at + 1 >= len(argv):
        raise SystemExit("--profile needs a FILE")
    return argv[:at] + argv[at + 2 :], Path(argv[at + 1])


if __name__ == "__main__":
    args, profile_to = _options(sys.argv[1:])
    size, what, store_path = (int(args[0]), int(args[1])), args[2], args[3:]
    if what == "--prepare":
        prepare(*size, Path(store_path[0]))
    else:
        saved_store = Path(store_path[0]) if store_path else None
        print(json.dumps(main(*size, what, saved_store, profile_to)))
