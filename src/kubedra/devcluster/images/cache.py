"""The build cache: where downloads and built things live, the keys they are kept under,
reusing a written layer, marking what a build used and forgetting what none used for a
while, one build at a time, work folders.

Everything slow (apt lists, .debs, wheels, the unpacked root, written layers) is cached
under `~/.cache/kubedra/images`, keyed by what determines it, including the image code
itself (every module of this package and oci.py): a warm rebuild only rewrites the archive,
and an edit to the image code builds anew.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kubedra.devcluster import oci
from kubedra.devcluster.binaries import cache_root

KEEP_DAYS = 30  # cached things unused for longer are removed after a build


@dataclass(frozen=True)
class Cache:
    """Where downloads (apt lists, .debs, wheels) and built things (roots, layers) live.

    Two folders so that a test can build from scratch twice without downloading twice.
    """

    downloads: Path
    built: Path

    @staticmethod
    def default() -> Cache:
        """`~/.cache/kubedra/images` (or under $KUBEDRA_CACHE)."""
        root = cache_root() / "images"
        return Cache(root / "downloads", root / "built")


def cached_layer(
    cache: Cache, key: str, entries: Callable[[], Iterable[oci.Entry]], created_by: str
) -> oci.Layer:
    """A layer written once per key: the blob and its digests are kept under the cache."""
    meta = layer_meta(cache, key)
    if meta.exists():
        layer = oci.Layer.from_json(json.loads(meta.read_text()))
        if layer.blob.path.exists():
            used(meta)
            return layer
    layer = oci.write_layer(entries(), meta.with_suffix(".tar.gz"), created_by)
    meta.write_text(json.dumps(layer.to_json(), indent=1, sort_keys=True))
    return layer


def layer_meta(cache: Cache, key: str) -> Path:
    """Where a cached layer's digests are kept."""
    return cache.built / "layers" / f"{key}.json"


def used(path: Path) -> bool:
    """Mark a cached file as used now (pruning goes by that); False if it is not there."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def prune(cache: Cache) -> None:
    """Forget what no build used for KEEP_DAYS (every source edit makes a kubedra layer,
    every Debian update a root), and work folders a killed build left behind."""
    cutoff = time.time() - KEEP_DAYS * 86400
    for meta in cache.built.glob("layers/*.json"):
        if meta.stat().st_mtime < cutoff:
            meta.with_suffix(".tar.gz").unlink(missing_ok=True)
            meta.unlink()
    for done in cache.built.glob("roots/*.done"):
        if done.stat().st_mtime < cutoff:
            shutil.rmtree(done.with_suffix(""), ignore_errors=True)
            done.unlink()
    for binary in cache.built.glob("pause/*/pause"):
        if binary.stat().st_mtime < cutoff:
            shutil.rmtree(binary.parent, ignore_errors=True)
    downloads = [*cache.downloads.glob("apt/archives/*.deb"), *cache.downloads.glob("wheels/*")]
    for download in downloads:
        if download.stat().st_mtime < cutoff:
            download.unlink()
    for work in cache.built.glob("tmp/*"):
        if work.stat().st_mtime < time.time() - 86400:
            shutil.rmtree(work, ignore_errors=True)


def cache_key(*parts: object) -> str:
    """A cache key over the parts and the image code (a changed recipe rebuilds)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    for module in code_files():
        digest.update(f"{module.name}\0".encode())
        digest.update(module.read_bytes())
    return digest.hexdigest()[:32]


def code_files() -> list[Path]:
    """The code every cache key covers: this package's modules and the OCI writer."""
    return [*sorted(Path(__file__).parent.glob("*.py")), Path(oci.__file__)]


@contextlib.contextmanager
def scratch(cache: Cache) -> Iterator[Path]:
    """A work folder on the cache's file system (hardlinks and renames stay in one)."""
    parent = cache.built / "tmp"
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=parent))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def locked(cache: Cache) -> Iterator[None]:
    """One build at a time per cache (apt's lists and the layer store are shared)."""
    cache.built.mkdir(parents=True, exist_ok=True)
    with (cache.built / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
