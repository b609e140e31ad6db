"""`status.devices` of prepared claims: what the driver tells the API about the devices it set up.

KEP-4817 (GA in 1.37): a driver reports, per allocated device of its own, conditions
(`Ready` True once the device is configured as the class and claim configs ask) and
driver-specific `data` (here the device's identity: UUID, product, PCI address, ...).
Upstream's drivers write it after a successful prepare, in the background: API-server
latency or an outage never holds up NodePrepareResources (the example driver queues the
write with per-claim exponential backoff). The same here:
- entries are keyed by (driver, pool, device, shareID); other drivers' entries of the same
  claim are kept as they are;
- a write reads the claim, requires the UID the kubelet sent and an allocation, and puts
  the whole status back with the resourceVersion it read (`resourceclaims/status`); a
  conflict (someone else wrote in between) reads again at once;
- a claim deleted, replaced or deallocated, or a write the API refuses (invalid, forbidden)
  is dropped with one error line; anything else (the API server unreachable) is retried
  with backoff, logged once per state change;
- unprepare cancels a pending write and clears nothing: the API server itself drops the
  entries of devices that are deallocated.
Every start enqueues every checkpointed claim, so a write lost to a kill or an outage is
made again (a write that finds the status already right writes nothing).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubedra.api.resource import (
    AllocatedDeviceStatus,
    Condition,
    Device,
    ResourceClaim,
    ResourceClaimStatus,
)
from kubedra.cluster.rest import Forbidden, Unauthorized
from kubedra.cluster.store import Store
from kubedra.driver.checkpoint import PreparedClaim
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.retry import Backoff, Transitions
from kubedra.errors import Conflict, NotFound, ValidationError

READY = "Ready"
PREPARED_REASON = "Prepared"
# Attributes that identify a device to someone reading the claim (names as drivers publish
# them: NVIDIA's, Google's TPU and dranet's); `data` holds those the device has.
IDENTITY_ATTRIBUTES = (
    "uuid",
    "productName",
    "driverVersion",
    "parentUUID",
    "profile",
    "index",
    "resource.kubernetes.io/pciBusID",
    "dra.net/pciAddress",
    "dra.net/rdmaDevice",
)

log = get_logger("status")


class Dropped(Exception):
    """A status write that can never succeed (the claim is gone, replaced or deallocated)."""


def device_data(device: Device) -> dict[str, Any]:
    """The `data` of one device's status entry (empty: the entry has none)."""
    data: dict[str, Any] = {}
    for name in IDENTITY_ATTRIBUTES:
        attribute = device.attributes.get(name)
        if attribute is not None:
            data[name] = attribute.value
    return data


def entries(driver: str, claim: PreparedClaim) -> tuple[AllocatedDeviceStatus, ...]:
    """This driver's status entries for a prepared claim: one per device, Ready."""
    ready = Condition(
        type=READY,
        status="True",
        last_transition_time=claim.prepared_at or None,
        reason=PREPARED_REASON,
        message="the device is configured and its CDI spec written",
    )
    return tuple(
        AllocatedDeviceStatus(
            driver=driver,
            pool=device.pool_name,
            device=device.device_name,
            share_id=device.share_id,
            conditions=(ready,),
            data=claim.device_data.get(device.device_name) or None,
        )
        for device in claim.devices
    )


def with_entries(
    claim: ResourceClaim, driver: str, mine: Iterable[AllocatedDeviceStatus]
) -> ResourceClaim | None:
    """The claim with this driver's entries replaced by `mine` (others kept, in order);
    None when its status already says exactly that."""
    status = claim.status or ResourceClaimStatus()
    others = tuple(d for d in status.devices if d.driver != driver)
    devices = others + tuple(mine)
    if devices == status.devices:
        return None
    return msgspec.structs.replace(claim, status=msgspec.structs.replace(status, devices=devices))


@dataclass(eq=False)
class _Pending:
    claim: PreparedClaim
    due: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)


class StatusWriter:
    """Writes prepared claims' `status.devices` on a thread of its own, retrying."""

    def __init__(
        self, store: Store, driver: str, *, initial: float = 0.5, cap: float = 30.0
    ) -> None:
        self.store, self.driver = store, driver
        self.initial, self.cap = initial, cap
        self.transitions = Transitions(log, "writing claim status")
        self._pending: dict[str, _Pending] = {}
        self._busy: str | None = None
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="claim-status", daemon=True)

    def start(self) -> StatusWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop; writes not made yet are dropped (the next start makes them)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def enqueue(self, claim: PreparedClaim) -> None:
        """Write (again) the status of a prepared claim, replacing a pending write of it."""
        with self._cond:
            self._pending[claim.uid] = _Pending(claim, backoff=Backoff(self.initial, self.cap))
            self._cond.notify_all()

    def enqueue_all(self, claims: Mapping[str, PreparedClaim]) -> None:
        for claim in claims.values():
            self.enqueue(claim)

    def cancel(self, uid: str) -> None:
        """Forget a pending write (the claim was unprepared)."""
        with self._cond:
            self._pending.pop(uid, None)

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is pending or being written; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # --- the worker --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                item = self._next_due()
                if item is None:
                    return
                self._busy = item.claim.uid
            retry_in: float | None = None
            try:
                retry_in = self._attempt(item)
            finally:
                with self._cond:
                    self._busy = None
                    if self._pending.get(item.claim.uid) is item:  # not replaced meanwhile
                        if retry_in is None:
                            del self._pending[item.claim.uid]
                        else:
                            item.due = time.monotonic() + retry_in
                    self._cond.notify_all()

    def _next_due(self) -> _Pending | None:
        """The pending write due first, waiting for it; None once stopped (lock held)."""
        while not self._stopped:
            now = time.monotonic()
            due = min(self._pending.values(), key=lambda p: p.due, default=None)
            if due is not None and due.due <= now:
                return due
            self._cond.wait(None if due is None else due.due - now)
        return None

    def _attempt(self, item: _Pending) -> float | None:
        """One write; None when the item is finished (written, or dropped for good), else
        the seconds until the next attempt."""
        claim = item.claim
        where = f"{claim.namespace}/{claim.name}"
        try:
            wrote = self._write(claim)
        except Conflict:
            return 0.0  # someone wrote the claim since it was read: read it again
        except (Dropped, NotFound, ValidationError, Forbidden, Unauthorized) as err:
            log_event(
                log,
                "claim status not written",
                logging.ERROR,
                claim=where,
                uid=claim.uid,
                error=str(err) if not isinstance(err, NotFound) else "claim not found",
            )
            return None
        except Exception as err:  # unreachable, 5xx; or a bug: the driver keeps serving
            self.transitions.failed(err)
            return item.backoff.next()
        self.transitions.succeeded()
        if wrote:
            devices = [d.device_name for d in claim.devices]
            log_event(log, "claim status written", claim=where, devices=devices)
        return None

    def _write(self, prepared: PreparedClaim) -> bool:
        """Put this driver's entries into the claim's status; False when they were there."""
        claim = self.store.get(ResourceClaim, prepared.name, prepared.namespace)
        if claim.metadata.uid != prepared.uid:
            raise Dropped(f"the claim got replaced (UID {claim.metadata.uid}, not {prepared.uid})")
        if claim.status is None or claim.status.allocation is None:
            raise Dropped("the claim is not allocated any more")
        updated = with_entries(claim, self.driver, entries(self.driver, prepared))
        if updated is None:
            return False
        self.store.update_status(updated)
        return True
