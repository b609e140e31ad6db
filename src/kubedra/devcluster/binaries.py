"""Upstream's control-plane binaries, built from their published Go modules and cached.

kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from
`k8s.io/kubernetes` (one Go module in `tools/controlplane/kube`, which pins every staging
module with `replace` lines, as a consumer of k8s.io/kubernetes must); etcd comes from
`go.etcd.io/etcd/server/v3` in a module of its own (both pull gRPC and OpenTelemetry, and
one module would make Go's version selection move them for each other). They are built
once per machine into `~/.cache/kubedra/controlplane/<versions>/bin` (or
`$KUBEDRA_CACHE/controlplane/...`), with the version stamped in so `/version` reports the
release. Nothing built is ever written into the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kubedra.errors import KubedraError

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.3"
KUBE_COMMANDS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet",  # the real node's (`dev-cluster up --real-node`)
)
GO_MIN = (1, 26)


class BinariesMissing(KubedraError):
    """The control-plane binaries are not built (and cannot be built here)."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the built binaries."""

    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    @property
    def names(self) -> tuple[str, ...]:
        return (*KUBE_COMMANDS, "etcd")

    def complete(self) -> bool:
        return all(os.access(self.path(n), os.X_OK) for n in self.names)


def cache_root() -> Path:
    base = os.environ.get("KUBEDRA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "kubedra"
    )
    return Path(base)


def binaries() -> Binaries:
    """Where this kubedra's pinned versions live (built or not)."""
    key = f"kubernetes-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}"
    return Binaries(cache_root() / "controlplane" / key / "bin")


def modules_dir() -> Path:
    """`tools/controlplane` of the kubedra checkout this package runs from."""
    return Path(__file__).resolve().parents[3] / "tools" / "controlplane"


def require() -> Binaries:
    """The binaries, or a clear error saying how to build them."""
    found = binaries()
    if found.complete():
        return found
    raise BinariesMissing(
        f"the control-plane binaries are not built ({found.folder}): run "
        "`kubedra dev-cluster build` (needs Go 1.26+ and the Go module proxy, about "
        "20-40 minutes and 5 GB the first time)"
    )


def build(out: TextIO = sys.stderr, force: bool = False) -> Binaries:
    """Build whatever is missing; returns the binaries. Idempotent and resumable: Go's
    module and build caches make a second run after an interruption fast."""
    target = binaries()
    if target.complete() and not force:
        return target
    go = _go()
    modules = modules_dir()
    if not (modules / "kube" / "go.mod").exists():
        raise BinariesMissing(
            f"{modules} not found: build the control plane from a kubedra checkout"
        )
    target.folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    kube = [f"k8s.io/kubernetes/cmd/{name}" for name in KUBE_COMMANDS]
    _go_build(go, modules / "kube", kube, target.folder, _kube_ldflags(), out)
    etcd_tmp = target.folder / ".etcd-build"
    etcd_tmp.mkdir(exist_ok=True)
    _go_build(go, modules / "etcd", ["go.etcd.io/etcd/server/v3"], etcd_tmp, _etcd_ldflags(), out)
    # Go names a /vN module's binary after the element before the version ("server").
    (built,) = etcd_tmp.iterdir()
    built.replace(target.path("etcd"))
    etcd_tmp.rmdir()
    seconds = time.monotonic() - started
    size = sum(f.stat().st_size for f in target.folder.iterdir()) / 2**20
    out.write(
        f"built {', '.join(target.names)} in {seconds:.0f} s ({size:.0f} MiB) -> {target.folder}\n"
    )
    return target


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BinariesMissing("Go is not installed: the control plane is built with Go 1.26+")
    version = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout
    digits = version.strip().removeprefix("go").split(".")
    try:
        major_minor = (int(digits[0]), int(digits[1]))
    except (IndexError, ValueError):
        major_minor = GO_MIN
    if major_minor < GO_MIN:
        raise BinariesMissing(f"Go {version.strip()} is too old: Go 1.26+ is needed")
    return go


def _go_build(
    go: str,
    module: Path,
    packages: list[str],
    out_dir: Path,
    ldflags: str,
    out: TextIO,
    tags: str = "",
) -> None:
    out.write(f"go build {' '.join(packages)} ...\n")
    out.flush()
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    command = [go, "build", "-trimpath", "-pgo=off", "-ldflags", ldflags, "-o", f"{out_dir}/"]
    command += ["-tags", tags] if tags else []
    done = subprocess.run(
        [*command, *packages], cwd=module, env=env, text=True, capture_output=True
    )
    if done.returncode != 0:
        raise BinariesMissing(
            f"go build in {module} failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
        )


def _kube_ldflags() -> str:
    """Stamp the release into the binaries, as upstream's release build does."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return " ".join(flags)


def _etcd_ldflags() -> str:
    return "-s -w"
