"""Which store a command works on: the embedded SQLite file or a real cluster.

One rule for every command (the CLI, the scheduler, the driver):
1. `--kubeconfig`, `--context` or `--in-cluster` on the command line: the API server
   (naming `--store` as well is an error: one backend per command);
2. else `--store` on the command line or `KUBEDRA_STORE`: that embedded store;
3. else `KUBECONFIG` in the environment: the API server (as kubectl would);
4. else the embedded store `./.kubedra/state.db`.
`~/.kube/config` is read only when the API server is chosen and no file is named, so a
machine with a kubeconfig never sends the zero-setup commands (`demo`, `cluster create`)
to a real cluster by surprise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kubedra.cluster.kubeconfig import load_config
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.rest import DEFAULT_BURST, DEFAULT_QPS, ApiClient
from kubedra.cluster.sqlite import DEFAULT_PATH, SqliteStore
from kubedra.errors import KubedraError


@dataclass(frozen=True)
class Backend:
    """The backend options as given; `open()` makes the store."""

    store: str | None = None  # an embedded store named on the command line or KUBEDRA_STORE
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST

    @property
    def cluster_flags(self) -> bool:
        return bool(self.kubeconfig or self.context or self.in_cluster)

    def is_kubernetes(self, environ: Mapping[str, str] | None = None) -> bool:
        env = os.environ if environ is None else environ
        if self.cluster_flags:
            if self.store:
                raise KubedraError(
                    "--store names the embedded store, --kubeconfig/--context/--in-cluster a "
                    "cluster: give one of them"
                )
            return True
        return not self.store and bool(env.get("KUBECONFIG"))

    @property
    def store_path(self) -> str:
        return self.store or DEFAULT_PATH

    def open(self, create: bool = False) -> SqliteStore | KubeStore:
        """The store; an embedded one is made where missing only with `create`."""
        if not self.is_kubernetes():
            return SqliteStore(self.store_path, create=create)
        config = load_config(self.kubeconfig, self.context, self.in_cluster)
        return KubeStore(ApiClient(config, qps=self.qps, burst=self.burst))

    def describe(self) -> str:
        """Where commands go, for `-v` and errors."""
        if not self.is_kubernetes():
            return f"embedded store {self.store_path}"
        config = load_config(self.kubeconfig, self.context, self.in_cluster)
        return f"cluster {config.server} (context {config.context or '-'})"
