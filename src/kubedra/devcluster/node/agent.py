"""The real node's supervisor, run inside its own mount and network namespaces:
`unshare --mount --propagation private --net python -m kubedra.devcluster.node.agent DIR`.

It waits for the host to hand it its end of the veth pair, sets up the node's network
(address, route, the pods' bridge, the `kubernetes` Service's NAT), its file system (the
host's /run, /var/lib and /var/log hidden behind empty ones, the node's state bound in,
the kubelet's kernel tunables answered by files of its own), joins its cgroup subtree, and
starts containerd, imports the node's images, and starts the kubelet, starting either again
if it exits. On SIGTERM it stops
the kubelet, kills every container of the node and stops containerd; the namespaces end
with it, taking every mount and network device of the node along.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kubedra.devcluster.node import cgroups
from kubedra.devcluster.node.layout import KERNEL_TUNABLES, SERVICE_IP, SERVICE_PORT, Layout

LINK_TIMEOUT = 30.0
# Where the kubelet and the runtime look, inside the node -> the node's own state folder.
BOUND = {
    "/var/lib/kubelet": "kubelet",
    "/var/log/pods": "log/pods",
    "/var/log/containers": "log/containers",
    "/run/cdi": "cdi",  # /var/run/cdi: where the driver writes CDI specs, containerd reads them
}
SOCKET_TIMEOUT = 30.0


def main(folder: Path) -> int:
    layout = Layout.load(folder)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cgroups.join(f"{layout.cgroup}/node", os.getpid())
    network(layout)
    filesystem(layout)
    config = str(layout.path("containerd", "config.toml"))
    commands = {
        "containerd": [f"{layout.bin}/containerd", "--config", config],
        "kubelet": kubelet_command(layout),
    }
    children = {"containerd": start(layout, "containerd", commands["containerd"])}
    wait_for_socket(layout, children["containerd"])
    for archive in layout.images:
        ctr(layout, "images", "import", "--no-unpack=false", archive)
    children["kubelet"] = start(layout, "kubelet", commands["kubelet"])
    log("node agent: containerd and kubelet started")
    while not stop.wait(0.5):
        # As a node's service manager does: a component that exits is started again (the
        # containers outlive both; a restarted kubelet finds its pods and prepared claims).
        for name, child in children.items():
            if child.poll() is not None and not stop.is_set():
                log(f"node agent: {name} exited ({child.returncode}); starting it again")
                children[name] = start(layout, name, commands[name])
    shutdown(layout, children["kubelet"], children["containerd"])
    return 0


# --- network -------------------------------------------------------------------------------


def network(layout: Layout) -> None:
    """The node's address on its veth end, a default route to the host, the pods' bridge,
    and NAT: the `kubernetes` Service to the API server (for the node's own processes and
    for pods), and pods' traffic to the host masqueraded as the node's address."""
    deadline = time.monotonic() + LINK_TIMEOUT
    while subprocess.run(["ip", "link", "show", "dev", layout.node_link],
                         capture_output=True).returncode != 0:  # fmt: skip
        if time.monotonic() > deadline:
            raise SystemExit(f"node agent: the host never handed over {layout.node_link}")
        time.sleep(0.05)
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")  # this namespace's own
    run("ip", "link", "set", "lo", "up")
    run("ip", "addr", "add", f"{layout.node_ip}/30", "dev", layout.node_link)
    run("ip", "link", "set", layout.node_link, "up")
    run("ip", "route", "add", "default", "via", layout.host_ip)
    run("ip", "link", "add", "kbr0", "type", "bridge")
    run("ip", "addr", "add", f"{layout.pod_gateway}/24", "dev", "kbr0")
    run("ip", "link", "set", "kbr0", "up")
    apiserver = f"{layout.host_ip}:{layout.apiserver_port}"
    service = ["-d", f"{SERVICE_IP}/32", "-p", "tcp", "--dport", str(SERVICE_PORT)]
    for chain in ("OUTPUT", "PREROUTING"):
        nat(chain, *service, "-j", "DNAT", "--to-destination", apiserver)
    pods = layout.pod_cidr
    nat("POSTROUTING", "-s", pods, "!", "-d", pods, "-j", "MASQUERADE")


def nat(chain: str, *rule: str) -> None:
    run("iptables", "-t", "nat", "-A", chain, *rule)


# --- file system ---------------------------------------------------------------------------


def filesystem(layout: Layout) -> None:
    """The host's /run, /var/lib and /var/log replaced, in this namespace only, by empty
    ones holding the node's own state; the kernel tunables the kubelet would set answered
    by files (it writes only those that differ)."""
    for top in ("/run", "/var/lib", "/var/log"):
        run("mount", "-t", "tmpfs", "-o", "mode=755", f"kubedra-{layout.id}", top)
    # A sysfs of this network namespace (the host's lists the host's interfaces: cAdvisor
    # and the kubelet read the node's there), with the cgroup mounts moved onto it.
    Path("/run/cgroup").mkdir()
    run("mount", "--rbind", "/sys/fs/cgroup", "/run/cgroup")
    run("mount", "-t", "sysfs", f"kubedra-{layout.id}", "/sys")
    run("mount", "--move", "/run/cgroup", "/sys/fs/cgroup")
    for inside, own in BOUND.items():
        Path(inside).mkdir(parents=True, exist_ok=True)
        run("mount", "--bind", str(layout.path(own)), inside)
    for tunable in KERNEL_TUNABLES:
        run("mount", "--bind", str(layout.path("sysctl", tunable.replace("/", "."))),
            f"/proc/sys/{tunable}")  # fmt: skip


# --- processes -----------------------------------------------------------------------------


def kubelet_command(layout: Layout) -> list[str]:
    return [
        f"{layout.bin}/kubelet",
        f"--config={layout.path('kubelet.yaml')}",
        f"--kubeconfig={layout.path('kubelet.kubeconfig')}",
        f"--hostname-override={layout.name}",
        f"--node-ip={layout.node_ip}",
        "--node-labels=kubedra.io/dev-node=real,kubernetes.io/os=linux",
        "--root-dir=/var/lib/kubelet",
        "--v=2",
    ]


def start(layout: Layout, name: str, command: list[str]) -> subprocess.Popen[bytes]:
    log_file = open(layout.path(f"{name}.log"), "ab")  # noqa: SIM115 (the child owns it)
    env = {**os.environ, "PATH": f"{layout.bin}:/usr/sbin:/usr/bin:/sbin:/bin"}
    child = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env)  # fmt: skip
    log_file.close()
    return child


def wait_for_socket(layout: Layout, containerd: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SOCKET_TIMEOUT
    while not layout.socket.exists():
        if containerd.poll() is not None or time.monotonic() > deadline:
            log_file = layout.path("containerd.log")
            raise SystemExit(f"node agent: containerd did not start: see {log_file}")
        time.sleep(0.05)


def ctr(layout: Layout, *args: str) -> None:
    run(f"{layout.bin}/ctr", "--address", str(layout.socket), "--namespace", "k8s.io", *args)


def shutdown(
    layout: Layout, kubelet: subprocess.Popen[bytes], containerd: subprocess.Popen[bytes]
) -> None:
    """The kubelet first (it must not restart what is being stopped), then every container
    and shim of the node, then containerd."""
    terminate(kubelet, 10.0)
    keep = {os.getpid(), containerd.pid}
    for pid in cgroups.pids(layout.cgroup) - keep:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    terminate(containerd, 10.0)
    log("node agent: stopped")


def terminate(child: subprocess.Popen[bytes], grace: float) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"node agent: {' '.join(command)}: {done.stderr.strip()}")


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
