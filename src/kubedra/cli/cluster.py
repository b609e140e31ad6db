"""`kubedra cluster create | reset | profiles`: a simulated cluster from catalog profiles."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec
import yaml

from kubedra.api.core import Node
from kubedra.catalog import PROFILES, profile
from kubedra.cli.complete import profile_counts
from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.output import table
from kubedra.cluster import SqliteStore
from kubedra.cluster.store import Store, atomic
from kubedra.cluster.verify import stamp_path
from kubedra.errors import AlreadyExists

NODE_PROFILES = click.option(
    "--node-profile",
    "node_profiles",
    multiple=True,
    metavar="PROFILE=COUNT",
    shell_complete=profile_counts,
    help="Nodes of a hardware profile with their slices published (repeatable), e.g. h100x8=2.",
)


@click.group()
def cluster() -> None:
    """Create simulated nodes (on the embedded store or a real cluster), or reset the store."""


def create_nodes(
    store: Store, counts: list[tuple[str, int]], existing_ok: bool = False
) -> list[str]:
    """Nodes `<profile>-<i>` with their slices published by the simulated drivers. On a
    real cluster they are kubelet-less Nodes: their status (Ready, allocatable) is written
    through the status subresource, as a kubelet would, since create ignores status.
    `existing_ok`: a node already there is kept (a dev cluster started again)."""
    from kubedra.driver.publisher import publish

    names = []
    with atomic(store):
        for name, count in counts:
            prof = profile(name)
            for i in range(count):
                node = f"{prof.name}-{i}"
                wanted = prof.node(node)
                try:
                    created = store.create(wanted)
                except AlreadyExists:
                    if not existing_ok:
                        raise
                    created = store.get(Node, node)
                if created.status != wanted.status:
                    store.update_status(msgspec.structs.replace(created, status=wanted.status))
                for inventory in prof.inventories(node):
                    publish(store, inventory, node)
                names.append(node)
    return names


def parse_counts(values: tuple[str, ...]) -> list[tuple[str, int]]:
    out = []
    for value in values:
        name, _, count = value.partition("=")
        if not count.isdigit() or int(count) < 1:
            raise click.BadParameter(f"{value!r}: expected PROFILE=COUNT, e.g. h100x8=2")
        profile(name)  # KeyError lists the known names
        out.append((name, int(count)))
    return out


@cluster.command("create")
@NODE_PROFILES
@click.option(
    "--from",
    "from_file",
    type=click.Path(exists=True, dir_okay=False),
    help="YAML: {nodes: [{profile: h100x8, count: 2}, ...]}",
)
@click.pass_obj
@fails_cleanly
def create(settings: Settings, node_profiles: tuple[str, ...], from_file: str | None) -> None:
    """Make Nodes and publish their ResourceSlices through the simulated drivers."""
    counts = parse_counts(node_profiles)
    if from_file:
        spec = yaml.safe_load(Path(from_file).read_text()) or {}
        counts += parse_counts(
            tuple(f"{n['profile']}={n.get('count', 1)}" for n in spec.get("nodes", []))
        )
    if not counts:
        raise click.UsageError("give --node-profile PROFILE=COUNT or --from FILE")
    names = create_nodes(settings.open_store(create=True), counts)
    click.echo(f"cluster: {len(names)} node(s) created: {', '.join(names)}")


@cluster.command("reset")
@click.pass_obj
@fails_cleanly
def reset(settings: Settings) -> None:
    """Empty the embedded store: every object deleted, an empty store left in its place."""
    path = Path(settings.embedded_path("cluster reset"))
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), stamp_path(path)):
        file.unlink(missing_ok=True)
    SqliteStore(path).close()
    click.echo(f"cluster: store {path} reset")


@cluster.command("profiles")
def profiles() -> None:
    """List the hardware profiles `cluster create` knows."""
    rows = [[p.name, p.description, str(p.gpu_count or ""), p.source] for p in PROFILES.values()]
    sys.stdout.write(table(["PROFILE", "DESCRIPTION", "DEVICES", "SOURCE"], rows))
