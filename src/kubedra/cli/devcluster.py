"""`kubedra dev-cluster build | up | env | down`: a real control plane on this machine."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from kubedra.api.gates import WORKLOAD_FEATURE_GATES
from kubedra.cli.cluster import NODE_PROFILES, create_nodes, parse_counts
from kubedra.cli.context import fails_cleanly
from kubedra.devcluster import binaries as bins
from kubedra.devcluster.gotool import HELM, node_binaries
from kubedra.devcluster.harness import DevCluster, State, default_folder, plain_nodes
from kubedra.devcluster.node import RealNode
from kubedra.devcluster.pki import REAL_NODE

_DIR = click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar="KUBEDRA_DEV_CLUSTER_DIR",
    help="The cluster's state (certificates, etcd data, logs, kubeconfig), or "
    "KUBEDRA_DEV_CLUSTER_DIR. Default: ~/.cache/kubedra/dev-cluster.",
)


@click.group("dev-cluster")
def dev_cluster() -> None:
    """Run upstream's etcd, kube-apiserver, kube-controller-manager (and kube-scheduler)
    on loopback, with kubelet-less Nodes: a real API server to point kubedra at."""


@dev_cluster.command("build")
@click.option("--force", is_flag=True, help="Rebuild even if the cache has the binaries.")
@fails_cleanly
def build(force: bool) -> None:
    """Build the pinned upstream binaries into the cache (once per machine; needs Go): the
    control plane, the real node's kubelet and containerd, and helm."""
    found = bins.build(sys.stderr, force=force)
    node_binaries(sys.stderr)
    HELM.build(sys.stderr)
    click.echo(str(found.folder))


@dev_cluster.command("up")
@_DIR
@click.option("--kube-scheduler", is_flag=True, help="Also run upstream's kube-scheduler.")
@click.option("--nodes", default=1, show_default=True, help="Plain kubelet-less CPU nodes.")
@NODE_PROFILES
@click.option(
    "--feature-gates",
    default="",
    help="Passed to every component, e.g. A=true,B=false; `workloads` stands for the gates "
    f"of the scheduling.k8s.io/v1beta1 kinds ({WORKLOAD_FEATURE_GATES}), which also serves "
    "that API version.",
)
@click.option(
    "--runtime-config",
    default="",
    help="Passed to kube-apiserver's --runtime-config (GROUP/VERSION=true,...).",
)
@click.option(
    "--real-node",
    is_flag=True,
    help="Also one real node (upstream's kubelet, containerd, runc; needs root), on which "
    "pods run; implies --kube-scheduler.",
)
@fails_cleanly
def up(
    folder: Path | None,
    kube_scheduler: bool,
    nodes: int,
    node_profiles: tuple[str, ...],
    feature_gates: str,
    runtime_config: str,
    real_node: bool,
) -> None:
    """Start a cluster in the background; the last line printed is its kubeconfig."""
    cluster = DevCluster(
        folder or default_folder(),
        kube_scheduler=kube_scheduler,
        feature_gates=expand_gates(feature_gates),
        runtime_config=runtime_config,
        detach=True,
        real_node=real_node,
    )
    if (cluster.folder / "cluster.json").exists():
        raise click.ClickException(
            f"a dev cluster already runs in {cluster.folder}: `kubedra dev-cluster down` first"
        )
    state = cluster.up()
    try:
        store = cluster.store()
        counts = parse_counts(node_profiles)
        names = plain_nodes(store, nodes, existing_ok=True)
        names += create_nodes(store, counts, existing_ok=True)
    except BaseException:
        cluster.down()  # nothing may keep running behind a failed `up`
        raise
    ready = cluster.node_ready_seconds
    real = f", real node {REAL_NODE} Ready in {ready:.1f} s" if ready is not None else ""
    click.echo(
        f"dev-cluster: {state.server}, {len(names)} simulated node(s){real}, logs in "
        f"{cluster.folder}/logs",
        err=True,
    )
    click.echo(state.kubeconfig)


def expand_gates(text: str) -> str:
    """The `--feature-gates` value with the `workloads` shorthand spelled out."""
    items = [i.strip() for i in text.split(",") if i.strip()]
    return ",".join(WORKLOAD_FEATURE_GATES if i == "workloads" else i for i in items)


@dev_cluster.command("env")
@_DIR
@fails_cleanly
def env(folder: Path | None) -> None:
    """Shell lines that point KUBECONFIG and PATH (the built kubectl, and helm once built)
    at the cluster: eval "$(kubedra dev-cluster env)"."""
    state = State.load((folder or default_folder()).resolve())
    click.echo(f"export KUBECONFIG={shlex.quote(state.kubeconfig)}")
    path = [state.bin]
    if HELM.unavailable() is None and HELM.binary().exists():
        path.append(str(HELM.binary().parent))
    click.echo(f'export PATH={":".join(shlex.quote(p) for p in path)}:"$PATH"')


@dev_cluster.command("down")
@_DIR
@fails_cleanly
def down(folder: Path | None) -> None:
    """Stop every process of the cluster (its folder is kept: `up` starts it again)."""
    cluster = DevCluster(folder or default_folder())
    if not (cluster.folder / "cluster.json").exists():
        click.echo(f"dev-cluster: nothing runs in {cluster.folder}", err=True)
        return
    cluster.down()
    click.echo(f"dev-cluster: stopped ({cluster.folder})", err=True)


@dev_cluster.command("load-image")
@_DIR
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@fails_cleanly
def load_image(folder: Path | None, archive: Path) -> None:
    """Import an OCI image archive (`make image` writes dist/kubedra-image.tar) into the real
    node's containerd, for pods with imagePullPolicy Never."""
    cluster_folder = (folder or default_folder()).resolve()
    output = RealNode(cluster_folder).load_image(archive.resolve())
    click.echo(output.rstrip() or f"dev-cluster: {archive} imported")
