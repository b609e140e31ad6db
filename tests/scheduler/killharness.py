"""kill -9 at random among writer and scheduler processes sharing one store; after each kill
check, on a consistent snapshot, that:

- the store opens and reads (no damage);
- every write the killed writer saw acknowledged is there (its journal, appended after each
  store call returns, says what; only its one operation in flight may have gone either way);
- no device is allocated to two claims, and every bound pod's claims are allocated on its
  node and reserved for it (`invariants.always`).

At the end (writers done, schedulers settled): every writer's every operation is there, no
reservation outlives its pod (`invariants.settled`), and `kubedra store check` finds nothing.

`python -m tests.scheduler.killharness run --kills 60 --ops 500` prints the figures; the
test runs fewer.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.cluster import SqliteStore, repair
from kubedra.cluster.store import atomic
from kubedra.errors import AlreadyExists, Conflict, KubedraError, NotFound
from kubedra.scheduler.scheduler import Scheduler
from tests.scheduler.cluster import GPU_CLASS, gpu_node, gpu_pod, gpu_template
from tests.scheduler.invariants import always, settled

NODES, GPUS = 8, 4
POLICIES = ("first-fit", "spread")


@dataclass
class KillReport:
    kills: int = 0
    writer_kills: int = 0
    scheduler_kills: int = 0
    acknowledged: int = 0
    bound: int = 0
    violations: list[str] = field(default_factory=list)
    kills_with_violations: int = 0

    def table(self) -> str:
        rows = [
            ("kills survived (all invariants after each)", self.kills - self.kills_with_violations),
            ("kills", self.kills),
            ("  of writers", self.writer_kills),
            ("  of schedulers", self.scheduler_kills),
            ("writes acknowledged", self.acknowledged),
            ("pods bound at the end", self.bound),
            ("invariant violations", len(self.violations)),
        ]
        return "\n".join(f"{name:<45} {value:>8}" for name, value in rows)


# --- the writer ---------------------------------------------------------------------------


def operation(writer: int, index: int) -> tuple[str, str]:
    """The writer's `index`-th operation: create, delete or relabel one of its pods."""
    if index % 4 in (0, 1):
        return "create", f"w{writer}-{index}"
    if index % 4 == 2:
        return "delete", f"w{writer}-{index - 2}"
    return "label", f"w{writer}-{index - 2}"


def run_writer(store_path: str, journal: str, writer: int, ops: int, seed: int) -> None:
    """Do the operations not yet in the journal; append each once the store acknowledged
    it (an operation found done already was done by a run killed before journaling it)."""
    store = SqliteStore(store_path)
    done = len(Path(journal).read_text().splitlines()) if Path(journal).exists() else 0
    rng = random.Random(seed * 1000 + done)
    with open(journal, "a") as log:
        for index in range(done, ops):
            verb, name = operation(writer, index)
            apply_operation(store, verb, name, index)
            log.write(f"{index} {verb} {name}\n")
            log.flush()
            time.sleep(rng.uniform(0.005, 0.03))


def apply_operation(store: SqliteStore, verb: str, name: str, index: int) -> None:
    if verb == "create":
        with contextlib.suppress(AlreadyExists):
            gpu_pod(store, name, template="one" if index % 3 else "two")
    elif verb == "delete":
        with contextlib.suppress(NotFound):
            store.delete(Pod, name)
    else:
        while True:
            pod = store.get(Pod, name)
            meta = msgspec.structs.replace(pod.metadata, labels={"op": str(index)})
            try:
                store.update(msgspec.structs.replace(pod, metadata=meta))
                return
            except Conflict:
                continue  # a scheduler wrote the pod meanwhile


def expected_state(writer: int, acknowledged: int) -> dict[str, str | None]:
    """Pod name -> its `op` label (or "" when unlabelled), None when deleted."""
    state: dict[str, str | None] = {}
    for index in range(acknowledged):
        verb, name = operation(writer, index)
        state[name] = "" if verb == "create" else None if verb == "delete" else str(index)
    return state


def journal_violations(store: SqliteStore, writer: int, journal: Path, ops: int | None) -> list[str]:
    """What an acknowledged write of the writer misses in the store; `ops` given: every
    operation must be acknowledged (at the end), else the one in flight is not checked."""
    acknowledged = len(journal.read_text().splitlines()) if journal.exists() else 0
    problems = [] if ops is None or acknowledged == ops else [f"writer {writer}: {acknowledged}/{ops} done"]
    in_flight = operation(writer, acknowledged)[1] if ops is None else None
    pods = {p.name: p for p in store.list(Pod)}
    for name, label in expected_state(writer, acknowledged).items():
        if name == in_flight:
            continue
        pod = pods.get(name)
        if label is None and pod is not None:
            problems.append(f"writer {writer}: acknowledged delete of {name} undone")
        elif label is not None and pod is None:
            problems.append(f"writer {writer}: acknowledged {name} lost")
        elif label and pod is not None and pod.metadata.labels.get("op") != label:
            problems.append(f"writer {writer}: {name} label {pod.metadata.labels.get('op')} != {label}")
    return problems


# --- the scheduler ------------------------------------------------------------------------


def run_scheduler(store_path: str, policy: str) -> None:
    scheduler = Scheduler(SqliteStore(store_path), policy)
    while True:
        if not scheduler.run_once():
            time.sleep(0.05)


