"""`spread`: place on the emptiest node and domain (blast radius, thermal headroom)."""

from __future__ import annotations

from kubedra.scheduler.policies.by_free import ByFreeDevices


class Spread(ByFreeDevices):
    name = "spread"
    fewest_first = False
