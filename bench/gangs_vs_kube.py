"""Gangs on the dev cluster: kubedra vs kube-scheduler v1.37.2's own gang scheduling.

`python -m bench.gangs_vs_kube [--settle S] [--only ID,...] [--json PATH] [--logs DIR [-v|-vv]]`
runs each scenario of `SCENARIOS` under each scheduler and prints one table; `--logs` keeps
each run's cluster folder (the components' logs, kubedra's `kubedra.log`) under DIR, and
`-v`/`-vv` make kubedra's scheduler log at INFO/DEBUG (`-vv`: every API call too), each
line with its wall-clock time, to find what a slow placement waited on. Not a `bench_` module
(the benchmark runner does not pick it up): run by hand, and in part by
tests/e2e/test_gangs_vs_kube.py.

Method, for each scheduler in turn:
- a fresh dev cluster (etcd, kube-apiserver, kube-controller-manager v1.37.2) with the
  workload gates on (`WORKLOAD_FEATURE_GATES`: GenericWorkload, DRAWorkloadResourceClaims,
  TopologyAwareWorkloadScheduling), so that the API serves PodGroups, the resourceclaim
  controller makes PodGroup claims, and kube-scheduler enables its GangScheduling,
  TopologyPlacementGenerator and PodGroupPodsCount plugins;
- the scheduler: kube-scheduler (started with the cluster, the same gates; pods name
  `default-scheduler`), or `kubedra scheduler run` (default policy, pods name `kubedra`;
  no kube-scheduler runs then);
- every scenario's nodes made first (kubelet-less h100x8 nodes, 8 GPUs each, slices
  published by the simulated driver), each scenario in its own pool (a node label its
  pods select) and namespace, so that scenarios do not share devices;
- then one scenario after the other: its PodGroups, then its pods (members of a gang
  with `delay` are made that many seconds apart), then wait until every pod is bound or no
  pod was bound for `settle` seconds; then measure:
  * per group: pods bound / pods (minCount), all / gang (>= minCount, not all) / partial
    (0 < bound < minCount) / none;
  * time from the last member's creation (its create call's return) to the last binding
    of the group (the watch's view), for groups that reached minCount;
  * GPUs held idle by half-placed gangs: devices in allocated claims of a gang that has
    fewer than minCount pods bound (its members' claims and its PodGroup claims, bound
    pods or not) -- must be 0 for kubedra;
  * the PodGroup's PodGroupInitiallyScheduled condition (status/reason);
  * the nodes (and racks) the group's pods went to;
  and the scenario's pods left unbound are deleted, so that they do not keep a scheduler
  busy during the next scenarios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.harness import free_port, wait_ready
from kubedra.api.core import Namespace, Pod
from kubedra.api.gates import WORKLOAD_FEATURE_GATES
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import ResourceClaim
from kubedra.api.scheduling import PodGroup
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster, _alive
from kubedra.devcluster.workload import (
    BindingClock,
    claim_pod,
    gpu_class,
    gpu_nodes,
    gpu_template,
    group_pod,
    pod_group,
)
from kubedra.errors import KubedraError

POOL = "bench.kubedra.io/pool"
RACK = "topology.kubernetes.io/rack"
GPUS_PER_NODE = 8  # h100x8
SCHEDULERS = ("kube-scheduler", "kubedra")
TEMPLATES = (1, 2, 4, 8)  # template `gpu<n>`: n GPUs


@dataclass(frozen=True)
class Group:
    name: str
    pods: int
    gpus: int  # per pod (its own claim), 0 with a PodGroup claim only
    min_count: int | None  # None: the basic policy
    key: str = ""  # topology key
    group_claim: int = 0  # GPUs of a PodGroup claim `gpus` (KEP-5729), shared by the pods
    delay: float = 0.0  # seconds between its members' creation


@dataclass(frozen=True)
class Single:
    name: str
    gpus: int


@dataclass(frozen=True)
class Scenario:
    id: str
    what: str
    racks: tuple[tuple[str, int], ...]  # (rack, nodes); rack "" = no rack label
    groups: tuple[Group, ...]
    singles: tuple[Single, ...] = ()
    singles_first: bool = False  # the single pods made before the groups' pods


def _gang(name: str, pods: int, gpus: int, **kw: object) -> Group:
    return Group(name, pods, gpus, pods, **kw)  # type: ignore[arg-type]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("fits", "gang 4x2 GPUs on 2 nodes (16)", (("", 2),), (_gang("g", 4, 2),)),
    Scenario(
        "one-rack",
        "gang 3x4 (12), topology rack; rack-a 8 GPUs, rack-b 16: fits only rack-b",
        (("rack-a", 1), ("rack-b", 2)),
        (_gang("g", 3, 4, key=RACK),),
    ),
    Scenario(
        "best-fit-rack",
        "gang 2x4 (8), topology rack; rack-a 8 GPUs, rack-b 16: fits both",
        (("rack-a", 1), ("rack-b", 2)),
        (_gang("g", 2, 4, key=RACK),),
    ),
    Scenario(
        "competing",
        "two gangs 3x4 (12 each) at once on 2 nodes (16): each fits alone",
        (("", 2),),
        (_gang("a", 3, 4), _gang("b", 3, 4)),
    ),
    Scenario(
        "larger-than-domain",
        "gang 3x4 (12), topology rack; 2 racks of 8 GPUs (cluster 16)",
        (("rack-a", 1), ("rack-b", 1)),
        (_gang("g", 3, 4, key=RACK),),
    ),
    Scenario(
        "larger-than-cluster",
        "gang 3x8 (24) on 2 nodes (16)",
        (("", 2),),
        (_gang("g", 3, 8),),
    ),
    Scenario(
        "group-claim",
        "gang of 3 sharing one PodGroup claim of 2 GPUs (template), 2 nodes",
        (("", 2),),
        (_gang("g", 3, 0, group_claim=2),),
    ),
    Scenario(
        "singles-first",
        "2 single pods x4 made first, then gang 4x4 (16) on 2 nodes (16)",
        (("", 2),),
        (_gang("g", 4, 4),),
        (Single("s0", 4), Single("s1", 4)),
        singles_first=True,
    ),
    Scenario(
        "singles-after",
        "gang 3x4 (12) made first, then 2 single pods x4, on 2 nodes (16)",
        (("", 2),),
        (_gang("g", 3, 4),),
        (Single("s0", 4), Single("s1", 4)),
    ),
    Scenario(
        "over-time",
        "gang 4x2, members made 3 s apart, 2 nodes",
        (("", 2),),
        (_gang("g", 4, 2, delay=3.0),),
    ),
    Scenario(
        "min-below-pods",
        "gang minCount 2 of 4 pods x4 on 1 node (8)",
        (("", 1),),
        (Group("g", 4, 4, 2),),
    ),
    Scenario(
        "basic-group",
        "basic PodGroup, 3 pods x4 on 1 node (8)",
        (("", 1),),
        (Group("g", 3, 4, None),),
    ),
)


@dataclass
class GroupResult:
    scenario: str
    scheduler: str
    group: str
    pods: int
    min_count: int | None
    bound: int = 0
    outcome: str = ""  # all / gang / partial / none / single
    seconds: float | None = None  # last member created -> last binding (placed groups)
    span: float | None = None  # first member created -> last binding (placed groups)
    idle_gpus: int = 0  # allocated to a gang below minCount
    condition: str = ""
    nodes: list[str] = field(default_factory=list)
    racks: list[str] = field(default_factory=list)


def _outcome(bound: int, pods: int, min_count: int | None) -> str:
    if bound == 0:
        return "none"
    if bound == pods:
        return "all"
    if min_count is None or bound >= min_count:
        return "gang" if min_count is not None else "some"
    return "partial"


class Session:
    """One fresh dev cluster with the workload gates and one scheduler on it."""

    def __init__(self, scheduler: str, folder: Path, verbosity: int = 0) -> None:
        self.scheduler = scheduler
        self.folder = folder
        self.verbosity = verbosity
        self.cluster = DevCluster(
            folder,
            kube_scheduler=scheduler == "kube-scheduler",
            feature_gates=WORKLOAD_FEATURE_GATES,
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.cluster.up()
        self.store: KubeStore = self.cluster.store(qps=-1)
        self.clock = BindingClock(self.store)

    @property
    def name(self) -> str:
        return "default-scheduler" if self.scheduler == "kube-scheduler" else "kubedra"

    def start_kubedra(self) -> None:
        port = free_port()
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        env.pop("KUBEDRA_STORE", None)
        log = open(self.folder / "kubedra.log", "wb")  # noqa: SIM115 (the child's)
        verbose = ["-" + "v" * self.verbosity] if self.verbosity else []
        self.process = subprocess.Popen(
            [sys.executable, "-c", _TIMESTAMPED_KUBEDRA, *verbose, "scheduler", "run",
             "--no-leader-elect", "--metrics-address", "127.0.0.1", "--metrics-port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        ready = f"http://127.0.0.1:{port}/readyz"
        wait_ready(self.process, ready, self.log_tail, "kubedra scheduler")

    def log_tail(self, lines: int = 20) -> str:
        name = "kubedra.log" if self.process else "logs/kube-scheduler.log"
        path = self.folder / name
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        assert self.cluster.state is not None
        pid = self.cluster.state.processes.get("kube-scheduler", 0)
        return bool(pid) and _alive(pid)

    def close(self) -> None:
        self.clock.close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.store.close()
        self.cluster.down()

    # --- the workload ---------------------------------------------------------------

    def prepare(self, scenarios: Sequence[Scenario]) -> None:
        """Every scenario's nodes, namespace and templates, before the scheduler runs."""
        self.store.create(gpu_class())
        for sc in scenarios:
            ns = _namespace(sc)
            self.store.create(Namespace(metadata=ObjectMeta(name=ns)))
            for n in TEMPLATES:
                self.store.create(gpu_template(f"gpu{n}", n, namespace=ns))
            for rack, count in sc.racks:
                labels = {POOL: _namespace(sc)} | ({RACK: rack} if rack else {})
                gpu_nodes(self.store, count, prefix=f"{ns}-{rack or 'n'}", labels=labels)

    def run(self, sc: Scenario, settle: float) -> list[GroupResult]:
        ns = _namespace(sc)
        selector = {POOL: ns}
        created: dict[str, float] = {}  # namespace/pod -> when its create returned

        def make(pod: Pod) -> None:
            self.store.create(pod)
            created[f"{ns}/{pod.name}"] = time.monotonic()

        for g in sc.groups:
            claims = (("gpus", f"gpu{g.group_claim}"),) if g.group_claim else ()
            self.store.create(pod_group(g.name, g.min_count, namespace=ns,
                                        topology_key=g.key, claims=claims))
        singles = [claim_pod(s.name, f"gpu{s.gpus}", self.name, namespace=ns,
                             node_selector=selector) for s in sc.singles]
        members = {g.name: [group_pod(f"{g.name}-{i}", g.name, f"gpu{g.gpus or g.group_claim}",
                                      self.name, namespace=ns, node_selector=selector)
                            for i in range(g.pods)] for g in sc.groups}
        if sc.singles_first:
            for pod in singles:
                make(pod)
        # groups' members interleaved (competing gangs arrive together); a delayed group's
        # members `delay` apart
        width = max(g.pods for g in sc.groups)
        for i in range(width):
            for g in sc.groups:
                if i < g.pods:
                    if i and g.delay:
                        time.sleep(g.delay)
                    make(members[g.name][i])
        if not sc.singles_first:
            for pod in singles:
                make(pod)
        self._settle(list(created), settle)
        results = [self._group(sc, g, [f"{ns}/{p.name}" for p in members[g.name]], created)
                   for g in sc.groups]
        for s in sc.singles:
            key = f"{ns}/{s.name}"
            bound = key in self.clock.bound
            results.append(GroupResult(
                sc.id, self.scheduler, s.name, 1, None, int(bound),
                "single" if bound else "none",
                self.clock.bound[key] - created[key] if bound else None,
                nodes=[self.clock.nodes[key]] if bound else []))
        self._clean(ns, created)
        return results

    def _settle(self, keys: list[str], settle: float, limit: float = 300.0) -> None:
        start = last = time.monotonic()
        seen = -1
        while True:
            n = sum(1 for k in keys if k in self.clock.bound)
            now = time.monotonic()
            if n == len(keys) or now - start > limit or not self.alive():
                break
            if n != seen:
                seen, last = n, now
            if now - last > settle:
                break
            time.sleep(0.1)
        time.sleep(1.0)  # bindings still on the wire, the last condition write

    def _group(self, sc: Scenario, g: Group, keys: list[str],
               created: dict[str, float]) -> GroupResult:
        ns = _namespace(sc)
        bound = [k for k in keys if k in self.clock.bound]
        r = GroupResult(sc.id, self.scheduler, g.name, g.pods, g.min_count, len(bound))
        r.outcome = _outcome(len(bound), g.pods, g.min_count)
        placed = g.min_count is None or len(bound) >= g.min_count
        if bound and placed:
            last = max(self.clock.bound[k] for k in bound)
            r.seconds = last - max(created[k] for k in keys)
            r.span = last - min(created[k] for k in keys)
        r.nodes = sorted(Counter(self.clock.nodes[k] for k in bound))
        r.racks = sorted({_rack_of(sc, n) for n in r.nodes} - {""})
        if g.min_count is not None and len(bound) < g.min_count:
            names = {k.split("/", 1)[1] for k in keys}
            for claim in self.store.list(ResourceClaim, ns):
                owners = {(o.kind, o.name) for o in claim.metadata.owner_references}
                mine = any(kind == "Pod" and name in names for kind, name in owners) or (
                    ("PodGroup", g.name) in owners)
                if mine and claim.status is not None and claim.status.allocation is not None:
                    r.idle_gpus += len(claim.status.allocation.devices.results)
        try:
            pg = self.store.get(PodGroup, g.name, ns)
            for c in pg.status.conditions if pg.status else ():
                if c.type == "PodGroupInitiallyScheduled":
                    r.condition = f"{c.status}/{c.reason or ''}"
        except KubedraError:
            r.condition = "?"
        return r

    def _clean(self, ns: str, created: dict[str, float]) -> None:
        for key in created:
            if key not in self.clock.bound:
                with contextlib.suppress(KubedraError):
                    self.store.delete(Pod, key.split("/", 1)[1], ns, grace_period_seconds=0)


