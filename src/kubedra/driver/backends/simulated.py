"""The simulated backend: a hardware profile of `kubedra.catalog` (GPUs, RDMA NICs, TPUs).

A profile with MIG runs the driver's MIG code against a `SimulatedNvml` of its GPUs
(`mig_nvml`), which keeps the instances made in the plugin directory. Its health is the
faults `kubedra driver fault` injected; its metrics are deterministic
figures that follow what prepared claims hold (`SimulatedSampler`): a held device busy, a
free one idle, so tests and demos see the series move with an allocation and its release.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kubedra.api.core import Node
from kubedra.api.resource import Device
from kubedra.catalog import nvidia
from kubedra.catalog import profile as catalog_profile
from kubedra.catalog.inventory import DriverInventory, stable_uuid
from kubedra.driver import faults
from kubedra.driver.backends.nvml import Nvml
from kubedra.driver.backends.simnvml import STATE_FILE, SimulatedNvml
from kubedra.driver.cdi import SIMULATED, CdiHost
from kubedra.driver.devicemetrics import DeviceSample, Sampler
from kubedra.driver.health import Fault, FaultKind


class SimulatedBackend:
    def __init__(self, profile: str, node: str) -> None:
        try:
            self.profile = catalog_profile(profile)
        except KeyError as err:
            raise ValueError(
                str(err.args[0]) if err.args else f"unknown profile {profile!r}"
            ) from None
        self.name = f"simulated:{profile}"
        self.node_name = node

    def inventories(self) -> list[DriverInventory]:
        return list(self.profile.inventories(self.node_name))

    def node(self) -> Node | None:
        return self.profile.node(self.node_name)

    def cdi_host(self) -> CdiHost:
        return SIMULATED  # no device exists on the host: stand-in nodes, injectable anywhere

    def mig_nvml(self, driver: str, plugin_dir: Path) -> Nvml | None:
        """A profile with MIG: its GPUs behind a `SimulatedNvml` whose instances live in the
        plugin directory, so they outlive the driver as real ones do."""
        gpu = self.profile.gpu
        if driver != nvidia.DRIVER or not self.profile.mig or gpu is None or gpu.mig is None:
            return None
        return SimulatedNvml(self.profile, self.node_name, plugin_dir / STATE_FILE)

    def health_report(self, plugin_dir: Path) -> Callable[[], Mapping[str, Sequence[Fault]]]:
        """The faults `kubedra driver fault` injected into this node's devices."""
        return lambda: faults.read(plugin_dir, self.node_name)

    def device_sampler(self, driver: str, plugin_dir: Path) -> Sampler:
        """Figures for the devices of `driver` that follow the claims holding them and the
        faults injected (`SimulatedSampler`)."""
        inventory = next((i for i in self.inventories() if i.driver == driver), None)
        devices = inventory.devices if inventory is not None else ()
        return SimulatedSampler(devices, lambda: faults.read(plugin_dir, self.node_name))

    def close(self) -> None:
        pass


# --- figures for the metrics -------------------------------------------------------------


@dataclass(frozen=True)
class Typical:
    """What a GPU model draws and how warm it runs, idle and busy."""

    idle_watts: float
    busy_watts: float
    idle_celsius: float
    busy_celsius: float


# By `productName`. Busy: about 85-90 % of the board power limit of NVIDIA's datasheets
# (H100 and H200 SXM 700 W, A100 SXM4 400 W, L4 72 W, B200 1,000 W) as training holds it;
# idle about a tenth; temperatures as a well-cooled HGX board shows them. Plausible figures
# for demos, not measurements.
TYPICAL = {
    "NVIDIA H100 80GB HBM3": Typical(70, 620, 33, 68),
    "NVIDIA H200": Typical(75, 630, 32, 66),
    "NVIDIA A100-SXM4-80GB": Typical(60, 350, 31, 62),
    "NVIDIA A100-SXM4-40GB": Typical(55, 340, 31, 62),
    "NVIDIA L4": Typical(16, 68, 35, 72),
    "NVIDIA B200": Typical(140, 900, 34, 70),
}
OTHER_GPU = Typical(50, 300, 32, 65)
TPU_MEMORY = {"v5litepod": 16 << 30, "v6e": 32 << 30}  # HBM per chip (Google's TPU docs)
SLOWDOWN_CELSIUS = 91  # a GPU in thermal slowdown (the fault injected) is about this hot
_BUSY_MEMORY = 0.8  # of a held device's memory in use


def _attr(device: Device, name: str) -> str:
    attr = device.attributes.get(name)
    return str(attr.value) if attr is not None and attr.value is not None else ""


def _memory(device: Device) -> int | None:
    capacity = device.capacity.get("memory")
    return capacity.value.value() if capacity is not None else None


