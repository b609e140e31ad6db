"""What the real-node tests share: a dev cluster with a real node, kubedra's image loaded
into it and the chart installed by helm as a user installs it, and reading the node."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubedra.devcluster.gotool import HELM
from kubedra.devcluster.harness import DevCluster
from kubedra.devcluster.images import build
from kubedra.devcluster.node import RealNode
from kubedra.devcluster.node.layout import Layout
from tests.conftest import REPO
from tests.driver.conftest import checkpoint_claims

CHART = REPO / "deploy" / "helm" / "kubedra"
DRIVER = "gpu.nvidia.com"


@dataclass
class Node:
    """The cluster, its real node and where the node keeps what the driver writes."""

    cluster: DevCluster
    real: RealNode

    @property
    def layout(self) -> Layout:
        return self.real.layout

    @property
    def cdi_specs(self) -> list[str]:
        return sorted(p.name for p in self.layout.path("cdi").glob("*.json"))

    def checkpoint_claims(self) -> list[str]:
        """The claim uids the driver's checkpoint holds as prepared."""
        plugin_dir = self.layout.path("kubelet", "plugins", DRIVER)
        if not (plugin_dir / "checkpoint.json").exists():
            return []
        return sorted(checkpoint_claims(plugin_dir))

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        return self.cluster.kubectl(*args, check=check, input=input)

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"KUBECONFIG": str(self.cluster.kubeconfig), "HOME": str(self.cluster.folder),
               "PATH": "/usr/bin:/bin"}  # fmt: skip
        return subprocess.run([str(HELM.build()), *args], capture_output=True, text=True,
                              env=env, timeout=300, check=False)  # fmt: skip

    def wait(self, what: str, timeout: float = 120) -> None:
        """kubectl wait, e.g. `--for=condition=Ready pod/x`."""
        self.kubectl("wait", *what.split(), f"--timeout={timeout:.0f}s")


@contextmanager
def real_node_cluster(folder: Path) -> Iterator[Node]:
    with DevCluster(folder, real_node=True) as cluster:
        yield Node(cluster, RealNode(cluster.folder))


def install_chart(node: Node, *extra: str) -> float:
    """kubedra's image into the node, then `helm install ... --wait`; returns seconds taken."""
    node.real.load_image(build("kubedra").archive)
    started = time.monotonic()
    done = node.helm("install", "kubedra", str(CHART), "-n", "kubedra", "--create-namespace",
                     "-f", str(CHART / "values-dev.yaml"), "--wait", "--timeout", "180s", *extra)  # fmt: skip
    assert done.returncode == 0, f"{done.stderr}\n{node.real.logs()}"
    return time.monotonic() - started


def wait_until(check: Any, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)
