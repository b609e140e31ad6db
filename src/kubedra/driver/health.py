"""Device health: what is wrong with a device, how bad it is, and the taint that says so.

A backend reports the faults each device has now (`Backend.health()`): on NVML the queries
and events of a GPU (critical Xid errors, double-bit ECC, pages waiting for retirement or
remapping, the GPU fallen off the bus, thermal or power slowdown), on the simulated
backend the faults injected by `kubedra driver fault`. A fault becomes a taint on the
device in the published ResourceSlice (upstream's device taints, KEP-5055: key, value,
effect, timeAdded): the scheduler keeps new claims off the device, and a NoExecute taint
makes the eviction controller evict the pods using it. The taint goes when the device
recovers. The effect follows the fault's severity, configurable per severity: a degraded
device (thermal, power) NoSchedule, a failed one (lost, Xid, ECC) NoExecute by default.

Keys follow NVIDIA's DRA driver where it has one (`gpu.nvidia.com/xid` with the Xid code
as value, `gpu.nvidia.com/gpu-lost`); kubedra adds `ecc`, `thermal` and `power`, and also
removes a taint when the device recovers (NVIDIA's keeps it until the driver restarts).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

import msgspec

from kubedra.api.resource import Device, DeviceTaint

DEGRADED, FAILED = "degraded", "failed"
DEFAULT_EFFECTS = {DEGRADED: "NoSchedule", FAILED: "NoExecute"}
EFFECTS = ("None", "NoSchedule", "NoExecute")


class FaultKind(StrEnum):
    LOST = "lost"
    XID = "xid"
    ECC = "ecc"
    THERMAL = "thermal"
    POWER = "power"


# kind -> (taint key suffix, severity)
KINDS: dict[FaultKind, tuple[str, str]] = {
    FaultKind.LOST: ("gpu-lost", FAILED),
    FaultKind.XID: ("xid", FAILED),
    FaultKind.ECC: ("ecc", FAILED),
    FaultKind.THERMAL: ("thermal", DEGRADED),
    FaultKind.POWER: ("power", DEGRADED),
}


@dataclass(frozen=True)
class Fault:
    """One thing wrong with a device: its kind, a value for the taint (an Xid code, "dbe")
    and a sentence for people (the pod's allocatedResourcesStatus message)."""

    kind: FaultKind
    value: str = ""
    message: str = ""

    @property
    def severity(self) -> str:
        return KINDS[self.kind][1]


def parse_effects(spec: str) -> dict[str, str]:
    """`degraded=NoSchedule,failed=NoExecute` (either part may be left out) -> effects."""
    effects = dict(DEFAULT_EFFECTS)
    for part in filter(None, (p.strip() for p in spec.split(","))):
        severity, _, effect = part.partition("=")
        if severity not in effects or effect not in EFFECTS:
            raise ValueError(
                f"{part!r}: expected degraded=EFFECT or failed=EFFECT, EFFECT one of "
                f"{', '.join(EFFECTS)}"
            )
        effects[severity] = effect
    return effects


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class DeviceHealth:
    """What the driver knows of one device's health now, and since when each fault is."""

    faults: dict[FaultKind, tuple[Fault, str]]  # kind -> (fault, time it was first seen)
    changed: float  # time.time() of the last change

    @property
    def healthy(self) -> bool:
        return not self.faults

    def message(self) -> str:
        return "; ".join(f.message or f.kind.value for f, _ in self.faults.values())


class HealthState:
    """Every device's health, fed by the backend's reports; turns faults into taints.
    Thread-safe: the monitor writes, the publisher, the health stream and metrics read."""

    def __init__(self, driver: str, effects: Mapping[str, str] = DEFAULT_EFFECTS) -> None:
        self.driver, self.effects = driver, dict(effects)
        self._lock = threading.Condition()
        self._devices: dict[str, DeviceHealth] = {}
        self.version = 0  # bumped at every change: streams wait for a new one

    def update(self, devices: Sequence[str], reported: Mapping[str, Sequence[Fault]]) -> list[str]:
        """Take the backend's report (faults per device; a device missing from it is
        healthy); returns the devices whose health changed."""
        changed = []
        stamp, now = now_rfc3339(), time.time()
        with self._lock:
            for name in devices:
                old = self._devices.get(name)
                before = old.faults if old is not None else {}
                faults = {f.kind: (f, _since(before, f, stamp)) for f in reported.get(name, ())}
                if old is None or _kinds(faults) != _kinds(before):
                    self._devices[name] = DeviceHealth(faults, now)
                    changed.append(name)
            if changed:
                self.version += 1
                self._lock.notify_all()
        return changed

    def snapshot(self) -> dict[str, DeviceHealth]:
        with self._lock:
            return dict(self._devices)

    def wait_for_change(self, version: int, timeout: float) -> int:
        """Block until the state is newer than `version` (or `timeout`); the new version."""
        with self._lock:
            self._lock.wait_for(lambda: self.version != version, timeout)
            return self.version

    def taints(self, name: str) -> tuple[DeviceTaint, ...]:
        """The device's taints, one per fault kind (one taint per key, as upstream's
        validation allows), in a stable order so an unchanged device republishes nothing."""
        with self._lock:
            health = self._devices.get(name)
            faults = sorted(health.faults.items()) if health is not None else []
        return tuple(
            DeviceTaint(
                key=f"{self.driver}/{KINDS[kind][0]}",
                value=fault.value or None,
                effect=self.effects[fault.severity],
                time_added=since,
            )
            for kind, (fault, since) in faults
        )

    def tainted(self, devices: Sequence[Device]) -> list[Device]:
        """The devices with their health taints added (taints of their own kept)."""
        out = []
        for device in devices:
            taints = self.taints(device.name)
            if taints:
                device = msgspec.structs.replace(device, taints=(*device.taints, *taints))
            out.append(device)
        return out


def _since(before: Mapping[FaultKind, tuple[Fault, str]], fault: Fault, stamp: str) -> str:
    """A fault already there keeps the time it was first seen (a taint's timeAdded)."""
    kept = before.get(fault.kind)
    return kept[1] if kept is not None and kept[0] == fault else stamp


def _kinds(faults: Mapping[FaultKind, tuple[Fault, str]]) -> dict[FaultKind, Fault]:
    return {kind: fault for kind, (fault, _) in faults.items()}


class Monitor:
    """Polls the backend's health every `interval` seconds in a thread and calls
    `on_change(devices)` when any device's health changed (the driver republishes its
    slices and tells the kubelet's health stream)."""

    def __init__(
        self,
        state: HealthState,
        devices: Callable[[], Sequence[str]],
        report: Callable[[], Mapping[str, Sequence[Fault]]],
        on_change: Callable[[list[str]], None],
        interval: float,
    ) -> None:
        self.state, self.devices, self.report = state, devices, report
        self.on_change, self.interval = on_change, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)
        self.checks = 0  # loops run (for the benchmark and tests)

    def check(self) -> list[str]:
        """One look at every device (also called once at start, before publishing)."""
        self.checks += 1
        return self.state.update(self.devices(), self.report())

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                changed = self.check()
            except Exception:  # a failing query must not end the monitor
                continue
            if changed:
                self.on_change(changed)
