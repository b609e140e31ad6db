"""`fragmentation-random`: FGD with its simulator's rule for equal scores, the reference.

The paper's simulator gives each node FGD's integer score and takes, among the nodes with
the best score, the one with the smallest name; before the run it renames every node with
a prefix drawn from a seeded random permutation. So equal scores are broken by one random
node order, fixed for the whole run (not by packing, and not by a fresh draw per pod as
the stock kube-scheduler's host selection does). This policy does the same: the order is
a hash of the run's seed (`reseed`) and the node name, so a run repeats exactly. The
report sets it beside kubedra's `fragmentation`, which breaks those ties by packing.
"""

from __future__ import annotations

import zlib

from kubedra.scheduler.policies.fragmentation import Fragmentation


class FragmentationRandom(Fragmentation):
    name = "fragmentation-random"
    free_weight = 0.0

    def __init__(self) -> None:
        super().__init__()
        self._salt = b"0/"

    def reseed(self, seed: int) -> None:
        """Draw the run's node order from `seed` (the simulator passes its run seed)."""
        self._salt = f"{seed}/".encode()

    def tie_break(self, node: str) -> int:
        return zlib.crc32(self._salt + node.encode())
