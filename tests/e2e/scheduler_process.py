"""`kubedra scheduler run` as a process against a dev cluster, for the real-cluster tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubedra.api.coordination import Lease
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.workload import gpu_class
from kubedra.errors import KubedraError, NotFound
from tests.conftest import REPO

FAST_LEASE = ("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
              "--leader-elect-retry-period", "0.5")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KubedraScheduler:
    """One replica; its log in `log`, its metrics on `port`."""

    def __init__(
        self, cluster: DevCluster, log: Path, *args: str, kubeconfig: Path | None = None
    ) -> None:
        self.port = free_port()
        env = {**os.environ, "KUBECONFIG": str(kubeconfig or cluster.kubeconfig)}
        env.pop("KUBEDRA_STORE", None)
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubedra", "-v", "scheduler", "run",
             "--metrics-port", str(self.port), "--metrics-address", "127.0.0.1", *args],
            env=env, cwd=REPO, stdout=self._out, stderr=subprocess.STDOUT,
        )

    @property
    def identity(self) -> str:
        for line in self.log.read_text(errors="replace").splitlines():
            if ", identity " in line:
                return line.rsplit(", identity ", 1)[1].strip()
        return ""

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError:
            return 0, ""

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.get("/readyz")[0] != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"kubedra scheduler not ready:\n{self.tail()}")
            time.sleep(0.2)

    def metric(self, name: str, **labels: str) -> float:
        _, text = self.get("/metrics")
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        head = f"{name}{{{wanted}}}" if labels else name
        for line in text.splitlines():
            if line.startswith(head + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._out.close()
        return int(self.process.returncode)

    def __enter__(self) -> KubedraScheduler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextlib.contextmanager
def gpu_store(cluster: DevCluster) -> Iterator[KubeStore]:
    """An admin store on the cluster, with the workload's GPU DeviceClass created."""
    store = cluster.store()
    store.create(gpu_class())
    try:
        yield store
    finally:
        store.close()


def lease_holder(kube: KubeStore, name: str = "kubedra") -> str:
    try:
        return kube.get(Lease, name, "kube-system").spec.holder_identity or ""
    except NotFound:
        return ""


def wait_for(what: str, check: Any, timeout: float = 120.0) -> None:
    """Until `check()` is true; an API server that does not answer (restarting) is a no."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except KubedraError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)
