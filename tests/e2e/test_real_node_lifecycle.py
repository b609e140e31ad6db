"""`kubedra dev-cluster up --real-node` and `down`, as a user runs them: the node runs pods,
and `down` leaves nothing on the host (mounts, cgroups, processes, network links, files,
kernel tunables), also after its agent was killed; `up` again after `down` works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kubedra.devcluster.binaries import Binaries
from kubedra.devcluster.node import RealNode
from kubedra.devcluster.node.layout import KERNEL_TUNABLES
from kubedra.devcluster.pki import REAL_NODE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a real node needs root")
HOST_PATHS = ("/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/etc/cdi",
              "/run/cdi", "/var/run/cdi", "/run/containerd", "/var/lib/containerd")  # fmt: skip
POD = """
apiVersion: v1
kind: Pod
metadata: {name: sleeper}
spec:
  terminationGracePeriodSeconds: 1
  nodeSelector: {kubedra.io/dev-node: real}  # not the kubelet-less node-0
  containers: [{name: c, image: localhost/kubedra-busybox:1.35, imagePullPolicy: Never,
                command: [sleep, "3600"]}]
"""


def host_state() -> dict[str, object]:
    """What a node could leave behind on the host."""
    cgroup_roots = [Path(line.split(" - ")[0].split()[4])
                    for line in Path("/proc/self/mountinfo").read_text().splitlines()
                    if " - cgroup" in line]  # fmt: skip
    processes = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                exe = os.readlink(proc / "exe")
            except OSError:
                continue
            if Path(exe).name in ("kubelet", "containerd", "containerd-shim-runc-v2", "pause"):
                processes.append(exe)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {
        "mounts": Path("/proc/self/mountinfo").read_text().count("\n"),
        "cgroups": sorted(str(p) for root in cgroup_roots for p in root.glob("kubedra-*")),
        "processes": sorted(processes),
        "links": sorted(w.split("@")[0] for w in links.split() if w.startswith(("kdh", "kdn", "kv"))),
        "paths": [p for p in HOST_PATHS if os.path.lexists(p)],
        "tunables": {t: Path(f"/proc/sys/{t}").read_text() for t in KERNEL_TUNABLES},
    }


def kubedra(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBEDRA_DEV_CLUSTER_DIR": str(folder)}
    env.pop("KUBECONFIG", None)
    return subprocess.run([sys.executable, "-m", "kubedra", *args], capture_output=True,
                          text=True, env=env, timeout=600, check=False)  # fmt: skip


def kubectl(binaries: Binaries, folder: Path, *args: str, input: str | None = None) -> str:
    done = subprocess.run([str(binaries.path("kubectl")), "--kubeconfig", str(folder / "kubeconfig"),
                           *args], input=input, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_down_leaves_nothing_behind_and_up_again_works(
    tmp_path: Path, control_plane: Binaries
) -> None:
    before = host_state()
    folder = tmp_path / "cluster"
    for attempt in ("first", "again"):  # `down` then `up` used to fail: nodes already existed
        up = kubedra(folder, "dev-cluster", "up", "--real-node")
        assert up.returncode == 0, f"{attempt}: {up.stderr}"
        assert f"real node {REAL_NODE} Ready in" in up.stderr
        kubectl(control_plane, folder, "apply", "-f", "-", input=POD)
        kubectl(control_plane, folder, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s")
        running = host_state()
        assert running["cgroups"] and running["links"] and running["processes"]
        down = kubedra(folder, "dev-cluster", "down")
        assert down.returncode == 0, down.stderr
        assert host_state() == before, attempt
        assert not (folder / "node").exists()


def test_down_cleans_up_after_the_nodes_agent_died(tmp_path: Path, control_plane: Binaries) -> None:
    before = host_state()
    folder = tmp_path / "cluster"
    assert kubedra(folder, "dev-cluster", "up", "--real-node").returncode == 0
    kubectl(control_plane, folder, "apply", "-f", "-", input=POD)
    kubectl(control_plane, folder, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s")
    agent = int(RealNode(folder).layout.path("agent.pid").read_text())
    os.kill(agent, signal.SIGKILL)  # containerd, the kubelet, shims and the pod are orphans now
    assert host_state()["processes"]
    down = kubedra(folder, "dev-cluster", "down")
    assert down.returncode == 0, down.stderr
    assert host_state() == before
