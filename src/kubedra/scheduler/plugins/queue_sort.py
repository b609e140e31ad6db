"""PrioritySort: the active queue's order, as upstream's default QueueSort plugin: higher
priority first, then the older pod (kubedra breaks the remaining ties by namespace and
name, so that a simulation's order is a function of its input)."""

from __future__ import annotations

from kubedra.api.core import Pod
from kubedra.scheduler.framework.interfaces import QueueSortPlugin
from kubedra.scheduler.queue import priority_order


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"

    def queue_key(self, pod: Pod) -> tuple[int, str, str, str]:
        return priority_order(pod)
