"""Accelerator metrics on the node agent's /metrics: what each device is doing, and for whom.

A sampler thread asks the backend for one `DeviceSample` per device every `interval`
seconds (NVML's utilization, memory, temperature, power, energy and ECC counters; the
simulated backend's deterministic figures) and keeps the last answer. A scrape reads that
cache and the driver's prepared claims, never the hardware, so it costs microseconds per
device whatever NVML does. Each series carries the device's identity (driver, node, pool,
device, uuid, model) and, while a prepared claim holds the device, the claim's namespace
and name and a pod its `status.reservedFor` named when it was prepared: one series per pod,
as NVIDIA's DCGM exporter does, so `sum by (namespace, pod)` attributes a device to each
workload. Health faults (`kubedra.driver.health`) are series too, one per device and fault
kind, while the fault lasts.

Names follow Prometheus's conventions (base units: bytes, celsius, watts, joules; ratios
0..1; counters end in `_total`); docs/decisions.md maps them to DCGM's fields.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kubedra.driver.checkpoint import PreparedClaim
from kubedra.driver.health import HealthState
from kubedra.driver.logs import get_logger, log_event

SAMPLE_SECONDS = 5.0  # how often the sampler asks the backend (a scrape never waits for it)
LABELS = ("driver", "node", "pool", "device", "uuid", "model", "namespace", "claim", "pod")
_FREE = (("", "", ""),)  # the claim labels of a device no prepared claim holds
log = get_logger("devicemetrics")


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One device's figures at one moment; None where the device does not report it (a
    MIG device has no utilization or temperature of its own in NVML)."""

    device: str  # the name the driver publishes (gpu-0, gpu-6-mig-3g40gb-9-4)
    uuid: str = ""
    model: str = ""
    utilization: float | None = None  # 0..1 of the time a kernel ran (NVML's GPU percent)
    memory_utilization: float | None = None  # 0..1 of the time memory was read or written
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    energy_joules: float | None = None  # since the driver loaded (a counter)
    ecc_single: int | None = None  # corrected (single-bit) ECC errors since the driver loaded
    ecc_double: int | None = None  # uncorrected (double-bit)


Sampler = Callable[[Collection[str]], Sequence[DeviceSample]]
"""The backend's sampler: called with the devices prepared claims hold now (the simulated
backend makes those busy; real hardware says for itself), answers one sample per device."""


def no_samples(in_use: Collection[str]) -> Sequence[DeviceSample]:
    """The sampler of a backend with nothing to report for a driver (a NIC driver)."""
    return ()


class PreparedClaims(Protocol):
    """What the metrics read of the driver's prepared claims (`prepare.DeviceState`)."""

    @property
    def prepared(self) -> Mapping[str, PreparedClaim]: ...

    @property
    def consumers(self) -> Mapping[str, tuple[str, ...]]:
        """Claim UID -> the pods its status.reservedFor named when it was prepared."""
        ...


Holder = tuple[str, str, str]  # (namespace, claim, pod)


def holders(claims: PreparedClaims) -> dict[str, tuple[Holder, ...]]:
    """Device name -> who holds it: (namespace, claim, pod) per pod of each prepared claim
    holding it (pod "" when the claim named none), sorted."""
    consumers = claims.consumers
    found: dict[str, set[Holder]] = {}
    for uid, claim in claims.prepared.items():
        pods = consumers.get(uid) or ("",)
        for device in claim.devices:
            held = found.setdefault(device.device_name, set())
            held.update((claim.namespace, claim.name, pod) for pod in pods)
    return {device: tuple(sorted(held)) for device, held in found.items()}


@dataclass(frozen=True)
class _Cache:
    samples: tuple[DeviceSample, ...] = ()
    in_use: frozenset[str] = frozenset()  # what the sampler was told was held
    taken: float = 0.0  # time.time() of the sample; 0: none yet
    seconds: float = 0.0  # how long taking it took


