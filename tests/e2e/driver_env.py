"""What the driver's real-cluster tests share: kubelet-less GPU nodes, claims allocated the way a
scheduler writes them, service-account kubeconfigs, and a TCP switch in front of the API server."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import msgspec

from kubedra.api.core import Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceClaim,
    DeviceRequest,
    DeviceRequestAllocationResult,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimStatus,
)
from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.harness import DevCluster, plain_node, write_kubeconfig
from kubedra.errors import AlreadyExists
from tests.driver.driverproc import GPU, DriverProcess, free_port
from tests.driver.driverproc import short_tempdir as short_dir
from tests.e2e.test_seed_on_cluster import wait_for

__all__ = ["free_port", "short_dir", "wait_for"]  # (shared with the driver's e2e tests)


def gpu_node(kube: KubeStore, name: str) -> Node:
    """A kubelet-less Ready Node, as its kubelet would have registered it."""
    node = plain_node(name)
    with contextlib.suppress(AlreadyExists):
        created = kube.create(node)
        kube.update_status(msgspec.structs.replace(created, status=node.status))
    return kube.get(Node, name)


def allocated_claim(
    kube: KubeStore, name: str, node: str, devices: list[str], namespace: str = "default"
) -> ResourceClaim:
    """A claim with `status.allocation` of `devices` on `node`, written as a scheduler writes
    it (for tests that need many claims quickly; the driver cannot tell who allocated)."""
    request = DeviceRequest(
        name="gpu",
        exactly=ExactDeviceRequest(device_class_name="gpu.nvidia.com", count=len(devices)),
    )
    claim = kube.create(
        ResourceClaim(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=ResourceClaimSpec(devices=DeviceClaim(requests=(request,))),
        )
    )
    here = NodeSelectorRequirement(key="metadata.name", operator="In", values=(node,))
    allocation = AllocationResult(
        devices=DeviceAllocationResult(
            results=tuple(
                DeviceRequestAllocationResult(request="gpu", driver=GPU, pool=node, device=d)
                for d in devices
            )
        ),
        node_selector=NodeSelector(node_selector_terms=(NodeSelectorTerm(match_fields=(here,)),)),
    )
    status = ResourceClaimStatus(allocation=allocation)
    return kube.update_status(msgspec.structs.replace(claim, status=status))


def token_kubeconfig(
    cluster: DevCluster, account: str, path: Path, *, namespace: str = "kubedra",
    node: str | None = None, server: str | None = None,
) -> Path:  # fmt: skip
    """A kubeconfig with a token of a service account (bound to `node` when given, as the
    token of a pod on that node is), for `server` (default: the cluster's)."""
    args = ["create", "token", account, "-n", namespace, "--duration", "2h"]
    if node:
        args += ["--bound-object-kind", "Node", "--bound-object-name", node]
    token = cluster.kubectl(*args).strip()
    assert cluster.state is not None
    ca = Path(cluster.state.folder) / "pki" / "ca.crt"
    write_kubeconfig(path, server or cluster.state.server, ca, account, token)
    return path


def cluster_driver(
    root: Path, node: str, kubeconfig: Path, profile: str = "h100x8"
) -> DriverProcess:
    """`kubedra --kubeconfig K driver run` for `node`, its kubelet directories below `root`."""
    root.mkdir(parents=True, exist_ok=True)
    return DriverProcess(
        store=root / "unused.db",
        root=root / "kubelet",
        cdi=root / "cdi",
        node=node,
        kubeconfig=kubeconfig,
        profile=profile,
        metrics_port=free_port(),
    )


class Switch:
    """A TCP forwarder to the API server that can be switched off: while off, connections
    are refused and the open ones are cut, as when a node loses the control plane."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._on = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def on(self) -> None:
        self._on.set()

    def off(self) -> None:
        self._on.clear()
        with self._lock:
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._open.clear()

    def close(self) -> None:
        self._stopped = True
        self.off()
        self._on.set()

    def _serve(self) -> None:
        while not self._stopped:
            if not self._on.wait(0.2):
                continue
            with socket.create_server(("127.0.0.1", self.port), reuse_port=True) as listener:
                listener.settimeout(0.2)
                while self._on.is_set() and not self._stopped:
                    try:
                        client, _ = listener.accept()
                    except TimeoutError:
                        continue
                    self._forward(client)

    def _forward(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        with self._lock:
            self._open |= {client, upstream}
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for conn in (src, dst):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