# `python -m kubedra` with each log line stamped with its time (the CLI's own -v format has
# none): the root logger is configured first, so the CLI's basicConfig leaves it be.
_TIMESTAMPED_KUBEDRA = (
    "import logging, sys\n"
    "flag = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].startswith('-v') else ''\n"
    "level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(flag.count('v'), 2)]\n"
    "logging.basicConfig(level=level, format="
    "'%(asctime)s.%(msecs)03d %(levelname)s %(threadName)s %(name)s: %(message)s', "
    "datefmt='%H:%M:%S')\n"
    "from kubedra.cli.main import main\n"
    "main()\n"
)


def _namespace(sc: Scenario) -> str:
    return "s-" + "".join(c if c.isalnum() else "-" for c in sc.id.lower()).strip("-")


def _rack_of(sc: Scenario, node: str) -> str:
    for rack, _ in sc.racks:
        if rack and node.startswith(f"{_namespace(sc)}-{rack}-"):
            return rack
    return ""


def run(scheduler: str, scenarios: Sequence[Scenario], settle: float,
        folder: Path | None = None, verbosity: int = 0) -> list[GroupResult]:
    """Every scenario under one scheduler, on one fresh cluster (in `folder`, kept, when
    given; `verbosity`: kubedra's -v count)."""
    with tempfile.TemporaryDirectory(prefix=f"gangs-{scheduler}-") as tmp:
        s = Session(scheduler, Path(folder or tmp), verbosity)
        try:
            s.prepare(scenarios)
            if scheduler == "kubedra":
                s.start_kubedra()
            time.sleep(2.0)  # the scheduler has seen the nodes and slices
            results: list[GroupResult] = []
            for sc in scenarios:
                began = time.monotonic()
                results += s.run(sc, settle)
                print(f"  {scheduler} {sc.id}: {time.monotonic() - began:.0f} s",
                      file=sys.stderr, flush=True)
                if not s.alive():
                    raise RuntimeError(f"{scheduler} died:\n{s.log_tail()}")
            return results
        finally:
            s.close()


