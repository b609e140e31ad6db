"""Small Go programs kubedra's tooling runs, each built from a pinned module under `tools/`.

Like the control-plane binaries (`binaries`), each is built once per machine into kubedra's
cache, never into the repository: `~/.cache/kubedra/<name>/<version>-<hash>/<name>`. The
hash covers the module's sources (`*.go`, `go.mod`, `go.sum`), so an edit or a new pin
rebuilds and an unchanged module never does. Building needs Go 1.26+ and, the first time,
the Go module proxy; running needs neither.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kubedra.devcluster.binaries import BinariesMissing, _go, _go_build, cache_root, modules_dir


@dataclass(frozen=True)
class GoTool:
    """One binary: `package` built in the module `tools/<module>`."""

    name: str
    module: str
    package: str
    version: str  # the pinned upstream release it is built from (part of the cache key)
    ldflags: str = "-s -w"
    tags: str = ""
    # More commands of the same module, built beside it into the same folder.
    companions: tuple[str, ...] = ()

    @property
    def module_dir(self) -> Path:
        return modules_dir().parent / self.module

    def key(self) -> str:
        digest = hashlib.sha256(f"{self.ldflags}\0{self.tags}\0{self.companions}".encode())
        for path in sorted(self.module_dir.iterdir()):
            if path.suffix in (".go", ".mod", ".sum"):
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
        return f"{self.version}-{digest.hexdigest()[:16]}"

    def binary(self) -> Path:
        return cache_root() / self.name / self.key() / self.name

    def build(self, out: TextIO = sys.stderr) -> Path:
        """The binary, built first if the cache lacks it; BinariesMissing without Go."""
        target = self.binary()
        if os.access(target, os.X_OK):
            return target
        go = _go()
        target.parent.mkdir(parents=True, exist_ok=True)
        packages = [self.package, *self.companions]
        _go_build(go, self.module_dir, packages, target.parent, self.ldflags, out, self.tags)
        if not os.access(target, os.X_OK):
            raise BinariesMissing(f"go build in {self.module_dir} did not produce {target}")
        return target

    def unavailable(self) -> str | None:
        """Why the binary cannot be had here (not built and no Go), or None."""
        if os.access(self.binary(), os.X_OK):
            return None
        try:
            _go()
        except BinariesMissing as err:
            return f"{self.name} is not built and cannot be: {err}"
        return None


HELM_VERSION = "v3.22.0"
HELM = GoTool(
    "helm",
    "helm",
    "helm.sh/helm/v3/cmd/helm",
    HELM_VERSION,
    ldflags=f"-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
)

# The kubelet's side of the DRA plugin protocol, from upstream's generated packages.
KUBELET_CLIENT = GoTool("kubeletclient", "kubeletclient", ".", "kubelet-v0.37.2")

CONTAINERD_VERSION = "v2.4.2"
_CONTAINERD = "github.com/containerd/containerd/v2"
# The real node's container runtime (CDI built in); runc is Debian's.
CONTAINERD = GoTool(
    "containerd",
    "node/containerd",
    f"{_CONTAINERD}/cmd/containerd",
    CONTAINERD_VERSION,
    ldflags=f"-s -w -X {_CONTAINERD}/version.Version={CONTAINERD_VERSION}",
    tags="no_btrfs",  # btrfs' snapshotter needs C headers; the node uses overlayfs
    companions=(f"{_CONTAINERD}/cmd/containerd-shim-runc-v2", f"{_CONTAINERD}/cmd/ctr"),
)


def node_binaries(out: TextIO = sys.stderr) -> dict[str, Path]:
    """containerd, its runc shim and ctr, built first if the cache lacks them."""
    folder = CONTAINERD.build(out).parent
    return {name: folder / name for name in ("containerd", "containerd-shim-runc-v2", "ctr")}
