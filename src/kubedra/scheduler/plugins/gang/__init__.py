"""Gang scheduling of PodGroups (all or nothing) and their topology domain."""

from kubedra.scheduler.plugins.gang.plugin import GANG_TIMEOUT_S, NAME, GangScheduling

__all__ = ["GANG_TIMEOUT_S", "NAME", "GangScheduling"]
