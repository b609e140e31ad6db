"""kube-scheduler and kubedra's scheduler side by side, on the same control plane build.

For each scheduler a fresh dev cluster (upstream's kube-apiserver, etcd and
kube-controller-manager v1.37.2) gets the same workload: N kubelet-less nodes x 8 GPUs
(h100x8, slices published by kubedra's driver code) and M pods, each with a claim from a
template. The pods and their claims are made before the scheduler starts (the claim
controller runs with a raised rate limit, so that its claims are all there: what is
measured is the scheduler alone); then one scheduler starts: kube-scheduler, or `kubedra
scheduler run` with first-fit or fragmentation, each with the client rate limits
kube-scheduler has by default (QPS 50, burst 100). Measured:
- pods/s from the first binding to the last (the start of each process is apart);
- p50/p99 of the time from the scheduler's start to each pod's binding (every pod was
  waiting at the start: its wait in the burst; creation to binding is this plus the time
  the claim controller took, the same for all);
- CPU seconds of the scheduler process (user + system), from /proc;
- a check of every allocation afterwards (`kubedra.scheduler.verify`).
Sizes: `KUBEDRA_BENCH_KUBE_SIZES` (default "125x1000": 1,000 GPUs for 1,000 pods; the
issue's 100 nodes would hold only 800 of them), e.g. "125x1000,1000x5000".

    python -m bench.bench_kube_scheduler      # this module alone, one table
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import Row, format_table
from kubedra.api.resource import ResourceClaim
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.binaries import binaries
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import (
    BindingClock,
    claim_pod,
    create_all,
    gpu_class,
    gpu_nodes,
    gpu_template,
)
from kubedra.scheduler.verify import check_allocations

GROUP = "vs kube-scheduler"
QPS, BURST = 50, 100  # kube-scheduler's defaults, for both
SCHEDULERS = ("kube-scheduler", "first-fit", "fragmentation")
TARGETS = {"first-fit": 1.0, "fragmentation": 0.5}  # pods/s ratio to kube-scheduler
CONTROLLER_FLAGS = ("--kube-api-qps=500", "--kube-api-burst=1000")


@dataclass
class Result:
    scheduler: str
    pods: int
    bound: int
    pods_per_s: float
    p50: float
    p99: float
    first: float  # seconds from the start to the first binding
    cpu: float
    problems: int

    @property
    def valid(self) -> bool:
        return self.bound == self.pods and self.problems == 0


def sizes() -> list[tuple[int, int]]:
    spec = os.environ.get("KUBEDRA_BENCH_KUBE_SIZES", "125x1000")
    return [(int(n), int(m)) for n, m in (s.split("x") for s in spec.split(",") if s)]


def run() -> list[Row]:
    if not binaries().complete():
        return [
            Row(
                GROUP,
                "side by side",
                0,
                "pods/s",
                note="skipped: run `kubedra dev-cluster build` (Go 1.26+) first",
            )
        ]
    rows = []
    for nodes, pods in sizes():
        results = {name: measure(name, nodes, pods) for name in SCHEDULERS}
        rows += rows_of(nodes, pods, results)
    return rows


def rows_of(nodes: int, pods: int, results: dict[str, Result]) -> list[Row]:
    base = results["kube-scheduler"]
    rows = []
    for name, r in results.items():
        label = "kube-scheduler" if name == "kube-scheduler" else f"kubedra {name}"
        note = (
            f"{r.bound}/{r.pods} bound, {f'{r.problems} problems' if r.problems else 'valid'}; "
            f"p50 {r.p50:.1f} s, p99 {r.p99:.1f} s from start; first binding {r.first:.1f} s; "
            f"CPU {r.cpu:.1f} s"
        )
        rows.append(
            Row(GROUP, f"{pods} pods / {nodes} nodes: {label}", r.pods_per_s, "pods/s", note=note)
        )
    for name, target in TARGETS.items():
        r = results[name]
        ratio = r.pods_per_s / base.pods_per_s if base.pods_per_s else 0.0
        rows.append(
            Row(
                GROUP,
                f"{pods} pods / {nodes} nodes: {name} / kube-scheduler",
                ratio,
                "x",
                target=f">= {target}",
                ok=ratio >= target and r.valid and base.valid,
                note=f"CPU {r.cpu / base.cpu:.2f}x kube-scheduler's" if base.cpu else "",
            )
        )
    return rows


def measure(scheduler: str, nodes: int, pods: int) -> Result:
    with tempfile.TemporaryDirectory(prefix="kubedra-bench-") as folder:
        cluster = DevCluster(folder, controller_manager_flags=CONTROLLER_FLAGS)
        cluster.up()
        try:
            store = cluster.store(qps=-1)
            name = "default-scheduler" if scheduler == "kube-scheduler" else "kubedra"
            prepare(store, nodes, pods, name)
            clock = BindingClock(store)
            started = time.monotonic()
            process, pid = start(cluster, scheduler, folder)
            clock.wait(pods, timeout=max(600.0, pods / 2.0), stalled=max(120.0, pods / 20))
            cpu = cpu_seconds(pid)
            stop(process)
            clock.close()
            problems = check_allocations(store)
            return result(scheduler, pods, clock, started, cpu, len(problems))
        finally:
            cluster.down()


def prepare(store: KubeStore, nodes: int, pods: int, scheduler: str) -> None:
    began = time.monotonic()
    gpu_nodes(store, nodes)
    store.create(gpu_class())
    store.create(gpu_template("one", 1))
    create_all(store, [claim_pod(f"p{i:05d}", "one", scheduler) for i in range(pods)], 16)
    deadline = time.monotonic() + max(300.0, pods / 5)
    while len(store.list(ResourceClaim, "default")) < pods:  # the claim controller's part
        if time.monotonic() > deadline:
            raise RuntimeError("the claim controller did not make every claim in time")
        time.sleep(1)
    print(
        f"  {scheduler}: {nodes} nodes, {pods} pods and claims in {time.monotonic() - began:.0f} s",
        file=sys.stderr,
        flush=True,
    )


def start(
    cluster: DevCluster, scheduler: str, folder: str
) -> tuple[subprocess.Popen[bytes] | None, int]:
    if scheduler == "kube-scheduler":
        return None, cluster.start_kube_scheduler(qps=QPS, burst=BURST)
    # kube-scheduler's own identity and RBAC role: kubedra needs no more than it
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_for("scheduler"))}
    env.pop("KUBEDRA_STORE", None)
    log = open(os.path.join(folder, "kubedra.log"), "wb")  # noqa: SIM115 (the child owns it)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubedra",
            "scheduler",
            "run",
            "--no-leader-elect",
            "--policy",
            scheduler,
            "--kube-api-qps",
            str(QPS),
            "--kube-api-burst",
            str(BURST),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    return process, process.pid


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None:
        process.terminate()
        process.wait(60)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def result(
    scheduler: str, pods: int, clock: BindingClock, started: float, cpu: float, problems: int
) -> Result:
    times = sorted(t - started for t in clock.bound.values())
    if not times:
        return Result(scheduler, pods, 0, 0.0, 0.0, 0.0, 0.0, cpu, problems)
    span = times[-1] - times[0]
    rate = (len(times) - 1) / span if span > 0 else 0.0
    return Result(
        scheduler,
        pods,
        len(times),
        rate,
        p50=times[len(times) // 2],
        p99=times[min(len(times) - 1, int(len(times) * 0.99))],
        first=times[0],
        cpu=cpu,
        problems=problems,
    )


if __name__ == "__main__":
    print(format_table(run()))
