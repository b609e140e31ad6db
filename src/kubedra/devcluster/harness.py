"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager
and (optionally) kube-scheduler, built from upstream's modules, with kubelet-less Nodes.

What it starts is what kwok and envtest start, minus what DRA tests do not need:
- etcd on loopback ports chosen at start, its data in the cluster folder;
- kube-apiserver with TLS from a private CA, static-token users, RBAC authorization, the
  service-account issuer and keys, and two admission plugins off: `ServiceAccount` (pods
  need no token here: no kubelet mounts one) and `TaintNodesByCondition` (it would taint
  every new Node not-ready, and no kubelet or node-lifecycle controller ever clears it);
- kube-controller-manager with the controllers the DRA flow needs (resourceclaim, garbage
  collector, namespace, service accounts and their tokens), node-lifecycle left off so
  kubelet-less Nodes stay Ready;
- kube-scheduler when asked.
Feature gates go to every component (and a real node's kubelet); with GenericWorkload on,
the API server also serves scheduling.k8s.io/v1beta1 (Workload, PodGroup: a beta API, off
by default) and the controller manager runs the podgroup-protection controller, which
removes the finalizer the API server puts on every PodGroup.
`kubedra.api.gates.WORKLOAD_FEATURE_GATES` turns on what kubedra's scheduling.k8s.io models
assume.
Every process is a child in its own process group, logs into `<dir>/logs`, and is listed
in `<dir>/cluster.json`, so `down` can stop a cluster that another process started.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import msgspec
import yaml

from kubedra.api.core import Node, NodeStatus
from kubedra.api.meta import ObjectMeta
from kubedra.api.quantity import Quantity
from kubedra.catalog.profiles import READY
from kubedra.cluster.kubeconfig import load_config
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.rest import ApiClient
from kubedra.cluster.store import Store
from kubedra.devcluster import pki as pki_module
from kubedra.devcluster.binaries import Binaries, cache_root, require
from kubedra.devcluster.gotool import node_binaries
from kubedra.devcluster.pki import write_kubeconfig
from kubedra.errors import AlreadyExists, KubedraError

READY_TIMEOUT = 60.0
CONTROLLERS = (
    "resourceclaim-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
)
# What a real node's workloads need beside: DaemonSets (the driver), Deployments and their
# ReplicaSets (the scheduler), PodDisruptionBudgets' status, and the CA bundle every
# namespace gets for in-cluster clients.
REAL_NODE_CONTROLLERS = (
    "daemonset-controller",
    "deployment-controller",
    "replicaset-controller",
    "disruption-controller",
    "root-ca-certificate-publisher-controller",
)
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# What GenericWorkload brings along: the API version it serves (beta, so off unless asked
# for) and the controller that releases deleted PodGroups once their pods are gone.
WORKLOAD_RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"
WORKLOAD_CONTROLLERS = ("podgroup-protection-controller",)


class ClusterFailed(KubedraError):
    """A component did not start; the message holds the tail of its log."""


@dataclass
class State:
    """What `up` wrote down for `env` and `down`: ports, processes, the kubeconfig."""

    folder: str
    kubeconfig: str
    server: str
    etcd: str
    bin: str
    processes: dict[str, int] = field(default_factory=dict)  # component -> pid
    ports: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> State:
        path = folder / "cluster.json"
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            raise KubedraError(
                f"no dev cluster in {folder} (run `kubedra dev-cluster up`)"
            ) from None

    def save(self) -> None:
        (Path(self.folder) / "cluster.json").write_text(json.dumps(asdict(self), indent=2) + "\n")


class DevCluster:
    """One local control plane in one folder. Use `up()`/`down()` or `with DevCluster(...)`."""

    def __init__(
        self,
        folder: str | Path,
        *,
        kube_scheduler: bool = False,
        feature_gates: str = "",
        runtime_config: str = "",
        apiserver_flags: Sequence[str] = (),
        controller_manager_flags: Sequence[str] = (),
        detach: bool = False,
        real_node: bool = False,
    ) -> None:
        """`detach`: the processes outlive this Python process (the CLI's `up`); otherwise
        they are killed with it even if it dies without cleaning up (pytest fixtures).
        `real_node`: also a node with upstream's kubelet and containerd (`kubedra.devcluster.
        node`); its pods are placed by kube-scheduler, which it implies.
        `feature_gates` (`A=true,B=false`) go to every component; `runtime_config` to the
        API server's `--runtime-config`, after what the gates need (see the module)."""
        self.folder = Path(folder).resolve()
        self.real_node = real_node
        self.node_ready_seconds: float | None = None
        self.kube_scheduler = kube_scheduler or real_node
        self.feature_gates = feature_gates
        self.runtime_config = runtime_config
        self.apiserver_flags = tuple(apiserver_flags)
        self.controller_manager_flags = tuple(controller_manager_flags)
        self.detach = detach
        self.bin: Binaries | None = None
        self.state: State | None = None
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    # --- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> DevCluster:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> State:
        """Start everything and wait until the API server is ready; returns the state."""
        self.bin = require()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        pki = pki_module.create(self.folder / "pki")
        ports = {name: _free_port() for name in ("etcd", "etcd-peer", "apiserver", "kcm", "sched")}
        server = f"https://127.0.0.1:{ports['apiserver']}"
        self.state = State(
            folder=str(self.folder),
            kubeconfig=str(self.folder / "kubeconfig"),
            server=server,
            etcd=f"http://127.0.0.1:{ports['etcd']}",
            bin=str(self.bin.folder),
            ports=ports,
        )
        try:
            self._start("etcd", self._etcd_args(ports))
            self._wait("etcd", f"{self.state.etcd}/health")
            self._start("kube-apiserver", self._apiserver_args(pki, ports))
            self._wait_apiserver(pki)
            for identity in pki_module.IDENTITIES:
                self._write_kubeconfig(pki, identity)
            self._start("kube-controller-manager", self._kcm_args(pki, ports))
            if self.kube_scheduler:
                self._start("kube-scheduler", self._scheduler_args(ports))
            self._wait_components(ports)
            if self.real_node:
                self._start_real_node(pki, ports)
        except BaseException:
            self.down()
            raise
        self.state.save()
        return self.state

    def _start_real_node(self, pki: pki_module.Pki, ports: dict[str, int]) -> None:
        assert self.state is not None and self.bin is not None
        from kubedra.devcluster.images import node_images
        from kubedra.devcluster.node import RealNode

        images, pause = node_images(("pause", "busybox"))  # kubedra's: `load-image`
        node = RealNode(self.folder)
        pid = node.start(
            pki_module.REAL_NODE,
            {**{n: self.bin.path(n) for n in ("kubelet",)}, **node_binaries()},
            ports["apiserver"],
            pki.ca,
            pki.token("node"),
            images,
            pause,
            self.feature_gates,
        )
        self.state.processes["real-node"] = pid
        self.state.save()
        store = self.store()
        try:
            self.node_ready_seconds = node.wait_ready(store, pid)
        finally:
            store.close()

    def down(self) -> None:
        """Stop every process of this cluster (also one started by another process)."""
        pids = dict(self.state.processes) if self.state else {}
        if not pids and (self.folder / "cluster.json").exists():
            with contextlib.suppress(KubedraError, TypeError, ValueError):
                pids = State.load(self.folder).processes
        for name in reversed(list(pids)):  # the node, scheduler and controllers before etcd
            if name == "real-node":
                from kubedra.devcluster.node import RealNode

                RealNode(self.folder).stop(pids[name])
            else:
                _stop(pids[name], self._children.get(name))
        self._children.clear()
        if self.state:
            self.state.processes.clear()
        (self.folder / "cluster.json").unlink(missing_ok=True)

    # --- what tests use -------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        assert self.state is not None
        return Path(self.state.kubeconfig)

    def store(self, identity: str = "admin", **client: float) -> KubeStore:
        """A KubeStore on this cluster as one of its identities."""
        path = self.kubeconfig if identity == "admin" else self.kubeconfig_for(identity)
        return KubeStore(ApiClient(load_config(str(path)), **client))  # type: ignore[arg-type]

    def kubeconfig_for(self, identity: str) -> Path:
        return self.folder / f"{identity}.kubeconfig"

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """Run the built kubectl against this cluster; returns stdout."""
        assert self.bin is not None
        done = subprocess.run(
            [str(self.bin.path("kubectl")), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise KubedraError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now (as the API server does every 5 minutes), so
        watches from older resourceVersions get 410 Gone; returns the revision."""
        assert self.state is not None
        status = _post_json(f"{self.state.etcd}/v3/kv/range", {"key": "AA==", "limit": 1})
        header = status["header"]
        assert isinstance(header, dict)
        revision = int(header["revision"])
        _post_json(f"{self.state.etcd}/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver on the same port (for reconnect tests)."""
        assert self.state is not None
        _stop(self.state.processes.pop("kube-apiserver"), self._children.pop("kube-apiserver"))
        pki = pki_module.Pki(self.folder / "pki")
        self._start("kube-apiserver", self._apiserver_args(pki, self.state.ports))
        self._wait_apiserver(pki)
        self.state.save()

    # --- components -----------------------------------------------------------------

    def _etcd_args(self, ports: dict[str, int]) -> list[str]:
        client, peer = f"http://127.0.0.1:{ports['etcd']}", f"http://127.0.0.1:{ports['etcd-peer']}"
        return [
            "--name=node0",
            f"--data-dir={self.folder / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=node0={peer}",
            "--unsafe-no-fsync",  # a test cluster: durability across power loss is not needed
            "--log-level=warn",
        ]

    def _apiserver_args(self, pki: pki_module.Pki, ports: dict[str, int]) -> list[str]:
        args = [
            f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
            # a real node reaches it over its link to the host
            f"--bind-address={'0.0.0.0' if self.real_node else '127.0.0.1'}",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports['apiserver']}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca}",
            f"--token-auth-file={pki.token_file}",
            "--authorization-mode=Node,RBAC",  # Node: a kubelet sees its own node's objects
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            # ServiceAccount: only a real node mounts the tokens it adds; TaintNodesByCondition:
            # no node-lifecycle controller runs to clear the not-ready taint it puts on nodes
            "--disable-admission-plugins=TaintNodesByCondition"
            + ("" if self.real_node else ",ServiceAccount"),
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
        ]
        if self.real_node:  # logs and exec reach the kubelet at the node's address
            args.append("--kubelet-preferred-address-types=InternalIP,Hostname")
        if self.feature_gates:
            args.append(f"--feature-gates={self.feature_gates}")
        runtime = [WORKLOAD_RUNTIME_CONFIG] if self.gate("GenericWorkload") else []
        runtime += [c for c in self.runtime_config.split(",") if c]
        if runtime:
            args.append(f"--runtime-config={','.join(runtime)}")
        return args + list(self.apiserver_flags)

    def gate(self, name: str) -> bool:
        """Whether `feature_gates` turns the gate on (the last setting counts, as in the
        components' own parsing; `AllAlpha`/`AllBeta` are not expanded)."""
        on = False
        for item in self.feature_gates.split(","):
            key, _, value = item.partition("=")
            if key.strip() == name:
                on = value.strip().lower() == "true"
        return on

    def _kcm_args(self, pki: pki_module.Pki, ports: dict[str, int]) -> list[str]:
        config = str(self.kubeconfig_for("controller-manager"))
        args = [
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--leader-elect=false",
            f"--controllers={','.join(self._controllers())}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca}",
            # Each controller under its own service account and RBAC role, as kubeadm runs
            # it (the manager's own identity may not, e.g., empty a deleted namespace).
            "--use-service-account-credentials=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['kcm']}",
            f"--cert-dir={self.folder / 'kcm-certs'}",
        ]
        args += [f"--feature-gates={self.feature_gates}"] if self.feature_gates else []
        return args + list(self.controller_manager_flags)

    def _controllers(self) -> tuple[str, ...]:
        workload = WORKLOAD_CONTROLLERS if self.gate("GenericWorkload") else ()
        return CONTROLLERS + workload + (REAL_NODE_CONTROLLERS if self.real_node else ())

    def start_kube_scheduler(
        self,
        qps: float | None = None,
        burst: int | None = None,
        settings: Mapping[str, object] | None = None,
    ) -> int:
        """Start kube-scheduler now, on a cluster started without it; `qps`/`burst` set its
        client's rate limits, `settings` other top-level fields of its
        KubeSchedulerConfiguration (`percentageOfNodesToScore`, `parallelism`, ...).
        Returns its pid."""
        assert self.state is not None
        config = None
        if qps is not None or burst is not None or settings:
            config = self.folder / "kube-scheduler.yaml"
            connection: dict[str, object] = {"kubeconfig": str(self.kubeconfig_for("scheduler"))}
            connection |= {"qps": qps} if qps is not None else {}
            connection |= {"burst": burst} if burst is not None else {}
            config.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "KubeSchedulerConfiguration",
                        "clientConnection": connection,
                        "leaderElection": {"leaderElect": False},
                        **(settings or {}),
                    }
                )
            )
        self.kube_scheduler = True
        self._start("kube-scheduler", self._scheduler_args(self.state.ports, config))
        self._wait("kube-scheduler", f"https://127.0.0.1:{self.state.ports['sched']}/healthz")
        return self.state.processes["kube-scheduler"]

    def _scheduler_args(self, ports: dict[str, int], config: Path | None = None) -> list[str]:
        kubeconfig = str(self.kubeconfig_for("scheduler"))
        args = [
            f"--config={config}" if config else f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['sched']}",
            f"--cert-dir={self.folder / 'scheduler-certs'}",
        ]
        args += [] if config else ["--leader-elect=false"]
        return args + ([f"--feature-gates={self.feature_gates}"] if self.feature_gates else [])

    def _write_kubeconfig(self, pki: pki_module.Pki, identity: str) -> None:
        assert self.state is not None
        path = self.state.kubeconfig if identity == "admin" else self.kubeconfig_for(identity)
        write_kubeconfig(Path(path), self.state.server, pki.ca, identity, pki.token(identity))

    # --- processes --------------------------------------------------------------------

    def _start(self, name: str, args: list[str]) -> None:
        assert self.bin is not None and self.state is not None
        log = open(self.folder / "logs" / f"{name}.log", "ab")  # noqa: SIM115 (the child owns it)
        binary = "etcd" if name == "etcd" else name
        child = subprocess.Popen(
            [str(self.bin.path(binary)), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=None if self.detach else _die_with_parent,
        )
        log.close()
        self._children[name] = child
        self.state.processes[name] = child.pid
        self.state.save()

    def _check_alive(self) -> None:
        for name, child in self._children.items():
            if child.poll() is not None:
                raise ClusterFailed(f"{name} exited ({child.returncode}):\n{self._log_tail(name)}")

    def _log_tail(self, name: str, lines: int = 15) -> str:
        path = self.folder / "logs" / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait(self, name: str, url: str, *, token: str = "", ca: Path | None = None) -> None:
        """Until `url` answers 200 (checking that nothing we started has died meanwhile)."""
        context = None
        if url.startswith("https"):
            context = ssl.create_default_context(cafile=str(ca) if ca else None)
            if ca is None:  # a component's own self-signed serving certificate
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(url, headers=headers)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            self._check_alive()
            if _answers_ok(request, context):
                return
            time.sleep(0.1)
        tail = self._log_tail(name)
        raise ClusterFailed(f"{name} not ready after {READY_TIMEOUT:.0f} s:\n{tail}")

    def _wait_apiserver(self, pki: pki_module.Pki) -> None:
        assert self.state is not None
        self._wait(
            "kube-apiserver", f"{self.state.server}/readyz", token=pki.token("admin"), ca=pki.ca
        )

    def _wait_components(self, ports: dict[str, int]) -> None:
        """The controller manager and scheduler answer /healthz on their own ports."""
        self._wait("kube-controller-manager", f"https://127.0.0.1:{ports['kcm']}/healthz")
        if self.kube_scheduler:
            self._wait("kube-scheduler", f"https://127.0.0.1:{ports['sched']}/healthz")


def default_folder() -> Path:
    return cache_root() / "dev-cluster"


def plain_nodes(
    store: Store, count: int, prefix: str = "node", existing_ok: bool = False
) -> list[str]:
    """`count` kubelet-less CPU nodes (16 cores, 64Gi, 110 pods), Ready, without devices;
    `existing_ok`: one already there (a dev cluster started again) is kept."""
    names = []
    for i in range(count):
        node = plain_node(f"{prefix}-{i}")
        try:
            created = store.create(node)
        except AlreadyExists:
            if not existing_ok:
                raise
            created = store.get(Node, node.name)
        store.update_status(msgspec.structs.replace(created, status=node.status))
        names.append(node.name)
    return names


def plain_node(name: str, cpu: str = "16", memory: str = "64Gi", pods: int = 110) -> Node:
    resources = {
        "cpu": Quantity.parse(cpu),
        "memory": Quantity.parse(memory),
        "pods": Quantity.from_int(pods),
    }
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    return Node(
        metadata=ObjectMeta(name=name, labels=labels),
        status=NodeStatus(capacity=resources, allocatable=resources, conditions=(READY,)),
    )


def _answers_ok(request: urllib.request.Request, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


# Ports this process handed out: a component binds its port only once it starts (the
# controller manager after the API server is up), so a port checked free for one
# component, or for a cluster still stopping, must not be handed out again.
_HANDED_OUT: set[int] = set()


def _free_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a port the kernel hands out
    for outgoing connections (the components talk to each other a lot while starting) could
    be taken again before the component that was meant to listen on it binds it."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(max(1024, low - 12000), low)
        if port in _HANDED_OUT:
            continue
        _HANDED_OUT.add(port)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ClusterFailed(f"no free loopback port below {low}")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _post_json(url: str, body: dict[str, object]) -> dict[str, object]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        result: dict[str, object] = json.loads(answer.read())
    return result


def _die_with_parent() -> None:
    """Linux: the child gets SIGKILL when the process that started it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _stop(pid: int, child: subprocess.Popen[bytes] | None, grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL what is left after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if child is not None:
            if child.poll() is not None:
                return
        elif not _alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(5)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped by a parent that is gone or busy) counts as stopped.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True
