"""The machinery of `bench_kube_scheduler`: one scheduler on one fresh dev cluster, and the
workload shapes put to it (kubedra's burst, and upstream's scheduler_perf DRA shapes).

A `Session` starts a dev cluster (kube-apiserver, etcd, kube-controller-manager v1.37.2),
then the scheduler of a `Variant` with given client rate limits, waits until it is ready
(kube-scheduler's /healthz, kubedra's /readyz: informers synced), and only then makes the
measured pods, noting when each create call returned. What a shape reports (`Result`):
- pods/s of the measured pods, from the first binding to the last (steady state: pods bound
  in the window / the window);
- p50/p99 from each pod's creation (its create call's return, on this process's monotonic
  clock: creationTimestamp has 1 s resolution) to its binding as the watch shows it; this
  includes the claim controller making the pod's claim, the same for every scheduler;
- CPU seconds (user + system, /proc) over the measured phase of the scheduler process, of
  kube-apiserver, etcd and kube-controller-manager, and the load average;
- the API server's write requests in the phase by resource (its `apiserver_request_total`),
  events among them, and the time requests waited in API Priority and Fairness queues;
- a check of every allocation afterwards (`kubedra.scheduler.verify`);
- memory: each process's peak resident set (VmHWM, /proc) at the end of the run, the
  scheduler's resident set once it is ready (before the measured pods), and how long the
  nodes took to make and the scheduler to get ready (start to ready: kube-scheduler's
  /readyz, kubedra's /readyz, both after their caches synced).

Nodes and their slices are made directly (`gpu_nodes(direct=True)`: the objects the
simulated driver publishes, without its per-node reads), from `CREATE_THREADS` threads: 5,000
nodes took 30-120 s on 2 shared cores (2,000 nodes: 11 s against 18 s through the publisher).

scheduler_perf's shapes (test/integration/scheduler_perf/dra/performance-config.yaml):
nodes `scheduler-perf-dra-<i>` with one slice of 10 devices each (maxClaimsPerNode 10),
DeviceClass `test-class`, a one-device claim template, pods from
`pod-with-claim-template.yaml`:
- SchedulingWithResourceClaimTemplate/5000pods_500nodes: 500 nodes, 2,500 init pods
  (scheduled first, not measured), 2,500 measured pods (the cluster ends full);
- SteadyStateClusterResourceClaimTemplate/{empty,half,full}_500nodes: 500 nodes, 0 / 2,500 /
  4,990 claims allocated beforehand without pods, then 10 pods at a time for 10 s: each pod
  bound is deleted and replaced.
`KUBEDRA_BENCH_PERF_SCALE` scales nodes and pods (1 = upstream's sizes).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench.harness import free_port, wait_ready
from kubedra.api.core import Namespace, Pod
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import ResourceClaim
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import (
    BindingClock,
    claim_pod,
    gpu_class,
    gpu_nodes,
    gpu_template,
    in_parallel,
    perf_allocated_claims,
    perf_class,
    perf_nodes,
    perf_pod,
    perf_template,
)
from kubedra.scheduler.verify import check_allocations

CONTROLLER_FLAGS = ("--kube-api-qps=500", "--kube-api-burst=1000")
THROTTLED = (50.0, 100)  # kube-scheduler's defaults
UNTHROTTLED = (5000.0, 5000)  # what scheduler_perf gives kube-scheduler's client
CREATE_THREADS = 16
READY_TIMEOUT = 900.0  # a scheduler's start to ready (5,000 nodes: 10,000 slices listed)
MIB = 1024 * 1024
# kubedra runs as kube-scheduler (its identity and RBAC role), plus reading the gang kinds
# it watches, which that role lacks without the GenericWorkload gate
EXTRA_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kubedra-scheduler-gangs}
rules:
- apiGroups: [scheduling.k8s.io]
  resources: [podgroups, podgroups/status, workloads]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kubedra-scheduler-gangs}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kubedra-scheduler-gangs}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-scheduler"}
"""


@dataclass(frozen=True)
class Variant:
    label: str
    scheduler: str  # "kube-scheduler", or a kubedra policy
    settings: tuple[tuple[str, object], ...] = ()  # KubeSchedulerConfiguration fields

    @property
    def name(self) -> str:
        """spec.schedulerName of its pods."""
        return "default-scheduler" if self.scheduler == "kube-scheduler" else "kubedra"