def _jitter(name: str) -> float:
    """A fixed number in [0, 1) per device, so that devices differ a little, repeatably."""
    return zlib.crc32(name.encode()) % 1000 / 1000


def _used(total: int | None, load: float) -> int | None:
    return None if total is None else (int(total * _BUSY_MEMORY * load) >> 20) << 20


def simulated_samples(
    devices: Sequence[Device], in_use: Collection[str], injected: Mapping[str, Sequence[Fault]]
) -> list[DeviceSample]:
    """Each device's figures: a held device busy (utilization about 0.9, 80 % of its memory,
    its model's busy power and temperature), a free one idle; a GPU whose MIG devices are
    held is as busy as their share of its memory. A MIG device has figures while held (it
    exists while a claim holds it) and memory only, as NVML reports it. Faults injected:
    thermal makes the GPU hot, power brake holds it at idle power, ECC counts a double-bit
    error, a lost GPU has no figures."""
    held = set(in_use)
    share: dict[str, float] = {}  # GPU uuid -> the memory its held MIG devices take
    for device in devices:
        parent = _attr(device, "parentUUID")
        if parent and device.name in held:
            share[parent] = share.get(parent, 0) + (_memory(device) or 0)
    out = []
    for device in devices:
        kinds = {f.kind for f in injected.get(device.name, ())}
        if FaultKind.LOST in kinds:
            continue
        kind, model = _attr(device, "type"), _attr(device, "productName")
        jitter, total = _jitter(device.name), _memory(device)
        busy = device.name in held
        if kind == "mig":
            if busy:
                parent = _attr(device, "parentUUID")
                out.append(
                    DeviceSample(
                        device=device.name,
                        uuid=f"MIG-{stable_uuid(parent, device.name)}",
                        model=model,
                        memory_used_bytes=_used(total, 1.0),
                        memory_total_bytes=total,
                    )
                )
            continue
        uuid = _attr(device, "uuid")
        if kind == "gpu":
            load = 1.0 if busy else min(1.0, share.get(uuid, 0) / total if total else 0.0)
            typical = TYPICAL.get(model, OTHER_GPU)
            watts = typical.idle_watts + (typical.busy_watts - typical.idle_watts) * load
            celsius = typical.idle_celsius + (typical.busy_celsius - typical.idle_celsius) * load
            if FaultKind.THERMAL in kinds:
                celsius = max(celsius, SLOWDOWN_CELSIUS)
            if FaultKind.POWER in kinds:
                watts = typical.idle_watts
            out.append(
                DeviceSample(
                    device=device.name,
                    uuid=uuid,
                    model=model,
                    utilization=round(load * (0.88 + 0.1 * jitter), 3),
                    memory_utilization=round(load * (0.45 + 0.2 * jitter), 3),
                    memory_used_bytes=_used(total, load),
                    memory_total_bytes=total,
                    temperature_celsius=round(celsius + 2 * jitter),
                    power_watts=round(watts + 5 * jitter * load, 1),
                    ecc_single=0,
                    ecc_double=1 if FaultKind.ECC in kinds else 0,
                )
            )
        elif _attr(device, "tpuGen"):
            tpu_memory = TPU_MEMORY.get(_attr(device, "tpuGen"))
            load = 1.0 if busy else 0.0
            out.append(
                DeviceSample(
                    device=device.name,
                    uuid=uuid,
                    model=_attr(device, "tpuGen"),
                    utilization=round(load * (0.88 + 0.1 * jitter), 3),
                    memory_used_bytes=_used(tpu_memory, load),
                    memory_total_bytes=tpu_memory,
                )
            )
    return out


class SimulatedSampler:
    """`simulated_samples` of `devices` with the faults `injected()` answers, plus an energy
    counter per device: the power of each sample times the time since the previous one."""

    def __init__(
        self,
        devices: Sequence[Device],
        injected: Callable[[], Mapping[str, Sequence[Fault]]] = dict,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.devices, self.injected, self.clock = tuple(devices), injected, clock
        self._energy: dict[str, float] = {}
        self._last: tuple[float, dict[str, float]] | None = None  # time, watts per device

    def __call__(self, in_use: Collection[str]) -> list[DeviceSample]:
        samples = simulated_samples(self.devices, in_use, self.injected())
        now = self.clock()
        if self._last is not None:
            then, watts = self._last
            for name, power in watts.items():
                self._energy[name] = self._energy.get(name, 0.0) + power * (now - then)
        self._last = now, {s.device: s.power_watts for s in samples if s.power_watts is not None}
        return [
            s if s.power_watts is None else _with_energy(s, self._energy.get(s.device, 0.0))
            for s in samples
        ]


def _with_energy(sample: DeviceSample, joules: float) -> DeviceSample:
    return replace(sample, energy_joules=round(joules, 3))
