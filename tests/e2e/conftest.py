"""Fixtures of the real-cluster tier: upstream's control plane, kubectl, kubedra on it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedra.cluster.kubernetes import KubeStore
from kubedra.devcluster.binaries import Binaries, build
from kubedra.devcluster.harness import DevCluster
from tests.conftest import REPO


@pytest.fixture(scope="session")
def control_plane() -> Binaries:
    """The upstream binaries, built on first use (minutes, once per machine)."""
    return build(sys.stderr)


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, control_plane: Binaries
) -> Iterator[DevCluster]:
    """A fresh control plane with kube-scheduler for each test module."""
    with DevCluster(tmp_path_factory.mktemp("cluster"), kube_scheduler=True) as running:
        yield running


@pytest.fixture
def kube(cluster: DevCluster) -> Iterator[KubeStore]:
    store = cluster.store()
    yield store
    store.close()


def run_kubedra(
    cluster: DevCluster, *args: str, input: str | None = None, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The `kubedra` command, as a user runs it, pointed at the cluster by KUBECONFIG."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig or cluster.kubeconfig)}
    env.pop("KUBEDRA_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "kubedra", *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
