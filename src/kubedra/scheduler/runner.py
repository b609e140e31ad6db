"""`kubedra scheduler run`: the scheduler as a long-running, replicated component.

What kube-scheduler's main loop does around the scheduling core, for either store:
- caches fed by the store (`feed.py`), filled before anything else; a standby keeps them
  current too, so that it can take over at once;
- leader election on a Lease (`kubedra.cluster.leader`): only the leader schedules; a
  leader that cannot renew stops at once and the process exits (as kube-scheduler does),
  so that it never allocates alongside its successor;
- on a cluster, binding cycles in a pool of threads: the main thread plans the next pod
  while the writes of the previous ones are in flight (their devices assumed taken); on
  the embedded store, each cycle in one transaction, in line;
- Events, the PodScheduled condition, and metrics with /healthz and /readyz.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import socket
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from kubedra.api.resource import ResourceClaimTemplate
from kubedra.cluster.events import Recorder, recorder_for
from kubedra.cluster.leader import (
    LEASE_DURATION_S,
    RENEW_DEADLINE_S,
    RETRY_PERIOD_S,
    LeaderElector,
)
from kubedra.cluster.store import Store
from kubedra.errors import Conflict, NotFound
from kubedra.scheduler.feed import Feed, FeedStopped, LogFeed, WatchFeed
from kubedra.scheduler.metrics import SchedulerMetrics
from kubedra.scheduler.plugins.gang import GANG_TIMEOUT_S
from kubedra.scheduler.scheduler import FEED_KINDS, Outcome, Plan, Scheduler, Written

log = logging.getLogger(__name__)

STOPPED, LOST_LEASE = 0, 1  # what `run` returns
HEARTBEAT_S = 30.0  # /healthz fails when the loop has not turned for this long
IDLE_S = 0.5  # the loop turns at least this often
LEASE_NAMESPACE = "kube-system"


@dataclass(frozen=True)
class RunConfig:
    scheduler_name: str = "kubedra"
    policy: str = "first-fit"
    leader_elect: bool = True
    lease_name: str = ""  # default: the scheduler name
    lease_namespace: str = LEASE_NAMESPACE
    lease_duration: float = LEASE_DURATION_S
    renew_deadline: float = RENEW_DEADLINE_S
    retry_period: float = RETRY_PERIOD_S
    metrics_port: int | None = None
    metrics_address: str = ""
    binders: int = 16  # binding cycles in flight at most (on a cluster)
    node_selector: str = ""
    shared_nodes: str = "refuse"
    claim_controller: bool = False  # the embedded store: also the claim controller's part
    strict_cel: bool = False
    gang_timeout: float = GANG_TIMEOUT_S  # a gang's reserved pods wait this long (s)
    identity: str = ""  # default: hostname_uuid, as kube-scheduler

    @property
    def lease(self) -> str:
        return self.lease_name or self.scheduler_name


class SchedulerRunner:
    """One replica: caches, election, the loop, metrics. `run(stop)` until stopped."""

    def __init__(
        self,
        store: Store,
        config: RunConfig,
        *,
        election_store: Store | None = None,
        recorder: Recorder | None = None,
        background: bool | None = None,
    ) -> None:
        """`background`: watch the store and write in a pool of threads (default: on a
        cluster); else read the change log and write in line, in the store's transaction."""
        self.store, self.config = store, config
        self.identity = config.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.wake = threading.Event()
        if background is None:
            background = not callable(getattr(store, "transaction", None))
        self.inline = not background
        # Templates only matter to whoever generates claims from them.
        kinds = [k for k in FEED_KINDS if config.claim_controller or k is not ResourceClaimTemplate]
        self.feed: Feed = (
            LogFeed(store, kinds) if self.inline else WatchFeed(store, kinds, self.wake)
        )
        self.metrics = SchedulerMetrics(config.scheduler_name)
        client = getattr(store, "client", None)
        if client is not None:
            client.on_error = self.metrics.api_error
        self.recorder = recorder or recorder_for(store, config.scheduler_name, self.identity)
        self.scheduler = Scheduler(
            store,
            config.policy,
            scheduler_names=(config.scheduler_name,),
            strict_cel=config.strict_cel,
            feed=self.feed,
            claim_controller=config.claim_controller,
            node_selector=config.node_selector,
            shared_nodes=config.shared_nodes,
            recorder=self.recorder,
            gang_timeout=config.gang_timeout,
            freeze_loaded=True,  # the process lives as long as this scheduler
        )
        self.metrics.watch(self.scheduler)
        self.elector = (
            LeaderElector(
                election_store or store,
                config.lease,
                config.lease_namespace,
                self.identity,
                lease_duration=config.lease_duration,
                renew_deadline=config.renew_deadline,
                retry_period=config.retry_period,
            )
            if config.leader_elect
            else None
        )
        self.pool = ThreadPoolExecutor(max(1, config.binders), thread_name_prefix="bind")
        self._done: queue.SimpleQueue[tuple[Plan, Future[Written]]] = queue.SimpleQueue()
        self._in_flight = 0
        self._beat = time.monotonic()
        self._synced = False
        self.outcomes: list[Outcome] = []  # the last outcomes (tests and status)
        self.port: int | None = None

    # --- state ----------------------------------------------------------------------------

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def healthy(self) -> bool:
        return time.monotonic() - self._beat < HEARTBEAT_S

    def ready(self) -> bool:
        return self._synced

    # --- the loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> int:
        """Schedule (when leading) until `stop`; STOPPED, or LOST_LEASE when this replica
        led and could not renew (the caller should exit: in-flight writes are abandoned)."""
        if self.config.metrics_port is not None:
            self.port = self.metrics.serve(
                self.config.metrics_port, self.healthy, self.ready, self.config.metrics_address
            )
            log.info("metrics, /healthz and /readyz on port %s", self.port)
        election = threading.Event()
        if self.elector is not None:
            threading.Thread(
                target=self.elector.run,
                args=(election, self._lease_changed),
                daemon=True,
                name="leader-election",
            ).start()
        if not self.inline:
            self.scheduler.io = self.pool.submit
        # A stop during the first listing (an API server that does not answer) ends it too.
        threading.Thread(target=self._close_feed_on, args=(stop,), daemon=True).start()
        led = False
        try:
            while not stop.is_set():
                self._beat = time.monotonic()
                self.scheduler.refresh()
                self._synced = True
                if self.leading():
                    led = True
                    self._turn()
                elif led:
                    log.error("lost the lease %s: stopping", self.config.lease)
                    return LOST_LEASE
                self._report()
                self.wake.wait(self._idle())
                self.wake.clear()
            self._drain()
            return STOPPED
        except FeedStopped:
            return STOPPED
        finally:
            election.set()
            if led and self.elector is not None and stop.is_set():
                self.elector.release()
            self.pool.shutdown(wait=stop.is_set(), cancel_futures=not stop.is_set())
            self.feed.close()
            self.recorder.close()
            self.metrics.shutdown()

    def _turn(self) -> None:
        """Finish what was written, free what ended (embedded store), start new cycles."""
        self._finish_done()
        if self.config.claim_controller:
            self.scheduler.release_ended()
        self._settle()  # pods Permit held: timed out, or given back by a failed write
        while self._in_flight < self.config.binders:
            pod = self.scheduler.queue.pop()
            if pod is None:
                return
            if self.inline:
                started = time.perf_counter()
                self._outcome(self.scheduler.schedule(pod), started)
            else:
                try:
                    plan = self.scheduler.plan(pod)
                except (Conflict, NotFound):
                    self._outcome(self.scheduler.conflict(pod), time.perf_counter())
                else:
                    if isinstance(plan, Outcome):
                        self._outcome(plan, time.perf_counter())
                    else:
                        self._bind(plan)
            # As `Scheduler.run_once`: a gang this pod completed is bound now, one it made
            # fail gives its devices back before the next pod is planned.
            self._settle()

    def _settle(self) -> None:
        """Pods Permit held and has settled: those rejected or timed out are unreserved at
        once; those allowed start their binding cycle like any planned pod (in line on the
        embedded store, else in the pool, their devices staying assumed until finished)."""
        if not self.scheduler.waiting:
            return
        if self.inline:
            for outcome in self.scheduler.settle_waiting():
                self._outcome(outcome, time.perf_counter())
            return
        allowed, refused = self.scheduler.release_waiting()
        for outcome in refused:
            self._outcome(outcome, time.perf_counter())
        for plan in allowed:
            self._bind(plan)

    def _bind(self, plan: Plan) -> None:
        """The binding cycle of an assumed plan, in the pool; `finish` runs on this thread
        once it is written (`_finish_done`)."""
        self._in_flight += 1
        future = self.pool.submit(self.scheduler.write, plan)
        future.add_done_callback(functools.partial(self._written, plan))

    def _written(self, plan: Plan, future: Future[Written]) -> None:
        self._done.put((plan, future))
        self.wake.set()

    def _finish_done(self) -> None:
        while True:
            try:
                plan, future = self._done.get_nowait()
            except queue.Empty:
                return
            self._in_flight -= 1
            self._outcome(self.scheduler.finish(plan, future.result()), plan.started)

    def _drain(self, timeout: float = 30.0) -> None:
        """Stopping: let the binding cycles in flight end, and finish them."""
        deadline = time.monotonic() + timeout
        while self._in_flight and time.monotonic() < deadline:
            self.wake.wait(0.1)
            self.wake.clear()
            self._finish_done()

    def _outcome(self, outcome: Outcome, started: float) -> None:
        self.metrics.attempt(outcome.result, time.perf_counter() - started)
        self.outcomes.append(outcome)
        del self.outcomes[:-1000]
        if outcome.node:
            log.info("pod %s -> %s (%s)", outcome.pod, outcome.node, ", ".join(outcome.devices))
        elif outcome.result != "waiting":
            log.info("pod %s: %s", outcome.pod, outcome.message)

    def _report(self) -> None:
        q = self.scheduler.queue
        waiting = q.waiting
        self.metrics.set_pending(
            active=max(0, len(q) - waiting - self._in_flight),
            backoff=waiting - q.parked,
            gated=q.parked,
            binding=self._in_flight,
        )
        self.metrics.leader.set(1 if self.elector is not None and self.leading() else 0)
        if self.leading():
            self.metrics.shared_nodes.set(len(self.scheduler.shared_nodes()))
        self.metrics.observe_cluster(self.scheduler)
        if isinstance(self.feed, WatchFeed):
            self.metrics.relists.set(self.feed.relists)

    def _idle(self) -> float:
        """How long the loop may sleep: not at all while Permit has settled a waiting pod
        (allowed gang members go on at once), else until the first backoff or Permit
        timeout is due, at most IDLE_S."""
        waiting = self.scheduler.waiting
        if waiting.ready():
            return 0.0
        dues = [d for d in (self.scheduler.queue.next_due(), waiting.next_due()) if d is not None]
        if not dues:
            return IDLE_S
        return max(0.0, min(IDLE_S, min(dues) - self.scheduler.queue.clock()))

    def _close_feed_on(self, stop: threading.Event) -> None:
        stop.wait()
        self.feed.close()

    def _lease_changed(self, leading: bool) -> None:
        self.wake.set()


def exit_lost_lease() -> None:
    """What the command does when the lease is lost: end the process now, abandoning the
    writes in flight (kube-scheduler exits the same way), so none lands after a successor
    took over."""
    logging.shutdown()
    os._exit(LOST_LEASE)
