"""Shell completion beyond subcommands: kinds, object names, node names, node profiles.

Click calls these while the user presses Tab (`eval "$(_KUBEDRA_COMPLETE=bash_source
kubedra)"`), with the words typed so far parsed into the context. Names come from the
store the global options select; completion never creates a store, never prints an error
into the shell, and offers nothing rather than fail.
"""

from __future__ import annotations

from pathlib import Path

import click
from click.shell_completion import CompletionItem

from kubedra.api.core import Node
from kubedra.api.kinds import BY_KIND, SHORT_NAMES, resolve_kind
from kubedra.api.meta import KubeObject
from kubedra.cli.context import backend_of


def kinds(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Kinds as kubectl users type them: lower-case names, plurals and short names."""
    words = sorted({*SHORT_NAMES, *(k.lower() for k in BY_KIND)})
    return [CompletionItem(w) for w in words if w.startswith(incomplete.lower())]


def object_names(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Names of stored objects of the kind typed before (in the namespace given, if any)."""
    kind = str(ctx.params.get("kind") or "")
    try:
        cls = resolve_kind("rc" if kind == "claim" else kind)  # `explain claim NAME`
    except KeyError:
        return []
    return _names(ctx, cls, str(ctx.params.get("namespace") or "default"), incomplete)


def node_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return _names(ctx, Node, "", incomplete)


def profile_counts(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """`h100x8=` for every catalog profile (the count is the user's to type)."""
    from kubedra.catalog import PROFILES  # the catalog only when a profile is completed

    return [
        CompletionItem(f"{name}=", help=p.description)
        for name, p in PROFILES.items()
        if name.startswith(incomplete)
    ]


def profile_names(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    from kubedra.catalog import PROFILES

    return [
        CompletionItem(name, help=p.description)
        for name, p in PROFILES.items()
        if name.startswith(incomplete)
    ]


def _names(
    ctx: click.Context, cls: type[KubeObject], namespace: str, incomplete: str
) -> list[CompletionItem]:
    backend = backend_of(ctx.find_root())
    try:
        if not backend.is_kubernetes() and not Path(backend.store_path).exists():
            return []  # no store, nothing to complete
        store = backend.open()
        objects = store.list(cls, namespace if cls.NAMESPACED else None)
    except Exception:
        return []
    return [CompletionItem(o.name) for o in objects if o.name.startswith(incomplete)]
