"""NodePrepareResources / NodeUnprepareResources, independent of the gRPC version.

Per claim (drivers.md §5.2): check the reference the kubelet sent (UID, namespace and name in
the formats the API server makes; anything else gets a per-claim error before any path is
built); GET the ResourceClaim by namespace/name, require the same UID ("claim got replaced"
otherwise) and a `status.allocation` whose node selector admits this node; take the results
of this driver, which must all be in this node's pool and name published devices; apply
this driver's opaque config from class and claim (`kubedra.driver.config`); commit the entry
to the checkpoint, then write the claim's CDI spec; answer with the CDI ids per device, and
hand the claim to the status writer (`status.devices`, in the background). Already
prepared claims are answered from the checkpoint, without the API server (the kubelet
retries, also across restarts of either side). Unprepare commits the removal, then deletes
the CDI spec and host dirs; a claim that is not prepared is not an error. One claim's
failure never fails the others: every claim of the call gets its own entry. The
commit-first order is what makes a kill -9 at any point recoverable (`recovery`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from kubedra.api.core import Node
from kubedra.api.resource import AllocationResult, Device, ResourceClaim
from kubedra.api.selection import NodeSelectorError, node_selector_matches
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import Store, T
from kubedra.driver import files
from kubedra.driver.cdi import SIMULATED, AllocatedDevice, CdiHost, build_spec
from kubedra.driver.checkpoint import Checkpoint, PreparedClaim, PreparedDevice, claim_problem
from kubedra.driver.claimfiles import ClaimFiles, embed, uses_mps
from kubedra.driver.config import ConfigError, config_for, describe
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.metrics import DriverMetrics
from kubedra.driver.recovery import recover
from kubedra.driver.status import StatusWriter, device_data
from kubedra.errors import KubedraError, NotFound

log = get_logger("prepare")
LOCK_NAME = "driver.lock"


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass
class PrepareResult:
    devices: list[PreparedDevice] = field(default_factory=list)
    error: str = ""


class PrepareError(Exception):
    """A claim that cannot be prepared; the message goes into its `error` entry."""


class DeviceState:
    """Prepared claims of one driver on one node, backed by the checkpoint file.

    Holds the plugin directory's lock for its lifetime (`close` releases it), so a second
    instance on the same node waits instead of overwriting this one's checkpoint."""

    def __init__(
        self,
        store: Store,
        driver: str,
        node: str,
        plugin_dir: Path,
        cdi_dir: Path,
        metrics: DriverMetrics | None = None,
        *,
        statuses: StatusWriter | None = None,
        lock_timeout: float = 60.0,
        cdi_host: CdiHost = SIMULATED,
    ) -> None:
        self.store, self.driver, self.node = store, driver, node
        self.statuses, self.cdi_host = statuses, cdi_host
        self.plugin_dir = files.ensure_dir(plugin_dir, files.PLUGIN_DIR_MODE)
        self.metrics = metrics or DriverMetrics(driver, node)
        self._lock = threading.Lock()
        self._devices: dict[str, Device] = {}
        # Claim UID -> the pods its status.reservedFor named at prepare (the device metrics'
        # labels; replaced whole on change, so readers need no lock; empty after a restart).
        self.consumers: dict[str, tuple[str, ...]] = {}
        self._lock_file = files.hold_lock(files.child(plugin_dir, LOCK_NAME), lock_timeout)
        try:
            self.files = ClaimFiles(plugin_dir, cdi_dir, driver)
            self.checkpoint = Checkpoint(plugin_dir, driver, node)
            snapshot = recover(self.checkpoint, self.files, store, self.metrics)
        except BaseException:
            self.close()
            raise
        self._prepared, self._generation = dict(snapshot.claims), snapshot.generation
        self.metrics.set_prepared(len(self._prepared))
        if self._prepared:
            log_event(log, "checkpoint loaded", prepared=len(self._prepared))

    def close(self) -> None:
        """Release the plugin directory (another instance may take over)."""
        self._lock_file.close()

    def set_devices(self, devices: Iterable[Device]) -> None:
        """The devices currently published for this node (what prepare can hand out)."""
        with self._lock:
            self._devices = {d.name: d for d in devices}

    @property
    def prepared(self) -> Mapping[str, PreparedClaim]:
        return dict(self._prepared)

    def _commit(self, claims: dict[str, PreparedClaim]) -> None:
        """Save `claims` as the next generation; memory follows only a successful save."""
        generation = self._generation + 1
        self.checkpoint.save(claims, generation)
        self._prepared, self._generation = claims, generation

    # --- prepare ----------------------------------------------------------------------

    def prepare(self, claims: Iterable[ClaimRef]) -> dict[str, PrepareResult]:
        results: dict[str, PrepareResult] = {}
        claims = list(claims)
        if not claims:  # the health probe: answered without waiting for a prepare in flight
            return results
        with self._lock:
            for ref in claims:
                start = time.perf_counter()
                try:
                    results[ref.uid] = PrepareResult(devices=self._prepare_one(ref))
                except (PrepareError, files.UnsafePath) as err:
                    results[ref.uid] = PrepareResult(error=str(err))
                except Exception as err:  # never let one claim fail the call
                    log.exception("prepare failed unexpectedly")
                    results[ref.uid] = PrepareResult(error=f"internal error: {err}")
                failed = bool(results[ref.uid].error)
                self.metrics.observe_claim("prepare", time.perf_counter() - start, failed)
                log_event(
                    log,
                    "claim prepare failed" if failed else "claim prepared",
                    logging.WARNING if failed else logging.INFO,
                    claim=f"{ref.namespace[:63]}/{ref.name[:253]}",
                    uid=ref.uid[:36],
                    devices=[d.device_name for d in results[ref.uid].devices],
                    error=results[ref.uid].error or None,
                )
            self.metrics.set_prepared(len(self._prepared))
        return results

    def _prepare_one(self, ref: ClaimRef) -> list[PreparedDevice]:
        problem = claim_problem(ref.uid, ref.namespace, ref.name)
        if problem:
            raise PrepareError(f"invalid claim reference: {problem}")
        entry = self._prepared.get(ref.uid)
        if entry is not None:
            self.files.materialize(entry)  # e.g. /var/run/cdi is a tmpfs: reboot
        else:
            entry = self._new_entry(ref)
            self._commit({**self._prepared, ref.uid: entry})
            try:
                self.files.materialize(entry)
            except Exception:
                self._roll_back(ref.uid)
                raise
        if self.statuses is not None:
            self.statuses.enqueue(entry)
        return entry.devices

    def _new_entry(self, ref: ClaimRef) -> PreparedClaim:
        """The checkpoint entry of a claim not yet prepared, its CDI spec included."""
        self.files.spec_path(ref.uid)  # refuses a planted link before anything is committed
        claim = self._get_claim(ref)
        allocation = claim.status.allocation if claim.status else None
        if allocation is None:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} is not allocated")
        self._check_node(ref, allocation)
        mine = [r for r in allocation.devices.results if r.driver == self.driver]
        if not mine:
            raise PrepareError(
                f"ResourceClaim {ref.namespace}/{ref.name} has no devices of driver {self.driver}"
            )
        allocated: list[AllocatedDevice] = []
        for result in mine:
            if result.pool != self.node:
                raise PrepareError(
                    f"device {result.pool}/{result.device} is allocated from pool "
                    f"{result.pool!r}, not from this node's pool {self.node!r}"
                )
            device = self._devices.get(result.device)
            if device is None:
                raise PrepareError(f"device {result.device!r} is not published on node {self.node}")
            device_type = device.attributes.get("type")
            type_name = str(device_type.value) if device_type is not None else ""
            try:
                config = config_for(
                    self.driver, result.request, type_name, allocation.devices.config
                )
            except ConfigError as err:
                raise PrepareError(f"request {result.request!r}: {err}") from None
            allocated.append(AllocatedDevice(result.request, device, describe(config)))
        sharing = {a.device.name: a.sharing for a in allocated}
        mps_dir = self.files.host_dir(ref.uid) if uses_mps(sharing) else None
        spec, ids = build_spec(self.driver, ref.uid, allocated, mps_dir, self.cdi_host)
        entry = PreparedClaim(
            uid=ref.uid,
            namespace=ref.namespace,
            name=ref.name,
            devices=[
                PreparedDevice(
                    request_names=[result.request.split("/", 1)[0]],
                    pool_name=result.pool,
                    device_name=result.device,
                    cdi_device_ids=[cdi_id],
                    share_id=result.share_id,
                )
                for result, cdi_id in zip(mine, ids, strict=True)
            ],
            sharing=sharing,
            device_data={a.device.name: data for a in allocated if (data := device_data(a.device))},
            prepared_at=now_rfc3339(),
            generation=self._generation + 1,
        )
        spec["annotations"].update(embed(entry))
        self.consumers = {**self.consumers, ref.uid: _pods(claim)}
        return msgspec.structs.replace(entry, cdi_spec=spec)

    def _roll_back(self, uid: str) -> None:
        """Undo a committed prepare whose files could not be written (the kubelet retries)."""
        try:
            self._commit({u: c for u, c in self._prepared.items() if u != uid})
            self.files.remove(uid)
        except Exception:  # the entry stays committed: the next prepare answers from it
            log.exception("rolling back a failed prepare failed")

    def _check_node(self, ref: ClaimRef, allocation: AllocationResult) -> None:
        """The allocation is for this node: its node selector (set by the allocator for
        node-local devices, `metadata.name In [node]`) selects this node."""
        selector = allocation.node_selector
        if selector is None:
            return
        labels: dict[str, str] = {}
        if any(term.match_expressions for term in selector.node_selector_terms):
            labels = self._read(Node, self.node, "").metadata.labels
        try:
            admitted = node_selector_matches(selector, self.node, labels)
        except NodeSelectorError as err:
            admitted, why = False, f" ({err})"
        else:
            why = ""
        if not admitted:
            raise PrepareError(
                f"ResourceClaim {ref.namespace}/{ref.name} is allocated for other nodes: "
                f"status.allocation.nodeSelector does not select node {self.node}{why}"
            )

    def _read(self, cls: type[T], name: str, namespace: str) -> T:
        """An object from the API, or a PrepareError saying why it cannot be read."""
        what = f"{cls.KIND} {namespace}/{name}" if namespace else f"{cls.KIND} {name}"
        try:
            return self.store.get(cls, name, namespace) if namespace else self.store.get(cls, name)
        except NotFound:
            raise PrepareError(f"{what} not found") from None
        except KubedraError as err:  # unreachable, forbidden: the kubelet retries
            raise PrepareError(f"cannot read {what}: {err}") from None

    def _get_claim(self, ref: ClaimRef) -> ResourceClaim:
        claim = self._read(ResourceClaim, ref.name, ref.namespace)
        if claim.metadata.uid != ref.uid:
            raise PrepareError(
                f"ResourceClaim {ref.namespace}/{ref.name} got replaced: UID is "
                f"{claim.metadata.uid}, the kubelet asked for {ref.uid}"
            )
        return claim

    # --- unprepare --------------------------------------------------------------------

    def unprepare(self, claims: Iterable[ClaimRef]) -> dict[str, str]:
        """Claim UID -> error ("" on success, also for claims that were not prepared)."""
        errors: dict[str, str] = {}
        with self._lock:
            for ref in claims:
                start = time.perf_counter()
                try:
                    self._unprepare_one(ref)
                    errors[ref.uid] = ""
                except (PrepareError, files.UnsafePath) as err:
                    errors[ref.uid] = str(err)
                except Exception as err:
                    log.exception("unprepare failed")
                    errors[ref.uid] = f"unprepare failed: {err}"
                self.metrics.observe_claim(
                    "unprepare", time.perf_counter() - start, bool(errors[ref.uid])
                )
                log_event(
                    log,
                    "claim unprepared",
                    claim=f"{ref.namespace[:63]}/{ref.name[:253]}",
                    uid=ref.uid[:36],
                    error=errors[ref.uid] or None,
                )
            self.metrics.set_prepared(len(self._prepared))
        return errors

    def _unprepare_one(self, ref: ClaimRef) -> None:
        problem = claim_problem(ref.uid, ref.namespace, ref.name)
        if problem:
            raise PrepareError(f"invalid claim reference: {problem}")
        if self.statuses is not None:
            self.statuses.cancel(ref.uid)
        if ref.uid in self._prepared:
            self._commit({u: c for u, c in self._prepared.items() if u != ref.uid})
        if ref.uid in self.consumers:
            self.consumers = {u: p for u, p in self.consumers.items() if u != ref.uid}
        self.files.remove(ref.uid)


def _pods(claim: ResourceClaim) -> tuple[str, ...]:
    """The pods a claim is reserved for (status.reservedFor), by name."""
    reserved = claim.status.reserved_for if claim.status else ()
    return tuple(sorted({r.name for r in reserved if r.resource == "pods" and not r.api_group}))
