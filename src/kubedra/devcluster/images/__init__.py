"""The images a real node needs, built without a registry or a container engine.

`python -m kubedra.devcluster.images NAME [--out PATH]` writes an OCI archive for
`ctr -n k8s.io images import` and prints the image reference on its last line:

- `pause` (localhost/kubedra-pause:3.10): tools/images/pause.c, `gcc -static -Os`; the
  sandbox image containerd is configured with on the dev node (pause.py).
- `busybox` (localhost/kubedra-busybox:1.35): Debian's busybox-static with links for the
  common applets; the small test image (busybox.py).
- `kubedra` (localhost/kubedra:<version>): kubedra's own image for the Helm chart, on a
  "distroless" Debian root (kubedra.py).

Debian packages come from bookworm through a private apt configuration (debian.py), wheels
from PyPI as pinned in tools/images/requirements.lock (wheels.py). Everything slow is
cached under `~/.cache/kubedra/images`, keyed by what determines it, including the image
code itself (cache.py): the same inputs give the same digest, and a warm rebuild only
rewrites the archive. This module is the API: `build`, `node_images`, `refresh`,
`write_lock`; __main__.py is the command line.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kubedra.devcluster import oci
from kubedra.devcluster.images.busybox import APPLETS, BUSYBOX_REFERENCE, busybox_image
from kubedra.devcluster.images.cache import Cache, locked, prune
from kubedra.devcluster.images.debian import Apt
from kubedra.devcluster.images.host import (
    ImageBuildError,
    Log,
    checkout,
    project_version,
)
from kubedra.devcluster.images.kubedra import kubedra_image, kubedra_reference
from kubedra.devcluster.images.pause import PAUSE_REFERENCE, pause_image
from kubedra.devcluster.images.recipe import Image, Recipe
from kubedra.devcluster.images.wheels import (
    PYTHON,
    SITE,
    compile_pyc,
    lock_path,
    unpack_wheel,
    write_lock,
)

__all__ = [
    "APPLETS",
    "BUSYBOX_REFERENCE",
    "PAUSE_REFERENCE",
    "PYTHON",
    "RECIPES",
    "SITE",
    "Built",
    "Cache",
    "Image",
    "ImageBuildError",
    "build",
    "checkout",
    "compile_pyc",
    "kubedra_reference",
    "lock_path",
    "node_images",
    "project_version",
    "refresh",
    "unpack_wheel",
    "write_lock",
]

RECIPES: dict[str, Recipe] = {
    "pause": pause_image,
    "busybox": busybox_image,
    "kubedra": kubedra_image,
}


@dataclass(frozen=True)
class Built:
    """What `build` made: the archive, its manifest digest and the name containerd gives it."""

    reference: str
    digest: str
    archive: Path


def build(
    name: str, out: Path | None = None, cache: Cache | None = None, log: TextIO = sys.stderr
) -> Built:
    """Build image `name` (pause, busybox, kubedra) into an OCI archive at `out`
    (default: the cache's `archives/NAME.tar`). One build at a time per cache."""
    if name not in RECIPES:
        raise ImageBuildError(f"unknown image {name!r}: one of {', '.join(RECIPES)}")
    cache = cache or Cache.default()
    archive = out or cache.built / "archives" / f"{name}.tar"
    say = Log(log)
    with locked(cache):
        image = RECIPES[name](cache, say)
        digest = oci.write_archive(archive, image.reference, image.layers, image.config)
        prune(cache)
    say(f"{image.reference} {digest} -> {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
    return Built(image.reference, digest, archive)


def refresh(cache: Cache | None = None, log: TextIO = sys.stderr) -> None:
    """Fetch Debian's lists again: builds then take the suite's newest packages (security
    fixes), where otherwise they keep the versions first resolved, for the same digest."""
    cache = cache or Cache.default()
    with locked(cache):
        Apt(cache.downloads / "apt", Log(log)).update()


def node_images(
    names: Sequence[str] = ("pause", "busybox", "kubedra"),
    cache: Cache | None = None,
    log: TextIO = sys.stderr,
) -> tuple[list[Path], str]:
    """The archives a real node imports when it starts, the pause image first, and the
    sandbox image reference for containerd's config. Built (or taken warm from the cache)
    into the cache's archives folder."""
    ordered = ["pause", *(n for n in names if n != "pause")]
    archives = [build(name, cache=cache, log=log).archive for name in ordered]
    return archives, PAUSE_REFERENCE
