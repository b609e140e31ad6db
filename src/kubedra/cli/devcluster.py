"""`kubedra dev-cluster build | up | env | down`: a real control plane on this machine."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from kubedra.cli.cluster import NODE_PROFILES, create_nodes, parse_counts
from kubedra.cli.context import fails_cleanly
from kubedra.devcluster import binaries as bins
from kubedra.devcluster.harness import DevCluster, State, default_folder, plain_nodes

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
    """Build the pinned upstream binaries into the cache (once per machine; needs Go)."""
    found = bins.build(sys.stderr, force=force)
    click.echo(str(found.folder))


@dev_cluster.command("up")
@_DIR
@click.option("--kube-scheduler", is_flag=True, help="Also run upstream's kube-scheduler.")
@click.option("--nodes", default=1, show_default=True, help="Plain kubelet-less CPU nodes.")
@NODE_PROFILES
@click.option("--feature-gates", default="", help="Passed to every component, e.g. A=true,B=false.")
@fails_cleanly
def up(
    folder: Path | None,
    kube_scheduler: bool,
    nodes: int,
    node_profiles: tuple[str, ...],
    feature_gates: str,
) -> None:
    """Start a cluster in the background; the last line printed is its kubeconfig."""
    cluster = DevCluster(
        folder or default_folder(),
        kube_scheduler=kube_scheduler,
        feature_gates=feature_gates,
        detach=True,
    )
    if (cluster.folder / "cluster.json").exists():
        raise click.ClickException(
            f"a dev cluster already runs in {cluster.folder}: `kubedra dev-cluster down` first"
        )
    state = cluster.up()
    store = cluster.store()
    names = plain_nodes(store, nodes) + create_nodes(store, parse_counts(node_profiles))
    click.echo(
        f"dev-cluster: {state.server}, {len(names)} node(s), logs in {cluster.folder}/logs",
        err=True,
    )
    click.echo(state.kubeconfig)


@dev_cluster.command("env")
@_DIR
@fails_cleanly
def env(folder: Path | None) -> None:
    """Shell lines that point KUBECONFIG and PATH (the built kubectl) at the cluster:
    eval "$(kubedra dev-cluster env)"."""
    state = State.load((folder or default_folder()).resolve())
    click.echo(f"export KUBECONFIG={shlex.quote(state.kubeconfig)}")
    click.echo(f'export PATH={shlex.quote(state.bin)}:"$PATH"')


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
