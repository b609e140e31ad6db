"""`fragmentation-random`: FGD exactly as published, the reference for `fragmentation`.

The paper's scheduler gives each node FGD's integer score and, like the kube-scheduler's
host selection, picks uniformly at random among the nodes with the best score. This policy
does the same, so the report can compare kubedra's `fragmentation` (which breaks those ties
by packing) with the published algorithm in the same engine. The random order is a hash of
the pod and node names: it is the same in every run, so results stay reproducible.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.policies.fragmentation import Fragmentation


class FragmentationRandom(Fragmentation):
    name = "fragmentation-random"
    free_weight = 0.0

    def __init__(self) -> None:
        super().__init__()
        self._salt = b""

    def prepare(self, pod: Pod, claims: Sequence[ResourceClaim]) -> None:
        super().prepare(pod, claims)
        self._salt = f"{pod.metadata.namespace}/{pod.metadata.name}/".encode()

    def tie_break(self, node: str) -> int:
        return zlib.crc32(self._salt + node.encode())
