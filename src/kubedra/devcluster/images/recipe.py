"""What a recipe (pause, busybox, kubedra) is: a function from the cache and a log to the
Image it built, the layers and config that `build` writes as an archive."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from kubedra.devcluster import oci
from kubedra.devcluster.images.cache import Cache
from kubedra.devcluster.images.host import Log

ENV_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Image:
    """What a recipe returns: the layers and config to write under a reference."""

    reference: str
    layers: tuple[oci.Layer, ...]
    config: oci.ImageConfig


Recipe: TypeAlias = Callable[[Cache, Log], Image]
