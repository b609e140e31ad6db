"""The `kubedra` command on upstream's control plane: what a user sees when the cluster
cannot be used as asked, and the dev-cluster commands themselves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubedra.devcluster.harness import DevCluster
from tests.conftest import REPO
from tests.e2e.conftest import run_kubedra

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu}
"""


def one_clear_line(done: subprocess.CompletedProcess[str]) -> str:
    """A failed command: exit 1, no traceback, one `error:` line on stderr; returns it."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def edited_kubeconfig(cluster: DevCluster, tmp_path: Path, **changes: str) -> Path:
    """The admin kubeconfig with its server or token replaced."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    if "server" in changes:
        config["clusters"][0]["cluster"]["server"] = changes["server"]
    if "token" in changes:
        config["users"][0]["user"]["token"] = changes["token"]
    path = tmp_path / "edited.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_an_unreachable_api_server_names_the_server_and_request(
    cluster: DevCluster, tmp_path: Path
) -> None:
    closed = edited_kubeconfig(cluster, tmp_path, server="https://127.0.0.1:1")
    line = one_clear_line(run_kubedra(cluster, "get", "rc", kubeconfig=closed))
    assert line == (
        "error: cannot reach the API server https://127.0.0.1:1 (list "
        'resourceclaims.resource.k8s.io in namespace "default"): connection refused'
    )


def test_a_wrong_context_lists_the_contexts_there_are(cluster: DevCluster) -> None:
    line = one_clear_line(run_kubedra(cluster, "--context", "nope", "get", "nodes"))
    assert line == (
        f'error: kubeconfig {cluster.kubeconfig}: context "nope" not found '
        "(contexts: kubedra-dev-admin)"
    )


def test_a_rejected_token_names_server_context_and_request(
    cluster: DevCluster, tmp_path: Path
) -> None:
    stale = edited_kubeconfig(cluster, tmp_path, token="0" * 32)
    assert cluster.state is not None
    line = one_clear_line(run_kubedra(cluster, "get", "deviceclasses", kubeconfig=stale))
    assert line == (
        f"error: the API server {cluster.state.server} rejected the credentials (context "
        '"kubedra-dev-admin") for list deviceclasses.resource.k8s.io: 401 Unauthorized '
        "(token expired or invalid?)"
    )


def test_a_forbidden_verb_names_the_verb_resource_and_user(cluster: DevCluster) -> None:
    """RBAC lets the user read claims but not write them: `get` works, `apply` is refused
    at the create, and nothing is written."""
    cluster.kubectl("create", "clusterrole", "claim-reader", "--verb=get,list,watch",
                    "--resource=resourceclaims.resource.k8s.io")
    cluster.kubectl("create", "clusterrolebinding", "claim-reader", "--clusterrole=claim-reader",
                    "--user=kubedra-user")
    user = cluster.kubeconfig_for("user")
    listed = run_kubedra(cluster, "get", "rc", kubeconfig=user)
    assert listed.returncode == 0, listed.stderr
    refused = run_kubedra(cluster, "apply", "-f", "-", input=CLAIM, kubeconfig=user)
    line = one_clear_line(refused)
    assert cluster.state is not None
    assert line.startswith(
        f'error: {cluster.state.server}: create resourceclaims.resource.k8s.io "one-gpu" in '
        'namespace "default": forbidden: '
    )
    assert 'User "kubedra-user" cannot create resource "resourceclaims"' in line
    assert "one-gpu" not in cluster.kubectl("get", "resourceclaims", "-A")


def test_store_and_kubeconfig_together_are_refused(cluster: DevCluster, tmp_path: Path) -> None:
    done = run_kubedra(cluster, "--store", str(tmp_path / "s.db"), "--kubeconfig",
                       str(cluster.kubeconfig), "get", "nodes")
    line = one_clear_line(done)
    assert "--store names the embedded store" in line


def test_dev_cluster_up_env_down_from_the_command_line(tmp_path: Path) -> None:
    """What the README tells a user to run: `up` prints the kubeconfig last, `env` the
    shell lines, kubectl and kubedra work there, `down` stops every process."""
    folder = tmp_path / "dev"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBEDRA_STORE")}

    def kubedra(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kubedra", *args], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=300)

    up = kubedra("dev-cluster", "up", "--dir", str(folder), "--nodes", "2",
                 "--node-profile", "l4x4=1")
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = up.stdout.strip().splitlines()[-1]
        assert kubeconfig == str(folder / "kubeconfig")
        lines = kubedra("dev-cluster", "env", "--dir", str(folder)).stdout.splitlines()
        assert lines[0] == f"export KUBECONFIG={kubeconfig}"
        # the control plane's bin (kubectl), then helm's folder where helm is built
        assert re.fullmatch(r'export PATH=\S+/bin(:[^:\s]+)*:"\$PATH"', lines[1])
        shell = subprocess.run(["bash", "-c", f'eval "$({sys.executable} -m kubedra dev-cluster '
                                f'env --dir {folder})" && kubectl get nodes -o name'],
                               capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
        assert shell.stdout.split() == ["node/l4x4-0", "node/node-0", "node/node-1"]
        pids = yaml.safe_load((folder / "cluster.json").read_text())["processes"]
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
    finally:
        down = kubedra("dev-cluster", "down", "--dir", str(folder))
    assert down.returncode == 0, down.stderr
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), pid
    assert not (folder / "cluster.json").exists()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


@pytest.fixture(autouse=True)
def _no_leftover_rbac(cluster: DevCluster) -> None:
    """Each test starts without the roles another test granted."""
    for kind in ("clusterrolebinding", "clusterrole"):
        cluster.kubectl("delete", kind, "claim-reader", "--ignore-not-found", check=True)