# --- the orchestrator ---------------------------------------------------------------------


@dataclass
class Proc:
    role: str  # "writer" or "scheduler"
    args: list[str]
    popen: subprocess.Popen[bytes] | None = None

    def start(self, log: Path) -> None:
        with open(log, "ab") as out:
            command = [sys.executable, "-m", "tests.scheduler.killharness", self.role, *self.args]
            self.popen = subprocess.Popen(command, stdout=out, stderr=out)

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


def make_cluster(path: Path) -> None:
    store = SqliteStore(path)
    store.create(decode_object(GPU_CLASS).obj)
    for n in range(NODES):
        gpu_node(store, f"node-{n}", gpus=GPUS)
    gpu_template(store, "one", 1)
    gpu_template(store, "two", 2)
    store.close()


def snapshot_violations(path: Path) -> list[str]:
    """The instant invariants on one consistent snapshot (a transaction holds writers off)."""
    return _on_store(path, lambda store: _atomically(store, always))


def _atomically(store: SqliteStore, check: Callable[[SqliteStore], list[str]]) -> list[str]:
    with atomic(store):
        return check(store)


def _on_store(path: Path, check: Callable[[SqliteStore], list[str]]) -> list[str]:
    try:
        store = SqliteStore(path)
    except KubedraError as err:
        return [f"store unusable: {err}"]
    try:
        return check(store)
    except KubedraError as err:
        return [f"store unusable: {err}"]
    finally:
        store.close()


def run_kills(workdir: Path, kills: int, ops: int, seed: int = 25, writers: int = 4) -> KillReport:
    path, log = workdir / "state.db", workdir / "processes.log"
    make_cluster(path)
    rng = random.Random(seed)
    journals = [workdir / f"writer-{w}.journal" for w in range(writers)]
    procs = [Proc("writer", [str(path), str(journals[w]), str(w), str(ops), str(seed)]) for w in range(writers)]
    procs += [Proc("scheduler", [str(path), policy]) for policy in POLICIES]
    report = KillReport()
    try:
        for proc in procs:
            proc.start(log)
        while report.kills < kills:
            time.sleep(rng.uniform(0.05, 0.4))
            victim = rng.choice([p for p in procs if p.running] or procs)
            victim.kill()
            report.kills += 1
            problems = snapshot_violations(path)
            if victim.role == "writer":
                report.writer_kills += 1
                writer = int(victim.args[2])
                problems += _on_store(path, lambda store, w=writer: journal_violations(store, w, journals[w], None))
            else:
                report.scheduler_kills += 1
            report.violations += [f"after kill {report.kills} ({victim.role}): {p}" for p in problems]
            report.kills_with_violations += bool(problems)
            victim.start(log)  # a writer that had finished exits at once
        for proc in procs:
            if proc.role == "writer" and proc.popen is not None and proc.popen.wait(timeout=300) != 0:
                report.violations.append(f"writer {proc.args[2]} failed: {log.read_text()[-2000:]}")
        _settle(path)
    finally:
        for proc in procs:
            proc.kill()
    report.violations += _final_violations(path, journals, ops)
    report.acknowledged = sum(len(j.read_text().splitlines()) for j in journals if j.exists())
    report.bound = len(_on_store(path, lambda store: [p.name for p in store.list(Pod) if p.spec.node_name]))
    return report


def _settle(path: Path, quiet_s: float = 1.0, limit_s: float = 120.0) -> None:
    """Wait until the schedulers stop writing (the store's resourceVersion holds still)."""
    store = SqliteStore(path)
    deadline = time.monotonic() + limit_s
    last = -1
    while time.monotonic() < deadline:
        now = store.resource_version()
        if now == last:
            break
        last = now
        time.sleep(quiet_s)
    store.close()


def _final_violations(path: Path, journals: list[Path], ops: int) -> list[str]:
    """With every process gone: one more scheduler pass (releases what killed schedulers
    left reserved), then everything must hold."""
    def check(store: SqliteStore) -> list[str]:
        scheduler = Scheduler(store)
        scheduler.run_once()
        scheduler.run_once()
        problems = always(store) + settled(store)
        for writer, journal in enumerate(journals):
            problems += journal_violations(store, writer, journal, ops)
        return problems

    problems = [f"at the end: {p}" for p in _on_store(path, check)]
    return problems + [f"store check: {p}" for p in repair.check(path).problems]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role")
    run = sub.add_parser("run")
    run.add_argument("--kills", type=int, default=60)
    run.add_argument("--ops", type=int, default=500)
    run.add_argument("--seed", type=int, default=25)
    writer = sub.add_parser("writer")
    for name in ("store", "journal", "writer", "ops", "seed"):
        writer.add_argument(name)
    scheduler = sub.add_parser("scheduler")
    scheduler.add_argument("store")
    scheduler.add_argument("policy")
    args = parser.parse_args()
    if args.role == "writer":
        run_writer(args.store, args.journal, int(args.writer), int(args.ops), int(args.seed))
    elif args.role == "scheduler":
        run_scheduler(args.store, args.policy)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="kd-store-kill-", dir="/tmp"))
        try:
            start = time.monotonic()
            report = run_kills(workdir, args.kills, args.ops, args.seed)
            print(report.table())
            print(f"{'seconds':<45} {time.monotonic() - start:>8.0f}")
            for violation in report.violations:
                print("VIOLATION", violation)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
