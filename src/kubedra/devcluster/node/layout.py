"""Where a real node keeps its state, how it is addressed, and its components' configuration.

Everything lives in `<cluster folder>/node`; `node.json` records the layout so that the
agent inside the namespaces, `load-image` and `down` (possibly another process, after a
crash) all work from the same facts.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from kubedra.devcluster.pki import write_kubeconfig

# The first address of the dev cluster's service range (`--service-cluster-ip-range`): the
# `kubernetes` Service's ClusterIP, which in-cluster clients are told to use.
SERVICE_IP, SERVICE_PORT = "10.0.0.1", 443
NODE_LABEL = "kubedra.io/dev-node"  # value "real": what values-dev.yaml selects
LINKS = ipaddress.ip_network("10.201.0.0/16")  # one /30 per node: host end .1, node end .2
PODS = ipaddress.ip_network("10.202.0.0/16")  # one /24 per node
# What the kubelet sets these kernel tunables to (it writes them where they differ); the
# node's mount namespace shows it files with these values instead of the host's.
KERNEL_TUNABLES = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}


@dataclass(frozen=True)
class Layout:
    """A node's facts: its name and id, its addresses, its state folder and binaries."""

    folder: str
    name: str
    id: str  # 6 hex digits: interface and cgroup names
    slot: int  # which /30 of LINKS and /24 of PODS
    apiserver_port: int
    bin: str  # kubelet, containerd, containerd-shim-runc-v2, ctr
    runc: str
    python: str
    images: tuple[str, ...]  # OCI archives imported at start (the pause image first)
    pause_image: str
    feature_gates: str = ""

    # --- naming ------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return Path(self.folder)

    @property
    def host_link(self) -> str:
        return f"kdh{self.id}"

    @property
    def node_link(self) -> str:
        return f"kdn{self.id}"

    @property
    def cgroup(self) -> str:
        """The kubedra-owned cgroup subtree: the kubelet's cgroupRoot, the agent's own."""
        return f"kubedra-{self.id}"

    @property
    def host_ip(self) -> str:
        return str(LINKS[4 * self.slot + 1])

    @property
    def node_ip(self) -> str:
        return str(LINKS[4 * self.slot + 2])

    @property
    def pod_cidr(self) -> str:
        return str(ipaddress.ip_network(f"{PODS[256 * self.slot]}/24"))

    @property
    def pod_gateway(self) -> str:
        return str(PODS[256 * self.slot + 1])

    @property
    def socket(self) -> Path:
        """containerd's socket, inside the node (its /run is the node's own: a socket path
        under the cluster folder can pass the 108 bytes a unix socket's name may have)."""
        return Path("/run/containerd/containerd.sock")

    def host_socket(self) -> Path:
        """The same socket as the host reaches it: through the agent's view of the files."""
        pid = int(self.path("agent.pid").read_text())
        return Path(f"/proc/{pid}/root{self.socket}")

    def path(self, *parts: str) -> Path:
        return self.dir.joinpath(*parts)

    # --- persistence -------------------------------------------------------------------

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "node.json").write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, folder: Path) -> Layout:
        data = json.loads((folder / "node.json").read_text())
        data["images"] = tuple(data["images"])
        return cls(**data)


def new_layout(
    folder: Path,
    name: str,
    apiserver_port: int,
    bin_dir: Path,
    runc: str,
    images: tuple[str, ...],
    pause_image: str,
    feature_gates: str = "",
) -> Layout:
    """A layout with a fresh id and the first link slot no interface of this host uses."""
    return Layout(
        folder=str(folder),
        name=name,
        id=secrets.token_hex(3),
        slot=_free_slot(),
        apiserver_port=apiserver_port,
        bin=str(bin_dir),
        runc=runc,
        python=sys.executable,
        images=images,
        pause_image=pause_image,
        feature_gates=feature_gates,
    )


def _free_slot() -> int:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for slot in range(1, 250):
        if f" {LINKS[4 * slot + 1]}/" not in used and f" {LINKS[4 * slot + 2]}/" not in used:
            return slot
    raise RuntimeError("no free 10.201.x.0/30 link for a real node")


# --- configuration files ---------------------------------------------------------------


def write_configs(layout: Layout, ca: Path, token: str) -> None:
    """containerd's, the kubelet's and the CNI plugin's configuration, and the kubelet's
    kubeconfig (it reaches the API server through the `kubernetes` Service address)."""
    for sub in ("containerd", "kubelet", "log/pods", "log/containers", "cdi", "cni/bin",
                "cni/net.d", "cni/state", "sysctl"):  # fmt: skip
        layout.path(sub).mkdir(parents=True, exist_ok=True)
    layout.path("containerd", "config.toml").write_text(_containerd_toml(layout))
    layout.path("kubelet.yaml").write_text(yaml.safe_dump(_kubelet_config(layout), sort_keys=False))
    layout.path("cni", "net.d", "10-kubedra.conflist").write_text(json.dumps(_cni_config(layout)))
    for plugin in ("kubedra-bridge", "loopback"):
        wrapper = layout.path("cni", "bin", plugin)
        wrapper.write_text(
            f'#!/bin/sh\nexec {layout.python} -m kubedra.devcluster.node.cni {plugin} "$@"\n'
        )
        wrapper.chmod(0o755)
    for tunable, value in KERNEL_TUNABLES.items():
        layout.path("sysctl", tunable.replace("/", ".")).write_text(f"{value}\n")
    server = f"https://{SERVICE_IP}:{SERVICE_PORT}"
    user = f"system:node:{layout.name}"
    write_kubeconfig(layout.path("kubelet.kubeconfig"), server, ca, user, token)


def _containerd_toml(layout: Layout) -> str:
    d = layout.dir / "containerd"
    runtime = '[plugins."io.containerd.cri.v1.runtime"]'
    return f"""version = 3
root = "{d}/root"
state = "/run/containerd"

[grpc]
  address = "{layout.socket}"

[ttrpc]
  address = "{layout.socket}.ttrpc"

{runtime}
  # this VM lacks CAP_SYS_RESOURCE: never ask for an oom_score_adj below containerd's own
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = ["/var/run/cdi"]

{runtime[:-1]}.cni]
  bin_dirs = ["{layout.path('cni', 'bin')}"]
  conf_dir = "{layout.path('cni', 'net.d')}"

{runtime[:-1]}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

{runtime[:-1]}.containerd.runtimes.runc.options]
  BinaryName = "{layout.runc}"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{layout.pause_image}"
"""


def _kubelet_config(layout: Layout) -> dict[str, object]:
    gates = dict(
        (name, value == "true")
        for name, _, value in (g.partition("=") for g in layout.feature_gates.split(",") if g)
    )
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": layout.node_ip,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},  # a dev node: the API server may exec, logs
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{layout.cgroup}",
        "failSwapOn": False,
        "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{layout.socket}",
        "podLogsDir": "/var/log/pods",
        "serializeImagePulls": False,
        # the host's disk is not the node's to police: evict only when it is really full
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,  # imported images cannot be pulled back
        "imageGCLowThresholdPercent": 99,
        "resolvConf": "/etc/resolv.conf",
        "shutdownGracePeriod": "0s",
        "featureGates": gates,
    }


def _cni_config(layout: Layout) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "kubedra",
        "plugins": [
            {
                "type": "kubedra-bridge",
                "bridge": "kbr0",
                "subnet": layout.pod_cidr,
                "gateway": layout.pod_gateway,
                "stateDir": str(layout.path("cni", "state")),
            }
        ],
    }
