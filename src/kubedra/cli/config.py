"""`kubedra config`: the user's contexts, as `kubectl config` keeps kubeconfig's.

A context names where commands go: an embedded store, or a kubeconfig and its context.
The current one is used unless the command line or the environment says otherwise (the
rule in `kubedra.cluster.connect`); `get-contexts` shows which applies now, and why.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from kubedra.cli.context import Settings, fails_cleanly
from kubedra.cli.output import table
from kubedra.cluster import userconfig
from kubedra.errors import KubedraError


@click.group("config")
def config() -> None:
    """Show or choose where commands go: named contexts (an embedded store, or a cluster of
    a kubeconfig), kept in ~/.config/kubedra/config ($XDG_CONFIG_HOME)."""


@config.command("current-context")
@fails_cleanly
def current_context() -> None:
    """The name of the current context."""
    click.echo(userconfig.load().current)


@config.command("get-contexts")
@click.pass_obj
@fails_cleanly
def get_contexts(settings: Settings) -> None:
    """Every context, the current one marked; then where this command line goes, and why
    (a flag or an environment variable can send it elsewhere than the current context)."""
    loaded = userconfig.load()
    rows = [
        ["*" if c.name == loaded.current else "", c.name, c.describe()] for c in loaded.contexts
    ]
    sys.stdout.write(table(["CURRENT", "NAME", "WHERE"], rows))
    target = settings.backend.target()
    where = f"embedded store {target.store}" if target.store else "a cluster"
    click.echo(f"\ncommands go to: {where} (decided by {target.why})")


@config.command("use-context")
@click.argument("name")
@fails_cleanly
def use_context(name: str) -> None:
    """Make NAME the current context."""
    loaded = userconfig.load()
    loaded.get(name)  # it must exist
    userconfig.UserConfig(name, loaded.contexts, loaded.path, True).save()
    click.echo(f'Switched to context "{name}".')


@config.command("set-context")
@click.argument("name")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), help="An embedded store.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="A cluster's kubeconfig.")
@click.option("--kube-context", help="The kubeconfig's context (default: its current one).")
@fails_cleanly
def set_context(
    name: str, store_path: str | None, kubeconfig: str | None, kube_context: str | None
) -> None:
    """Create or replace context NAME: an embedded store (--store) or a cluster
    (--kubeconfig, --kube-context). The store is made by the first command that makes one."""
    if (store_path is None) == (kubeconfig is None and kube_context is None):
        raise KubedraError("give --store PATH, or --kubeconfig PATH and/or --kube-context NAME")
    store = str(Path(store_path).expanduser().resolve()) if store_path else None
    cluster_file = str(Path(kubeconfig).expanduser().resolve()) if kubeconfig else None
    context = userconfig.Context(name, store, cluster_file, kube_context)
    loaded = userconfig.load()
    loaded.with_context(context).save()
    click.echo(f'Context "{name}" set: {context.describe()}.')


@config.command("delete-context")
@click.argument("name")
@fails_cleanly
def delete_context(name: str) -> None:
    """Delete context NAME (not the current one, nor `default`)."""
    loaded = userconfig.load()
    loaded.get(name)
    if name in (loaded.current, userconfig.DEFAULT_CONTEXT):
        raise KubedraError(f'context "{name}" is the current or the default one: kept')
    kept = tuple(c for c in loaded.contexts if c.name != name)
    userconfig.UserConfig(loaded.current, kept, loaded.path, True).save()
    click.echo(f'Deleted context "{name}".')


@config.command("view")
@fails_cleanly
def view() -> None:
    """The contexts as the file holds them (the built-in default when there is no file)."""
    loaded = userconfig.load()
    body = {"current-context": loaded.current, "contexts": [c.to_dict() for c in loaded.contexts]}
    click.echo(f"# {loaded.path}{'' if loaded.exists else ' (not written yet)'}")
    click.echo(yaml.safe_dump(body, sort_keys=False), nl=False)
