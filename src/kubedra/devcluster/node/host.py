"""The host's side of the real node: start it in its namespaces, hand it its network link,
wait until it is Ready, load images into it, and stop it leaving nothing behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from kubedra.api.core import Node
from kubedra.cluster.store import Store
from kubedra.devcluster.node import cgroups
from kubedra.devcluster.node.layout import Layout, new_layout, write_configs
from kubedra.errors import KubedraError, NotFound

READY_TIMEOUT = 120.0
STOP_GRACE = 30.0
# What a real node needs of the host, with where it comes from.
COMMANDS = {
    "runc": "Debian's runc package",
    "iptables": "Debian's iptables package",
    "ip": "Debian's iproute2 package",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "mount": "util-linux",
}


class NodeFailed(KubedraError):
    """The real node did not start or did not become Ready; the message holds its logs."""


class RealNode:
    """The node whose state is `<cluster folder>/node`."""

    def __init__(self, cluster_folder: Path) -> None:
        self.dir = cluster_folder / "node"

    @property
    def layout(self) -> Layout:
        return Layout.load(self.dir)

    def exists(self) -> bool:
        return (self.dir / "node.json").exists()

    # --- start ---------------------------------------------------------------------------

    def start(
        self,
        name: str,
        binaries: dict[str, Path],
        apiserver_port: int,
        ca: Path,
        token: str,
        images: Sequence[Path],
        pause_image: str,
        feature_gates: str = "",
    ) -> int:
        """Lay out the node, start its agent in new namespaces and hand it its veth end;
        returns the agent's pid (the leader of its process group)."""
        check_host()
        if self.dir.exists():
            shutil.rmtree(self.dir)
        bin_dir = self.dir / "bin"
        bin_dir.mkdir(parents=True)
        for binary, path in binaries.items():
            (bin_dir / binary).symlink_to(path)
        runc = shutil.which("runc") or ""
        layout = new_layout(self.dir, name, apiserver_port, bin_dir, runc,
                            tuple(str(p) for p in images), pause_image, feature_gates)  # fmt: skip
        layout.save()
        write_configs(layout, ca, token)
        log = open(self.dir / "agent.log", "ab")  # noqa: SIM115 (the child owns it)
        agent = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--net", "--",
             layout.python, "-m", "kubedra.devcluster.node.agent", str(self.dir)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        (self.dir / "agent.pid").write_text(f"{agent.pid}\n")
        try:
            _link(layout, agent.pid)
        except BaseException:
            self.stop(agent.pid)
            raise
        return agent.pid

    def wait_ready(self, store: Store, pid: int, timeout: float = READY_TIMEOUT) -> float:
        """Seconds until the Node reports Ready (the agent must stay alive meanwhile)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if not _alive(pid):
                raise NodeFailed(f"the real node's agent exited:\n{self.logs()}")
            with contextlib.suppress(NotFound):
                node = store.get(Node, self.layout.name)
                conditions = node.status.conditions if node.status else ()
                if any(c.type == "Ready" and c.status == "True" for c in conditions):
                    return time.monotonic() - started
            time.sleep(0.2)
        raise NodeFailed(f"node {self.layout.name} not Ready after {timeout:.0f} s:\n{self.logs()}")

    def logs(self, lines: int = 12) -> str:
        """The end of the agent's, containerd's and the kubelet's logs."""
        out = []
        for name in ("agent", "containerd", "kubelet"):
            path = self.dir / f"{name}.log"
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            out += [f"--- {path}", *text[-lines:]]
        return "\n".join(out)

    # --- images --------------------------------------------------------------------------

    def load_image(self, archive: Path) -> str:
        """Import an OCI archive into the node's containerd (the kubelet's namespace, so pods
        use it with imagePullPolicy Never); returns what ctr printed."""
        if not self.exists():
            raise KubedraError(f"no real node in {self.dir.parent} (`dev-cluster up --real-node`)")
        layout = self.layout
        socket = layout.host_socket()
        if not socket.exists():
            raise KubedraError(f"the real node's containerd is not running ({socket})")
        done = subprocess.run(
            [f"{layout.bin}/ctr", "--address", str(socket), "--namespace", "k8s.io",
             "images", "import", str(archive)],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise KubedraError(f"ctr images import {archive}: {done.stderr.strip()}")
        return done.stdout

    def component_pid(self, name: str) -> int | None:
        """The pid of the node's `containerd` or `kubelet` (the agent starts them again when
        they exit: tests restart them by killing them)."""
        for pid in cgroups.pids(f"{self.layout.cgroup}/node"):
            with contextlib.suppress(OSError):
                if Path(os.readlink(f"/proc/{pid}/exe")).name == name:
                    return pid
        return None

    # --- stop ----------------------------------------------------------------------------

    def stop(self, pid: int | None) -> None:
        """Stop the agent (it stops the kubelet, the containers and containerd), then kill
        whatever of the node's cgroup subtree is left, remove the subtree, the host's end of
        the link and the node's folder. Safe to repeat, and after the agent died."""
        layout = self.layout if self.exists() else None
        if pid is not None and _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        if layout is not None:
            cgroups.kill(layout.cgroup)
            cgroups.remove(layout.cgroup)
            subprocess.run(["ip", "link", "del", layout.host_link], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def check_host() -> None:
    """A real node needs root and a few commands; say which are missing and where from."""
    if os.geteuid() != 0:
        raise NodeFailed("a real node needs root (namespaces, mounts, cgroups, containers)")
    missing = [f"{c} ({source})" for c, source in COMMANDS.items() if shutil.which(c) is None]
    if missing:
        raise NodeFailed(f"a real node needs: {', '.join(missing)}")


def _link(layout: Layout, pid: int) -> None:
    """The veth pair between the host and the agent's network namespace (once it has one:
    `unshare` makes it before starting the agent, and a link sent to the pid before that
    would land in the host's)."""
    own = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 10
    while os.readlink(f"/proc/{pid}/ns/net") == own:
        if time.monotonic() > deadline:
            raise NodeFailed("the real node's agent never got a network namespace of its own")
        time.sleep(0.01)
    for command in (
        ["ip", "link", "add", layout.host_link, "type", "veth", "peer", "name", layout.node_link,
         "netns", str(pid)],
        ["ip", "addr", "add", f"{layout.host_ip}/30", "dev", layout.host_link],
        ["ip", "link", "set", layout.host_link, "up"],
    ):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise NodeFailed(f"{' '.join(command)}: {done.stderr.strip()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True
