"""`kubedra driver run` as a real subprocess (for kill -9 and umask tests, and on a real API
server in tests/e2e), and the checks of what it leaves on disk and in claims."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kubedra.api.resource import ResourceClaim
from kubedra.cluster.store import Store
from kubedra.driver.checkpoint import Checkpoint, PreparedClaim
from kubedra.driver.claimfiles import ClaimFiles, uses_mps
from kubedra.driver.kubelet import KubeletClient, PluginPaths

GPU = "gpu.nvidia.com"


@contextlib.contextmanager
def short_tempdir() -> Iterator[Path]:
    """A short directory for unix sockets (sun_path is 108 bytes; pytest's tmp_path can be long)."""
    path = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DriverProcess:
    """One driver process at a time; `store` is the embedded store's file, or with
    `kubeconfig` the cluster is the store (then the process is watched through /healthz)."""

    store: Path
    root: Path
    cdi: Path
    node: str = "sim-1"
    umask: int = -1  # -1: inherit
    kubeconfig: Path | None = None
    profile: str = "h100x8"
    metrics_port: int | None = None
    log: Path = field(init=False)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def __post_init__(self) -> None:
        self.paths = PluginPaths.for_driver(GPU, self.root)
        self.log = self.root.parent / "driver.log"

    def command(self) -> list[str]:
        where = (
            ["--kubeconfig", str(self.kubeconfig)]
            if self.kubeconfig
            else ["--store", str(self.store)]
        )
        metrics = ["--metrics-port", str(self.metrics_port)] if self.metrics_port else []
        return [
            sys.executable, "-m", "kubedra", *where,
            "driver", "run", "--driver", GPU, "--node", self.node,
            "--backend", "simulated", "--profile", self.profile,
            "--plugin-root", str(self.root), "--cdi-dir", str(self.cdi), *metrics,
        ]  # fmt: skip

    def start(self, timeout: float = 60.0) -> DriverProcess:
        self.starts += 1
        env = {k: v for k, v in os.environ.items() if k not in ("KUBEDRA_STORE", "KUBECONFIG")}
        with open(self.log, "ab") as log:
            log.write(f"--- start {self.starts}\n".encode())
            self.proc = subprocess.Popen(
                self.command(), stderr=log, stdout=log, umask=self.umask, env=env
            )
        self._wait_ready(timeout)
        return self

    def healthz(self) -> int:
        """The HTTP status of /healthz (0: no answer)."""
        try:
            url = f"http://127.0.0.1:{self.metrics_port}/healthz"
            with urllib.request.urlopen(url, timeout=2) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as err:
            return err.code
        except OSError:
            return 0

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"driver exited with {self.proc.returncode}: {self.log_tail()}")
            if self.metrics_port is not None:
                if self.healthz() == 200:
                    return
            elif self.paths.registration_socket.is_socket():
                try:
                    with KubeletClient(self.paths.registration_socket, timeout=2) as kubelet:
                        kubelet.register()
                    return
                except grpc.RpcError:
                    pass  # a stale socket of the killed process, or not yet listening
            time.sleep(0.05)
        raise TimeoutError(f"driver not ready after {timeout} s: {self.log_tail()}")

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self.proc = None
        return code

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def temporaries(plugin_dir: Path, cdi_dir: Path) -> list[Path]:
    """The driver's temporaries: any in its own directory, its specs' in the shared CDI one."""
    ours = [p for p in plugin_dir.rglob("*") if p.name.endswith(".tmp")]
    if cdi_dir.is_dir():
        ours += [p for p in cdi_dir.glob(f".k8s.{GPU}-claim_*.tmp")]
    return sorted(ours)


def disk_problems(
    plugin_dir: Path, cdi_dir: Path, node: str = "sim-1"
) -> tuple[dict[str, PreparedClaim], list[str]]:
    """The checkpoint's claims and every way the files on disk disagree with it."""
    problems = [f"temporary left: {p}" for p in temporaries(plugin_dir, cdi_dir)]
    snapshot = Checkpoint(plugin_dir, GPU, node).read()  # raises if damaged
    claims = snapshot.claims if snapshot else {}
    files = ClaimFiles(plugin_dir, cdi_dir, GPU)
    on_disk, strangers = files.spec_uids()
    problems += [f"stranger spec: {name}" for name in strangers]
    problems += [f"orphan spec: {uid}" for uid in sorted(on_disk - claims.keys())]
    problems += [f"entry without spec: {uid}" for uid in sorted(claims.keys() - on_disk)]
    for uid in sorted(on_disk & claims.keys()):
        if json.loads(files.spec_path(uid).read_text()) != claims[uid].cdi_spec:
            problems.append(f"spec differs from its entry: {uid}")
    mps = {uid for uid, c in claims.items() if uses_mps(c.sharing)}
    host = files.host_dir_uids()
    problems += [f"orphan host dir: {uid}" for uid in sorted(host - mps)]
    problems += [f"missing host dir: {uid}" for uid in sorted(mps - host)]
    return claims, problems


def status_problems(
    store: Store, claims: dict[str, PreparedClaim], timeout: float = 15.0
) -> list[str]:
    """Checkpointed claims whose status.devices does not list exactly their devices, Ready
    (the driver writes the status in the background: it gets `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        problems = []
        for uid, entry in sorted(claims.items()):
            claim = store.get(ResourceClaim, entry.name, entry.namespace)
            listed = [
                (d.pool, d.device, [(c.type, c.status) for c in d.conditions])
                for d in (claim.status.devices if claim.status else ())
                if d.driver == GPU
            ]
            wanted = [(d.pool_name, d.device_name, [("Ready", "True")]) for d in entry.devices]
            if claim.metadata.uid != uid or listed != wanted:
                problems.append(f"claim status disagrees with the checkpoint: {uid} {listed}")
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.1)
