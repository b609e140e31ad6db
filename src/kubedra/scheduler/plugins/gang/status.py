"""A PodGroup's `PodGroupInitiallyScheduled` condition and events, as upstream's scheduler
reports a group: False (reason Unschedulable) with why while the group cannot be placed,
True once its requirement was met (minCount pods bound), and never False again after."""

from __future__ import annotations

import logging

import msgspec

from kubedra.api.resource import Condition
from kubedra.api.scheduling import (
    INITIALLY_SCHEDULED,
    REASON_UNSCHEDULABLE,
    PodGroup,
    PodGroupStatus,
)
from kubedra.cluster.events import Event
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.errors import KubedraError
from kubedra.scheduler.binding import update_status_retrying
from kubedra.scheduler.framework.interfaces import Handle

log = logging.getLogger(__name__)

# The True condition's reason (upstream's scheduler writes "Scheduled").
REASON_SCHEDULED = "Scheduled"


def condition(pg: PodGroup) -> Condition | None:
    conditions = pg.status.conditions if pg.status else ()
    return next((c for c in conditions if c.type == INITIALLY_SCHEDULED), None)


def initially_scheduled(pg: PodGroup) -> bool:
    found = condition(pg)
    return found is not None and found.status == "True"


def report(handle: Handle, pg: PodGroup, scheduled: bool, message: str) -> None:
    """Set the condition (unless it says so already, or is True for good) and record an
    event when it changes: Normal Scheduled, or Warning FailedScheduling."""
    status = "True" if scheduled else "False"
    reason = REASON_SCHEDULED if scheduled else REASON_UNSCHEDULABLE

    def change(current: PodGroup) -> PodGroup | None:
        found = condition(current)
        if found is not None and (
            found.status == "True" or (found.status == status and found.message == message)
        ):
            return None
        stamp = (
            found.last_transition_time
            if found is not None and found.status == status and found.last_transition_time
            else now_rfc3339()
        )
        new = Condition(
            type=INITIALLY_SCHEDULED,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=stamp,
            observed_generation=current.metadata.generation,
        )
        old = current.status or PodGroupStatus()
        kept = tuple(c for c in old.conditions if c.type != INITIALLY_SCHEDULED)
        return msgspec.structs.replace(
            current, status=msgspec.structs.replace(old, conditions=(*kept, new))
        )

    try:
        written = update_status_retrying(handle.store, pg, change)
    except KubedraError as err:  # gone, or the server away: the next attempt says it
        log.debug("condition of pod group %s/%s not written: %s", pg.namespace, pg.name, err)
        return
    if written is None:
        return
    kind, why = ("Normal", "Scheduled") if scheduled else ("Warning", "FailedScheduling")
    handle.recorder.record(Event(written, kind, why, "Scheduling", message))