KUBE_DEFAULT = Variant("kube-scheduler default", "kube-scheduler")
# the fewest nodes kube-scheduler can be made to look at: percentageOfNodesToScore is
# floored at minFeasibleNodesToFind = 100 feasible nodes (pkg/scheduler/schedule_one.go)
KUBE_FEWEST = Variant(
    "kube-scheduler percentageOfNodesToScore=1",
    "kube-scheduler",
    (("percentageOfNodesToScore", 1),),
)
FIRST_FIT = Variant("kubedra first-fit", "first-fit")
FRAGMENTATION = Variant("kubedra fragmentation", "fragmentation")


@dataclass
class Result:
    variant: Variant
    shape: str
    qps: float
    pods: int
    bound: int = 0
    pods_per_s: float = 0.0
    p50: float = 0.0
    p99: float = 0.0
    wall: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU s in the phase
    writes: dict[str, int] = field(default_factory=dict)  # "VERB resource[/sub]" -> count
    apf_wait: float = 0.0  # seconds requests waited in APF queues, summed
    created_per_s: float = 0.0  # how fast the measured pods were made (a ceiling)
    algorithm_ms: float = 0.0  # kube-scheduler: mean scheduling algorithm time per attempt
    attempts: int = 0  # kube-scheduler: scheduling attempts (> pods: retries)
    load: str = ""
    problems: int = 0
    nodes: int = 0
    setup_s: float = 0.0  # making the nodes and their slices
    ready_s: float = 0.0  # the scheduler's start to ready
    rss_ready: float = 0.0  # the scheduler's resident set once ready, bytes
    peak_rss: dict[str, float] = field(default_factory=dict)  # process -> VmHWM, bytes

    @property
    def valid(self) -> bool:
        return self.bound == self.pods and self.problems == 0

    @property
    def events(self) -> int:
        return sum(n for k, n in self.writes.items() if k.endswith(" events"))

    def note(self) -> str:
        cpu = ", ".join(f"{k} {v:.1f}" for k, v in self.cpu.items())
        per_pod = sum(self.writes.values()) / self.bound if self.bound else 0.0
        check = f"{self.problems} problems" if self.problems else "valid"
        return (
            f"{self.bound}/{self.pods} bound, {check}; p50 {self.p50:.2f} s, p99 "
            f"{self.p99:.2f} s from creation; {self.wall:.1f} s; CPU s: {cpu}; "
            f"{per_pod:.1f} API writes/pod ({self.events} events); APF wait "
            f"{self.apf_wait:.1f} s; pods made at {self.created_per_s:.0f}/s"
            + (
                f"; {self.attempts} attempts, algorithm {self.algorithm_ms:.1f} ms each"
                if self.attempts
                else ""
            )
            + self.memory_note()
            + f"; load {self.load}"
        )

    def memory_note(self) -> str:
        if not self.peak_rss:
            return ""
        peak = ", ".join(f"{k} {v / MIB:.0f}" for k, v in self.peak_rss.items())
        per_node = (
            f" ({self.peak_rss.get('scheduler', 0.0) / self.nodes / 1024:.0f} KiB/node)"
            if self.nodes
            else ""
        )
        return (
            f"; peak RSS MiB: {peak}{per_node}; scheduler RSS when ready "
            f"{self.rss_ready / MIB:.0f} MiB; ready {self.ready_s:.1f} s after start"
            + (f"; nodes made in {self.setup_s:.0f} s" if self.setup_s else "")
        )


def scale() -> float:
    return float(os.environ.get("KUBEDRA_BENCH_PERF_SCALE", "1"))


def scaled(n: int, factor: float) -> int:
    return max(1, round(n * factor))


