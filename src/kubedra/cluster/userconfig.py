"""Where a user's commands go, kept as kubectl keeps it in a kubeconfig: one per-user
default store and named contexts, one of them current.

The default store is `$XDG_DATA_HOME/kubedra/state.db` (`~/.local/share/kubedra/state.db`):
the same from every folder, as a kubeconfig is. Contexts live in
`$XDG_CONFIG_HOME/kubedra/config` (`~/.config/kubedra/config`), a small YAML file:

    current-context: lab
    contexts:
    - name: lab
      store: /srv/kubedra/lab.db          # an embedded store
    - name: dev
      kubeconfig: ~/.kube/config          # a cluster: a kubeconfig and one of its contexts
      context: kind-dev

Without the file there is one context, `default`: the default store. `kubedra config`
reads and writes it (`current-context`, `get-contexts`, `use-context`, `set-context`,
`delete-context`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubedra.errors import KubedraError

DEFAULT_CONTEXT = "default"


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("XDG_DATA_HOME") or _home(env) / ".local" / "share") / "kubedra"


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("XDG_CONFIG_HOME") or _home(env) / ".config") / "kubedra" / "config"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def default_store(environ: Mapping[str, str] | None = None) -> Path:
    """The store of the `default` context."""
    return data_home(environ) / "state.db"


@dataclass(frozen=True)
class Context:
    """A named place commands go: an embedded store, or a kubeconfig and its context."""

    name: str
    store: str | None = None
    kubeconfig: str | None = None
    context: str | None = None

    @property
    def is_cluster(self) -> bool:
        return self.store is None

    def describe(self) -> str:
        if not self.is_cluster:
            return f"embedded store {self.store}"
        within = f", context {self.context}" if self.context else ""
        return f"cluster of kubeconfig {self.kubeconfig or '~/.kube/config'}{within}"

    def to_dict(self) -> dict[str, str]:
        keys = ("name", "store", "kubeconfig", "context")
        return {k: v for k in keys if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class UserConfig:
    """The contexts of one user (the file's content, or the built-in default)."""

    current: str
    contexts: tuple[Context, ...]
    path: Path
    exists: bool

    def get(self, name: str) -> Context:
        for context in self.contexts:
            if context.name == name:
                return context
        known = ", ".join(c.name for c in self.contexts)
        raise KubedraError(f'no context "{name}" in {self.path} (known: {known})')

    def with_context(self, context: Context) -> UserConfig:
        others = tuple(c for c in self.contexts if c.name != context.name)
        return UserConfig(self.current, (*others, context), self.path, self.exists)

    def save(self) -> None:
        """Write the file whole (a reader never sees half of it)."""
        import yaml

        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"current-context": self.current, "contexts": [c.to_dict() for c in self.contexts]}
        scratch = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        scratch.write_text(yaml.safe_dump(body, sort_keys=False))
        os.replace(scratch, self.path)


def load(environ: Mapping[str, str] | None = None) -> UserConfig:
    """The user's contexts; the built-in `default` alone when there is no file."""
    path = config_path(environ)
    builtin = Context(DEFAULT_CONTEXT, store=str(default_store(environ)))
    if not path.exists():
        return UserConfig(DEFAULT_CONTEXT, (builtin,), path, False)
    import yaml  # only with a file: most commands of most users never read one

    try:
        raw = yaml.safe_load(path.read_text()) or {}
        entries = raw.get("contexts") or []
        contexts = tuple(_context(entry) for entry in entries)
        current = str(raw.get("current-context") or DEFAULT_CONTEXT)
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError) as err:
        raise KubedraError(f"{path}: not a kubedra config ({err})") from None
    if not any(c.name == DEFAULT_CONTEXT for c in contexts):
        contexts = (builtin, *contexts)
    return UserConfig(current, contexts, path, True)


def _context(entry: object) -> Context:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ValueError("every context needs a name")
    if entry.get("store") is not None and entry.get("kubeconfig") is not None:
        raise ValueError(f"context {entry['name']}: a store or a kubeconfig, not both")
    store = entry.get("store")
    kubeconfig = entry.get("kubeconfig")
    context = entry.get("context")
    return Context(
        entry["name"],
        str(Path(store).expanduser()) if store is not None else None,
        str(Path(kubeconfig).expanduser()) if kubeconfig is not None else None,
        str(context) if context is not None else None,
    )
