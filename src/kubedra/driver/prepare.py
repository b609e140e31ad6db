"""NodePrepareResources / NodeUnprepareResources, independent of the gRPC version.

Per claim (drivers.md §5.2): GET the ResourceClaim by namespace/name, require the same UID
("claim got replaced" otherwise) and a `status.allocation`; take the results of this driver,
which must all be in this node's pool and name published devices; apply this driver's opaque
config (`kubedra.driver.config`); write the claim's CDI spec; checkpoint; answer with the CDI
ids per device. Already prepared claims are answered from the checkpoint (the kubelet retries,
also across restarts of either side). Unprepare removes the CDI spec, per-claim host dirs and
the checkpoint entry; a claim that is not prepared is not an error. One claim's failure never
fails the others: every claim of the call gets its own entry.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubedra.api.resource import Device, ResourceClaim
from kubedra.cluster.sqlite import now_rfc3339
from kubedra.cluster.store import Store
from kubedra.driver.cdi import AllocatedDevice, CdiWriter, build_spec
from kubedra.driver.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from kubedra.driver.config import ConfigError, config_for, describe
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.metrics import DriverMetrics
from kubedra.errors import NotFound

log = get_logger("prepare")


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
    """Prepared claims of one driver on one node, backed by the checkpoint file."""

    def __init__(
        self,
        store: Store,
        driver: str,
        node: str,
        plugin_dir: Path,
        cdi_dir: Path,
        metrics: DriverMetrics | None = None,
    ) -> None:
        self.store, self.driver, self.node = store, driver, node
        self.plugin_dir = plugin_dir
        self.cdi = CdiWriter(cdi_dir, driver)
        self.checkpoint = Checkpoint(plugin_dir / "checkpoint.json", driver, node)
        self.metrics = metrics or DriverMetrics(driver, node)
        self._lock = threading.Lock()
        self._devices: dict[str, Device] = {}
        self._prepared = self.checkpoint.load()
        self.metrics.set_prepared(len(self._prepared))
        if self._prepared:
            log_event(log, "checkpoint loaded", prepared=len(self._prepared))

    def set_devices(self, devices: Iterable[Device]) -> None:
        """The devices currently published for this node (what prepare can hand out)."""
        with self._lock:
            self._devices = {d.name: d for d in devices}

    @property
    def prepared(self) -> Mapping[str, PreparedClaim]:
        return dict(self._prepared)

    # --- prepare ----------------------------------------------------------------------

    def prepare(self, claims: Iterable[ClaimRef]) -> dict[str, PrepareResult]:
        results: dict[str, PrepareResult] = {}
        with self._lock:
            for ref in claims:
                start = time.perf_counter()
                try:
                    results[ref.uid] = PrepareResult(devices=self._prepare_one(ref))
                except PrepareError as err:
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
                    claim=f"{ref.namespace}/{ref.name}",
                    uid=ref.uid,
                    devices=[d.device_name for d in results[ref.uid].devices],
                    error=results[ref.uid].error or None,
                )
            self.metrics.set_prepared(len(self._prepared))
        return results

    def _prepare_one(self, ref: ClaimRef) -> list[PreparedDevice]:
        done = self._prepared.get(ref.uid)
        if done is not None:
            if done.cdi_spec and not self.cdi.path(ref.uid).exists():
                self.cdi.write(ref.uid, done.cdi_spec)  # e.g. /var/run/cdi is a tmpfs: reboot
            return done.devices
        claim = self._get_claim(ref)
        allocation = claim.status.allocation if claim.status else None
        if allocation is None:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} is not allocated")
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
        spec, ids, host_dirs = build_spec(self.driver, ref.uid, allocated, self.plugin_dir)
        for directory in host_dirs:
            for sub in ("pipe", "shm"):
                (directory / sub).mkdir(parents=True, exist_ok=True)
        path = self.cdi.write(ref.uid, spec)
        devices = [
            PreparedDevice(
                request_names=[result.request.split("/", 1)[0]],
                pool_name=result.pool,
                device_name=result.device,
                cdi_device_ids=[cdi_id],
                share_id=result.share_id,
            )
            for result, cdi_id in zip(mine, ids, strict=True)
        ]
        self._prepared[ref.uid] = PreparedClaim(
            uid=ref.uid,
            namespace=ref.namespace,
            name=ref.name,
            devices=devices,
            cdi_spec_file=str(path),
            cdi_spec=spec,
            sharing={a.device.name: a.sharing for a in allocated},
            host_dirs=[str(d) for d in host_dirs],
            prepared_at=now_rfc3339(),
        )
        try:
            self.checkpoint.save(self._prepared)
        except BaseException:
            del self._prepared[ref.uid]
            self.cdi.remove(ref.uid)
            raise
        return devices

    def _get_claim(self, ref: ClaimRef) -> ResourceClaim:
        try:
            claim = self.store.get(ResourceClaim, ref.name, ref.namespace)
        except NotFound:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} not found") from None
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
                except Exception as err:
                    log.exception("unprepare failed")
                    errors[ref.uid] = f"unprepare failed: {err}"
                self.metrics.observe_claim(
                    "unprepare", time.perf_counter() - start, bool(errors[ref.uid])
                )
                log_event(
                    log,
                    "claim unprepared",
                    claim=f"{ref.namespace}/{ref.name}",
                    uid=ref.uid,
                    error=errors[ref.uid] or None,
                )
            self.metrics.set_prepared(len(self._prepared))
        return errors

    def _unprepare_one(self, ref: ClaimRef) -> None:
        done = self._prepared.get(ref.uid)
        self.cdi.remove(ref.uid)
        if done is None:
            return
        for directory in done.host_dirs:
            shutil.rmtree(directory, ignore_errors=True)
        remaining = {uid: c for uid, c in self._prepared.items() if uid != ref.uid}
        self.checkpoint.save(remaining)
        self._prepared = remaining