def table(scenarios: Sequence[Scenario], results: Sequence[GroupResult]) -> str:
    by = {(r.scenario, r.scheduler, r.group): r for r in results}
    schedulers = [s for s in SCHEDULERS if any(r.scheduler == s for r in results)]
    head = "| scenario | group | " + " | ".join(
        f"{s}: bound (outcome) | {s}: s (span) | {s}: idle GPUs | {s}: condition | {s}: where"
        for s in schedulers) + " |"
    lines = [head, "|" + "---|" * (2 + 5 * len(schedulers))]
    for sc in scenarios:
        names = [g.name for g in sc.groups] + [s.name for s in sc.singles]
        for name in names:
            cells = [sc.id, name]
            for s in schedulers:
                r = by.get((sc.id, s, name))
                if r is None:
                    cells += ["-"] * 5
                    continue
                mc = "" if r.min_count is None or r.min_count == r.pods else f", min {r.min_count}"
                cells += [
                    f"{r.bound}/{r.pods}{mc} ({r.outcome})",
                    "-" if r.seconds is None else f"{r.seconds:.2f} ({r.span or 0.0:.2f})",
                    str(r.idle_gpus),
                    r.condition or "-",
                    ",".join(r.racks) or (f"{len(r.nodes)} node(s)" if r.nodes else "-"),
                ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)



def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gangs_vs_kube")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds without a new binding before a scenario is measured")
    parser.add_argument("--only", default="", help="scenario ids, comma-separated")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--json", default="", help="write the results here")
    parser.add_argument("--logs", default="",
                        help="keep each scheduler's cluster folder (its logs) under this folder")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="kubedra's scheduler logs at INFO (-v) or DEBUG with every API "
                        "call (-vv), timestamped, in kubedra.log (with --logs)")
    args = parser.parse_args(argv)
    wanted = [s for s in args.only.split(",") if s]
    scenarios = [sc for sc in SCENARIOS if not wanted or sc.id in wanted]
    results: list[GroupResult] = []
    for scheduler in args.schedulers.split(","):
        began = time.monotonic()
        folder = None
        if args.logs:
            folder = Path(args.logs) / scheduler
            folder.mkdir(parents=True, exist_ok=True)
        results += run(scheduler, scenarios, args.settle, folder, min(args.verbose, 2))
        print(f"{scheduler}: {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    print(table(scenarios, results))
    print(f"\nload {' '.join(Path('/proc/loadavg').read_text().split()[:3])}, "
          f"{os.cpu_count()} CPUs, settle {args.settle:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
