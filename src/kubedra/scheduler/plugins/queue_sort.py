"""PrioritySort: the active queue's order, as upstream's default QueueSort plugin: higher
priority first, then the older pod (kubedra breaks the remaining ties by namespace and
name, so that a simulation's order is a function of its input).

A pod of a PodGroup takes its group's place instead of its own (the group's creation time
and name), then its own among the group's pods: a gang's pods leave the queue one after
the other, so a gang is tried as a whole and two gangs never hold parts of each other's
room (upstream's queue pops a pod group as one entity). Pods without a group keep exactly
the order above.
"""

from __future__ import annotations

from typing import Any

from kubedra.api.core import Pod
from kubedra.api.scheduling import PodGroup
from kubedra.errors import KubedraError
from kubedra.scheduler.framework.interfaces import Handle, QueueSortPlugin
from kubedra.scheduler.queue import priority_order


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self._created: dict[tuple[str, str], str] = {}  # PodGroup -> its creation time

    def queue_key(self, pod: Pod) -> tuple[Any, ...]:
        order = priority_order(pod)
        group = pod.spec.scheduling_group
        if group is None or not group.pod_group_name:
            return order
        created = self._group_created(pod.namespace, group.pod_group_name)
        if created is None:  # not there yet (the pod waits for it): its own place
            return order
        return (order[0], created, pod.namespace, group.pod_group_name, order[1], pod.name)

    def _group_created(self, namespace: str, name: str) -> str | None:
        key = (namespace, name)
        found = self._created.get(key)
        if found is None:
            try:
                pg = self.handle.store.get(PodGroup, name, namespace)
            except KubedraError:
                return None
            found = self._created[key] = pg.metadata.creation_timestamp or ""
        return found
