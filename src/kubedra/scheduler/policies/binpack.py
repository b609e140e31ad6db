"""`binpack`: fill partially used nodes and NVLink domains first, keep whole nodes free."""

from __future__ import annotations

from kubedra.scheduler.policies.by_free import ByFreeDevices


class Binpack(ByFreeDevices):
    name = "binpack"
    fewest_first = True  # whole-free nodes last (names break ties)
