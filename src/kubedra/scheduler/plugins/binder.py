"""DefaultBinder: `pods/binding`, the pod's uid as precondition (the claims were reserved
for this pod, not for whatever pod has its name by now), after PreBind's claim writes."""

from __future__ import annotations

from kubedra.api.core import Pod
from kubedra.scheduler.binding import bind_pod
from kubedra.scheduler.framework.interfaces import BindPlugin
from kubedra.scheduler.framework.state import CycleState


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    def bind(self, state: CycleState, pod: Pod, node: str) -> Pod | None:
        return bind_pod(self.handle.store, pod, node, patience=self.handle.patience)
