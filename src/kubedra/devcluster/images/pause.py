"""The pause image (localhost/kubedra-pause:3.10): tools/images/pause.c compiled with
`gcc -static -Os`, the sandbox image containerd is configured with on the dev node."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from kubedra.devcluster import oci
from kubedra.devcluster.images.cache import Cache, cache_key, cached_layer, scratch, used
from kubedra.devcluster.images.host import Log, checkout, run, tool
from kubedra.devcluster.images.recipe import Image

PAUSE_REFERENCE = "localhost/kubedra-pause:3.10"
PAUSE_CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror")


def pause_image(cache: Cache, log: Log) -> Image:
    """The sandbox image: one static binary, run as upstream's pause runs (65535)."""
    binary = _pause_binary(cache, log)
    key = cache_key("pause-layer", oci.sha256_file(binary))
    layer = cached_layer(cache, key, lambda: [oci.file("pause", binary, 0o755)], "pause.c")
    config = oci.ImageConfig(entrypoint=("/pause",), user="65535:65535")
    return Image(PAUSE_REFERENCE, (layer,), config)


def _pause_binary(cache: Cache, log: Log) -> Path:
    """tools/images/pause.c compiled once per source, flags and compiler version."""
    source = checkout() / "tools" / "images" / "pause.c"
    gcc = tool("gcc", "gcc (and libc6-dev for -static)")
    version = run([gcc, "--version"]).splitlines()[0]
    key = cache_key(
        "pause-bin", hashlib.sha256(source.read_bytes()).hexdigest(), PAUSE_CFLAGS, version
    )
    binary = cache.built / "pause" / key / "pause"
    if binary.exists():
        used(binary)
        return binary
    log(f"compiling {source.name} ({version})")
    with scratch(cache) as work:
        shutil.copy(source, work / "pause.c")  # a fixed path: nothing of the host's in it
        run([gcc, *PAUSE_CFLAGS, "-o", "pause", "pause.c"], cwd=work)
        binary.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work / "pause", binary)
    return binary