class Session:
    """One fresh dev cluster with one scheduler running on it."""

    def __init__(self, variant: Variant, qps: float, burst: int, folder: str) -> None:
        self.variant, self.qps, self.burst = variant, qps, burst
        self.folder = folder
        self.cluster = DevCluster(folder, controller_manager_flags=CONTROLLER_FLAGS)
        self.cluster.up()
        self.store: KubeStore = self.cluster.store(qps=-1)
        self.clock = BindingClock(self.store)
        self.process: subprocess.Popen[bytes] | None = None
        self.pid = 0
        self.ready_s = 0.0
        self.rss_ready = 0.0
        self.setup_s = 0.0

    def namespace(self, name: str) -> None:
        self.store.create(Namespace(metadata=ObjectMeta(name=name)))

    def start(self) -> None:
        """The scheduler, until it is ready (noting how long that took and its memory)."""
        began = time.monotonic()
        self._start()
        self.ready_s = time.monotonic() - began
        self.rss_ready = memory(self.pid, "VmRSS")

    def _start(self) -> None:
        if self.variant.scheduler == "kube-scheduler":
            settings = dict(self.variant.settings)
            self.pid = self.cluster.start_kube_scheduler(self.qps, self.burst, settings)
            self._kube_scheduler_ready()
            return
        self.cluster.kubectl("apply", "-f", "-", input=EXTRA_RBAC)
        port = free_port()
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig_for("scheduler"))}
        env.pop("KUBEDRA_STORE", None)
        log = open(os.path.join(self.folder, "kubedra.log"), "wb")  # noqa: SIM115 (the child's)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kubedra",
                "scheduler",
                "run",
                "--no-leader-elect",
                "--policy",
                self.variant.scheduler,
                "--kube-api-qps",
                str(self.qps),
                "--kube-api-burst",
                str(self.burst),
                "--metrics-address",
                "127.0.0.1",
                "--metrics-port",
                str(port),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.pid = self.process.pid
        ready = f"http://127.0.0.1:{port}/readyz"
        wait_ready(self.process, ready, self._log_tail, "kubedra scheduler", READY_TIMEOUT)

    def _kube_scheduler_ready(self) -> None:
        """Until kube-scheduler's /readyz answers 200: its informers' event handlers have
        synced (the cluster waits only for /healthz, which answers before that)."""
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._kube_scheduler_get("/readyz") is not None:
                return
            if not Path(f"/proc/{self.pid}").exists():
                raise RuntimeError("kube-scheduler exited before it was ready")
            time.sleep(0.1)
        raise RuntimeError(f"kube-scheduler not ready in {READY_TIMEOUT:g} s")

    def _log_tail(self) -> str:
        text = Path(self.folder, "kubedra.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-15:])

    def close(self) -> None:
        self.clock.close()
        if self.process is not None:
            self.process.terminate()
            self.process.wait(60)
        self.cluster.down()

    # --- measuring ------------------------------------------------------------------------

    def pids(self) -> dict[str, int]:
        assert self.cluster.state is not None
        procs = self.cluster.state.processes
        return {
            "scheduler": self.pid,
            "apiserver": procs["kube-apiserver"],
            "etcd": procs["etcd"],
            "kcm": procs["kube-controller-manager"],
        }

    def sample(self) -> tuple[dict[str, float], Counter[str], float]:
        text = self.cluster.kubectl("get", "--raw", "/metrics")
        cpu = {k: cpu_seconds(p) if p else 0.0 for k, p in self.pids().items()}
        cpu["client"] = sum(os.times()[:2])  # this process: creating pods, watching them
        return cpu, writes(text), apf_wait(text)

    def scheduler_metrics(self) -> str:
        """kube-scheduler's own /metrics (whole run), as the admin."""
        return self._kube_scheduler_get("/metrics") or ""

    def _kube_scheduler_get(self, path: str) -> str | None:
        """A GET on kube-scheduler's secure port as the admin; None unless it answers 200."""
        assert self.cluster.state is not None
        config = yaml.safe_load(self.cluster.kubeconfig.read_text())
        token = config["users"][0]["user"]["token"]
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        url = f"https://127.0.0.1:{self.cluster.state.ports['sched']}{path}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                return str(answer.read().decode())
        except OSError:
            return None

    def create_timed(self, pods: Iterable[Pod], created: dict[str, float]) -> None:
        def make(pod: Pod) -> None:
            self.store.create(pod)
            created[f"{pod.namespace}/{pod.name}"] = time.monotonic()

        in_parallel(make, pods, CREATE_THREADS)

    def wait_bound(self, keys: Iterable[str], timeout: float, stalled: float = 90.0) -> None:
        wanted = set(keys)
        deadline, last, seen = time.monotonic() + timeout, time.monotonic(), -1
        while True:
            n = sum(1 for k in wanted if k in self.clock.bound)
            if n == len(wanted):
                return
            now = time.monotonic()
            if n != seen:
                last, seen = now, n
            if now > deadline or now - last > stalled:
                print(f"  gave up: {n}/{len(wanted)} bound", file=sys.stderr, flush=True)
                return
            time.sleep(0.05)

    def result(
        self,
        shape: str,
        created: dict[str, float],
        before: tuple[dict[str, float], Counter[str], float],
        began: float,
        window: float | None = None,
    ) -> Result:
        after = self.sample()
        wall = time.monotonic() - began
        bound = {k: self.clock.bound[k] for k in created if k in self.clock.bound}
        r = Result(self.variant, shape, self.qps, len(created), wall=wall)
        r.peak_rss = {k: memory(p, "VmHWM") for k, p in self.pids().items() if p}
        r.rss_ready, r.ready_s, r.setup_s = self.rss_ready, self.ready_s, self.setup_s
        r.cpu = {k: after[0][k] - before[0].get(k, 0.0) for k in after[0]}
        r.writes = dict(after[1] - before[1])
        r.apf_wait = after[2] - before[2]
        r.load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        made = sorted(created.values())
        if len(made) > 1 and made[-1] > made[0]:
            r.created_per_s = (len(made) - 1) / (made[-1] - made[0])
        if self.variant.scheduler == "kube-scheduler":
            text = self.scheduler_metrics()
            r.attempts = int(
                _metric_sum(text, "scheduler_scheduling_attempt_duration_seconds_count")
            )
            algo = _metric_sum(text, "scheduler_scheduling_algorithm_duration_seconds_sum")
            count = _metric_sum(text, "scheduler_scheduling_algorithm_duration_seconds_count")
            r.algorithm_ms = 1e3 * algo / count if count else 0.0
        r.problems = len(check_allocations(self.store))
        if window is not None:  # steady state: pods bound inside the window
            inside = [k for k, t in bound.items() if t <= began + window]
            r.pods, r.bound = len(inside), len(inside)
            r.pods_per_s = len(inside) / window
            lat = sorted(bound[k] - created[k] for k in inside)
        else:
            r.bound = len(bound)
            times = sorted(bound.values())
            span = times[-1] - times[0] if times else 0.0
            r.pods_per_s = (len(times) - 1) / span if span > 0 else 0.0
            lat = sorted(max(0.0, bound[k] - created[k]) for k in bound)
        if lat:
            r.p50 = lat[len(lat) // 2]
            r.p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        return r


# --- shapes -------------------------------------------------------------------------------


def burst(
    variant: Variant,
    qps: float,
    burst_: int,
    nodes: int,
    pods: int,
    folder: str,
    settings: tuple[tuple[str, object], ...] = (),
    precreated: bool = False,
) -> Result:
    """kubedra's shape: `nodes` h100x8 nodes, `pods` one-GPU pods made at once.
    `precreated` (a diagnosis, not a row): the pods and their claims are all made before
    the scheduler starts, so that pod creation and the claim controller are out of its way
    (latency is then from the scheduler's start); `settings`: more KubeSchedulerConfiguration
    fields."""
    if settings:
        variant = Variant(f"{variant.label} {dict(settings)}", variant.scheduler, settings)
    s = Session(variant, qps, burst_, folder)
    try:
        made = time.monotonic()
        gpu_nodes(s.store, nodes, direct=True, threads=CREATE_THREADS)
        s.setup_s = time.monotonic() - made
        print(f"  {nodes} nodes made in {s.setup_s:.0f} s", file=sys.stderr, flush=True)
        s.store.create(gpu_class())
        s.store.create(gpu_template("one", 1))
        created: dict[str, float] = {}
        todo = [claim_pod(f"p{i:05d}", "one", variant.name) for i in range(pods)]
        if precreated:
            s.create_timed(todo, created)
            while len(s.store.list(ResourceClaim, "default")) < pods:
                time.sleep(1)
            before, began = s.sample(), time.monotonic()
            s.start()
            created = dict.fromkeys(created, began)
        else:
            s.start()
            before, began = s.sample(), time.monotonic()
            s.create_timed(todo, created)
        s.wait_bound(created, timeout=max(600.0, pods / 2.0))
        r = s.result(f"{pods} pods / {nodes} h100x8 nodes", created, before, began)
        r.nodes = nodes
        return r
    finally:
        s.close()


def scheduling_with_template(
    variant: Variant, qps: float, burst_: int, factor: float, folder: str
) -> Result:
    """SchedulingWithResourceClaimTemplate/5000pods_500nodes, scaled by `factor`."""
    nodes, init, measured = scaled(500, factor), scaled(2500, factor), scaled(2500, factor)
    s = Session(variant, qps, burst_, folder)
    try:
        for ns in ("init", "test"):
            s.namespace(ns)
            s.store.create(perf_template(ns))
        perf_nodes(s.store, nodes)
        s.store.create(perf_class())
        s.start()
        first: dict[str, float] = {}
        warm = [perf_pod(f"init-{i:05d}", "init", variant.name) for i in range(init)]
        s.create_timed(warm, first)
        s.wait_bound(first, timeout=max(600.0, init / 2.0))
        created: dict[str, float] = {}
        todo = [perf_pod(f"test-{i:05d}", "test", variant.name) for i in range(measured)]
        before, began = s.sample(), time.monotonic()
        s.create_timed(todo, created)
        s.wait_bound(created, timeout=max(600.0, measured / 2.0))
        shape = f"SchedulingWithResourceClaimTemplate {init + measured}pods_{nodes}nodes"
        return s.result(shape, created, before, began)
    finally:
        s.close()


def steady_state(
    variant: Variant, qps: float, burst_: int, factor: float, duration: float, folder: str
) -> list[Result]:
    """SteadyStateClusterResourceClaimTemplate empty/half/full_500nodes, scaled by
    `factor`, one after the other on one cluster (claims added between them)."""
    nodes = scaled(500, factor)
    levels = {"empty": 0, "half": nodes * 10 // 2, "full": nodes * 10 - 10}
    s = Session(variant, qps, burst_, folder)
    results = []
    try:
        for ns in ("init", "test"):
            s.namespace(ns)
        s.store.create(perf_template("test"))
        names = perf_nodes(s.store, nodes)
        s.store.create(perf_class())
        s.start()
        done = 0
        for level, claims in levels.items():
            if claims > done:  # the earlier level's pods and claims are gone by now
                perf_allocated_claims(s.store, claims - done, names, first=done)
                done = claims
            time.sleep(2)  # the scheduler sees the new allocations
            shape = f"SteadyStateClusterResourceClaimTemplate {level}_{nodes}nodes"
            results.append(_steady(s, variant, shape, duration, level))
    finally:
        s.close()
    return results


def _steady(s: Session, variant: Variant, shape: str, duration: float, tag: str) -> Result:
    created: dict[str, float] = {}
    seq = itertools.count()
    lock = threading.Lock()

    def new() -> None:
        with lock:
            name = f"{tag}-{next(seq):06d}"
        s.store.create(perf_pod(name, "test", variant.name))
        created[f"test/{name}"] = time.monotonic()

    def replace(key: str) -> None:
        s.store.delete(Pod, key.split("/", 1)[1], "test", grace_period_seconds=0)
        new()

    before, began = s.sample(), time.monotonic()
    handled: set[str] = set()
    with ThreadPoolExecutor(8) as pool:
        for _ in range(10):
            pool.submit(new)
        while time.monotonic() < began + duration:
            for key in list(s.clock.bound):
                if key in created and key not in handled:
                    handled.add(key)
                    pool.submit(replace, key)
            time.sleep(0.005)
    for key in list(created):  # what is left, so that the next level starts from its claims
        if key not in handled:
            with contextlib.suppress(Exception):  # already gone
                s.store.delete(Pod, key.split("/", 1)[1], "test", grace_period_seconds=0)
    result = s.result(shape, created, before, began, window=duration)
    _wait_claims_gone(s.store)
    return result


def _wait_claims_gone(store: KubeStore, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while store.list(ResourceClaim, "test") and time.monotonic() < deadline:
        time.sleep(0.5)


# --- /proc and /metrics -------------------------------------------------------------------

_REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$", re.M)
_APF_WAIT = re.compile(
    r"^apiserver_flowcontrol_request_wait_duration_seconds_sum\{[^}]*\} (\S+)$", re.M
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def writes(metrics: str) -> Counter[str]:
    """Write requests the API server answered, by verb and resource[/subresource]."""
    out: Counter[str] = Counter()
    for labels, value in _REQUEST.findall(metrics):
        la = dict(_LABEL.findall(labels))
        if la.get("verb") in ("GET", "LIST", "WATCH", "WATCHLIST"):
            continue
        sub = la.get("subresource", "")
        resource = la.get("resource", "") + (f"/{sub}" if sub else "")
        out[f"{la.get('verb')} {resource}"] += int(float(value))
    return out


def _metric_sum(metrics: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", metrics, re.M))


def apf_wait(metrics: str) -> float:
    return sum(float(v) for v in _APF_WAIT.findall(metrics))


def memory(pid: int, key: str) -> float:
    """A /proc/PID/status memory line in bytes (VmHWM: peak resident set; VmRSS: now);
    0 when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(rf"^{key}:\s+(\d+) kB$", text, re.M)
    return float(found.group(1)) * 1024 if found else 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

