"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection package
does it, over any Store (the API server, or the embedded store for replicas on one file).

The rules, in short:
- a candidate takes the lease when nobody holds it, or when the holder's record has not
  changed for the lease's duration *as this candidate observed it* (its own clock measures
  how long the record stayed the same, so no two machines' clocks are compared);
- every write carries the resourceVersion read just before: of two candidates racing for
  an expired lease, one gets a conflict and stays a follower;
- the leader renews every `retry_period`; a leader that has not renewed for
  `renew_deadline` (shorter than the lease duration) stops leading before anyone else may
  take over, so two leaders never act at the same time while clocks run at the same rate;
- a leader that stops on purpose releases the lease (holder emptied, duration 1 s), so
  the standby takes over at once instead of after a full lease duration.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from kubedra.api.coordination import Lease, LeaseSpec
from kubedra.api.meta import ObjectMeta
from kubedra.cluster.store import Store
from kubedra.errors import AlreadyExists, Conflict, KubedraError, NotFound

log = logging.getLogger(__name__)

# kube-scheduler's defaults (KubeSchedulerConfiguration leaderElection).
LEASE_DURATION_S = 15.0
RENEW_DEADLINE_S = 10.0
RETRY_PERIOD_S = 2.0
JITTER = 1.2  # candidates retry after retry_period * (1 + up to this factor), as client-go


def micro_time(now: datetime | None = None) -> str:
    """A MicroTime: RFC 3339 with microseconds, in UTC."""
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Keeps trying to hold one Lease; `is_leader()` says whether it may act now."""

    def __init__(
        self,
        store: Store,
        name: str,
        namespace: str,
        identity: str,
        *,
        lease_duration: float = LEASE_DURATION_S,
        renew_deadline: float = RENEW_DEADLINE_S,
        retry_period: float = RETRY_PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise KubedraError(
                "leader election needs retry period < renew deadline < lease duration "
                f"(got {retry_period} s, {renew_deadline} s, {lease_duration} s)"
            )
        self.store, self.name, self.namespace = store, name, namespace
        self.identity = identity
        self.lease_duration, self.renew_deadline = lease_duration, renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self._observed: LeaseSpec | None = None  # the holder's record as last seen
        self._observed_at = 0.0  # when (our clock) that record was first seen
        self._renewed_at: float | None = None  # our last successful write as leader
        self.transitions = 0  # how often this elector became leader

    # --- the state ----------------------------------------------------------------------

    def is_leader(self) -> bool:
        """Held, and renewed within the renew deadline (else another may take it soon)."""
        renewed = self._renewed_at
        return renewed is not None and self.clock() - renewed < self.renew_deadline

    @property
    def holder(self) -> str:
        """Who holds the lease as last observed ('' for nobody)."""
        return (self._observed.holder_identity or "") if self._observed else ""

    # --- one attempt --------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One round: take or renew the lease if the rules allow; True when we hold it."""
        now = self.clock()
        try:
            current = self.store.get(Lease, self.name, self.namespace)
        except NotFound:
            return self._create(now)
        self._observe(current.spec, now)
        holder = current.spec.holder_identity or ""
        held_by_other = holder not in ("", self.identity)
        if held_by_other and now < self._observed_at + self._duration(current.spec):
            self._renewed_at = None
            return False
        spec = LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=round(self.lease_duration),
            acquire_time=current.spec.acquire_time if holder == self.identity else micro_time(),
            renew_time=micro_time(),
            lease_transitions=(current.spec.lease_transitions or 0)
            + (0 if holder == self.identity else 1),
        )
        try:
            written = self.store.update(msgspec.structs.replace(current, spec=spec))
        except (Conflict, NotFound):
            self._renewed_at = None
            return False
        self._won(written.spec, now, holder != self.identity)
        return True

    def release(self) -> None:
        """Give the lease up now (a leader stopping on purpose)."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            current = self.store.get(Lease, self.name, self.namespace)
            if current.spec.holder_identity != self.identity:
                return
            spec = msgspec.structs.replace(
                current.spec,
                holder_identity="",
                lease_duration_seconds=1,
                renew_time=micro_time(),
            )
            self.store.update(msgspec.structs.replace(current, spec=spec))
        except (KubedraError, OSError) as err:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, err)

    # --- the loop -----------------------------------------------------------------------

    def run(self, stop: threading.Event, on_change: Callable[[bool], None] | None = None) -> None:
        """Acquire, then renew, until `stop`; `on_change(leading)` on each change of state.
        Store errors (an API server away) count as failed rounds, never end the loop."""
        leading = False
        while not stop.is_set():
            try:
                self.try_acquire_or_renew()
            except (KubedraError, OSError) as err:
                log.warning("leader election round failed: %s", err)
            now_leading = self.is_leader()
            if now_leading != leading:
                leading = now_leading
                log.info(
                    "%s %s lease %s/%s",
                    self.identity,
                    "acquired" if leading else "lost",
                    self.namespace,
                    self.name,
                )
                if on_change is not None:
                    on_change(leading)
            wait = (
                self.retry_period if leading else self.retry_period * (1 + JITTER * random.random())
            )
            stop.wait(wait)
        self.release()

    # --- internals ----------------------------------------------------------------------

    def _create(self, now: float) -> bool:
        stamp = micro_time()
        lease = Lease(
            metadata=ObjectMeta(name=self.name, namespace=self.namespace),
            spec=LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=round(self.lease_duration),
                acquire_time=stamp,
                renew_time=stamp,
                lease_transitions=0,
            ),
        )
        try:
            written = self.store.create(lease)
        except (AlreadyExists, Conflict):
            return False
        self._won(written.spec, now, True)
        return True

    def _observe(self, spec: LeaseSpec, now: float) -> None:
        if spec != self._observed:
            self._observed, self._observed_at = spec, now

    def _won(self, spec: LeaseSpec, now: float, acquired: bool) -> None:
        self._observed, self._observed_at, self._renewed_at = spec, now, now
        if acquired:
            self.transitions += 1

    def _duration(self, spec: LeaseSpec) -> float:
        return float(spec.lease_duration_seconds or self.lease_duration)