class DeviceMetrics:
    """The per-device series: a prometheus_client collector reading the sampler's cache.

    `register(registry)` adds it to the driver's registry; `start()` runs the sampler every
    `interval` seconds (and soon after a scrape sees the prepared claims changed, so the
    simulated figures follow an allocation within a scrape); `sample()` takes one sample
    now (tests, benchmarks)."""

    def __init__(
        self,
        driver: str,
        node: str,
        sampler: Sampler,
        claims: PreparedClaims,
        health: HealthState | None = None,
        *,
        interval: float = SAMPLE_SECONDS,
        pool: str | None = None,
    ) -> None:
        self.driver, self.node, self.pool = driver, node, pool if pool is not None else node
        self.sampler, self.claims, self.health = sampler, claims, health
        self.interval = interval
        self._cache = _Cache()
        self._errors = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="device-metrics", daemon=True)
        self._failing = False

    # --- sampling ------------------------------------------------------------------------

    def sample(self) -> None:
        """Ask the backend for every device's figures now and keep them; a failure keeps
        the previous sample (counted in kubedra_driver_device_sample_errors_total)."""
        in_use = frozenset(holders(self.claims))
        started = time.perf_counter()
        try:
            samples = tuple(self.sampler(in_use))
        except Exception as err:  # never let a failing query end the sampler
            self._errors += 1
            if not self._failing:
                log_event(log, "device sampling failed", error=str(err))
            self._failing = True
            return
        if self._failing:
            log_event(log, "device sampling working again")
        self._failing = False
        self._cache = _Cache(samples, in_use, time.time(), time.perf_counter() - started)

    @property
    def samples(self) -> tuple[DeviceSample, ...]:
        """The figures now served."""
        return self._cache.samples

    def start(self) -> DeviceMetrics:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            if self._stop.is_set():
                return
            self._wake.clear()
            self.sample()

    # --- the collector -------------------------------------------------------------------

    def register(self, registry: CollectorRegistry) -> DeviceMetrics:
        registry.register(self)
        return self

    def describe(self) -> Iterable[Metric]:
        return ()  # no names to check in advance: the registry takes the collector as it is

    def collect(self) -> Iterable[Metric]:
        cache = self._cache
        held = holders(self.claims)
        if frozenset(held) != cache.in_use and not self._stop.is_set():
            self._wake.set()  # a claim came or went since the sample: take the next one now
        families = _Families()
        identity: dict[str, tuple[str, str]] = {}
        for s in cache.samples:
            identity[s.device] = (s.uuid, s.model)
            base = (self.driver, self.node, self.pool, s.device, s.uuid, s.model)
            for holder in held.get(s.device, _FREE):
                families.add(s, [*base, *holder])
        if self.health is not None:
            for name, state in sorted(self.health.snapshot().items()):
                uuid, model = identity.get(name, ("", ""))
                base = (self.driver, self.node, self.pool, name, uuid, model)
                for holder in held.get(name, _FREE):
                    for kind in sorted(state.faults):
                        families.fault.add_metric([*base, *holder, kind.value], 1.0)
        own = [self.driver, self.node]
        taken = GaugeMetricFamily(
            "kubedra_driver_device_sample_timestamp_seconds",
            "When the device figures now served were taken (Unix time; 0: not yet).",
            labels=("driver", "node"),
        )
        taken.add_metric(own, cache.taken)
        took = GaugeMetricFamily(
            "kubedra_driver_device_sample_duration_seconds",
            "How long the last sampling of every device took (the backend's queries).",
            labels=("driver", "node"),
        )
        took.add_metric(own, cache.seconds)
        errors = CounterMetricFamily(
            "kubedra_driver_device_sample_errors",
            "Samplings that failed (the previous figures stay served).",
            labels=("driver", "node"),
        )
        errors.add_metric(own, self._errors)
        return [*families.all(), taken, took, errors]


class _Families:
    """The metric families of one scrape."""

    def __init__(self) -> None:
        def gauge(name: str, text: str, extra: tuple[str, ...] = ()) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, text, labels=(*LABELS, *extra))

        self.utilization = gauge(
            "kubedra_device_utilization_ratio",
            "Fraction of the last sample period during which the device ran a kernel "
            "(NVML utilization.gpu / 100; DCGM_FI_DEV_GPU_UTIL / 100).",
        )
        self.memory_utilization = gauge(
            "kubedra_device_memory_utilization_ratio",
            "Fraction of the last sample period during which device memory was read or "
            "written (NVML utilization.memory / 100; DCGM_FI_DEV_MEM_COPY_UTIL / 100).",
        )
        self.memory_used = gauge(
            "kubedra_device_memory_used_bytes",
            "Device memory in use (a MIG device: its GPU instance's).",
        )
        self.memory_total = gauge(
            "kubedra_device_memory_total_bytes",
            "Device memory in all (a MIG device: its GPU instance's).",
        )
        self.temperature = gauge(
            "kubedra_device_temperature_celsius", "Device (GPU die) temperature."
        )
        self.power = gauge("kubedra_device_power_watts", "Power the device draws now.")
        self.energy = CounterMetricFamily(
            "kubedra_device_energy_joules",
            "Energy the device consumed since its driver loaded.",
            labels=LABELS,
        )
        self.ecc = CounterMetricFamily(
            "kubedra_device_ecc_errors",
            "ECC errors since the driver loaded (volatile counters), by type: single "
            "(corrected, single-bit) or double (uncorrected, double-bit).",
            labels=(*LABELS, "type"),
        )
        self.fault = gauge(
            "kubedra_device_fault",
            "1 while the device has a fault of this kind (lost, xid, ecc, thermal, power): "
            "the fault its ResourceSlice taint says.",
            ("kind",),
        )

    def add(self, s: DeviceSample, labels: list[str]) -> None:
        for family, value in (
            (self.utilization, s.utilization),
            (self.memory_utilization, s.memory_utilization),
            (self.memory_used, s.memory_used_bytes),
            (self.memory_total, s.memory_total_bytes),
            (self.temperature, s.temperature_celsius),
            (self.power, s.power_watts),
            (self.energy, s.energy_joules),
        ):
            if value is not None:
                family.add_metric(labels, float(value))
        if s.ecc_single is not None:
            self.ecc.add_metric([*labels, "single"], float(s.ecc_single))
        if s.ecc_double is not None:
            self.ecc.add_metric([*labels, "double"], float(s.ecc_double))

    def all(self) -> list[Metric]:
        return [
            self.utilization,
            self.memory_utilization,
            self.memory_used,
            self.memory_total,
            self.temperature,
            self.power,
            self.energy,
            self.ecc,
            self.fault,
        ]
