"""Which store a command works on: an embedded SQLite file or a real cluster.

One rule for every command (the CLI, the scheduler, the driver), first match wins:
1. `--kubeconfig`, `--context` or `--in-cluster` on the command line: the API server
   (naming `--store` as well is an error: one backend per command);
2. `--store` on the command line or `KUBEDRA_STORE`: that embedded store;
3. the kubedra context named by `KUBEDRA_CONTEXT`, else the current context of the user's
   kubedra config (`kubedra config use-context`; `kubedra.cluster.userconfig`), when it
   names one: its store or cluster;
4. `KUBECONFIG` in the environment: the API server (as kubectl would);
5. the user's default store, `~/.local/share/kubedra/state.db` (`$XDG_DATA_HOME`): the same
   from every folder, as a kubeconfig is.
`~/.kube/config` is read only when the API server is chosen and no file is named, so a
machine with a kubeconfig never sends the zero-setup commands (`demo`, `cluster create`)
to a real cluster by surprise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubedra.cluster import userconfig
from kubedra.cluster.qps import DEFAULT_BURST, DEFAULT_QPS
from kubedra.cluster.sqlite import SqliteStore
from kubedra.errors import KubedraError

if TYPE_CHECKING:  # the cluster client (urllib3) is imported only when a cluster is used
    from kubedra.cluster.kubernetes import KubeStore



@dataclass(frozen=True)
class Target:
    """Where the rule sent a command, and which step of it decided."""

    store: str | None  # the embedded store's path, or None for a cluster
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    why: str = ""  # e.g. "--store", "context lab", "KUBECONFIG", "the default store"

    @property
    def is_cluster(self) -> bool:
        return self.store is None


@dataclass(frozen=True)
class Backend:
    """The backend options as given; `target()` applies the rule, `open()` makes the store."""

    store: str | None = None  # an embedded store named on the command line or KUBEDRA_STORE
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST

    @property
    def cluster_flags(self) -> bool:
        return bool(self.kubeconfig or self.context or self.in_cluster)

    def target(self, environ: Mapping[str, str] | None = None) -> Target:
        env = os.environ if environ is None else environ
        if self.cluster_flags:
            if self.store:
                raise KubedraError(
                    "--store names the embedded store, --kubeconfig/--context/--in-cluster a "
                    "cluster: give one of them"
                )
            return Target(None, self.kubeconfig, self.context, self.in_cluster, "the flags")
        if self.store:
            return Target(self.store, why="--store or KUBEDRA_STORE")
        chosen = _chosen_context(env)
        if chosen is not None:
            why = f"context {chosen.name}"
            if chosen.store is not None:
                return Target(chosen.store, why=why)
            return Target(None, chosen.kubeconfig, chosen.context, why=why)
        if env.get("KUBECONFIG"):
            return Target(None, why="KUBECONFIG")
        return Target(str(userconfig.default_store(env)), why="the default store")

    def is_kubernetes(self, environ: Mapping[str, str] | None = None) -> bool:
        return self.target(environ).is_cluster

    @property
    def store_path(self) -> str:
        """The embedded store commands use (only meaningful when not on a cluster)."""
        return self.target().store or str(userconfig.default_store())

    def open(self, create: bool = False) -> SqliteStore | KubeStore:
        """The store; an embedded one is made where missing only with `create`."""
        target = self.target()
        if target.store is not None:
            return SqliteStore(target.store, create=create)
        from kubedra.cluster.kubeconfig import load_config
        from kubedra.cluster.kubernetes import KubeStore
        from kubedra.cluster.rest import ApiClient

        config = load_config(target.kubeconfig, target.context, target.in_cluster)
        return KubeStore(ApiClient(config, qps=self.qps, burst=self.burst))

    def describe(self) -> str:
        """Where commands go, for `-v` and errors."""
        target = self.target()
        if target.store is not None:
            return f"embedded store {target.store}"
        from kubedra.cluster.kubeconfig import load_config

        config = load_config(target.kubeconfig, target.context, target.in_cluster)
        return f"cluster {config.server} (context {config.context or '-'})"


def _chosen_context(env: Mapping[str, str]) -> userconfig.Context | None:
    """The kubedra context KUBEDRA_CONTEXT names, or the config file's current one (None
    without a file: the rule goes on to KUBECONFIG and the default store)."""
    config = userconfig.load(env)
    name = env.get("KUBEDRA_CONTEXT")
    if name:
        return config.get(name)
    if not config.exists:
        return None
    return config.get(config.current)
