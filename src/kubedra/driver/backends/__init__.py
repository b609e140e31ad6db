"""Where a node agent's inventory comes from: real GPUs (NVML) or a simulated catalog profile.

A backend answers `inventories()`: one `DriverInventory` per DRA driver it serves; the agent
publishes the one of its own driver. `devices()` in `kubedra.driver.prepare` reads device
details (UUIDs, minors) back from the published devices, so backends need nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from kubedra.api.core import Node
from kubedra.catalog.inventory import DriverInventory
from kubedra.driver.cdi import CdiHost
from kubedra.driver.health import Fault

HealthReport = Callable[[], Mapping[str, Sequence[Fault]]]

BACKENDS = ("nvml", "simulated")


class Backend(Protocol):
    name: str

    def inventories(self) -> list[DriverInventory]: ...

    def node(self) -> Node | None:
        """The Node object this backend simulates (None for real hardware)."""
        ...

    def cdi_host(self) -> CdiHost:
        """What the node adds to CDI specs: stand-in device nodes, or the driver's files."""
        ...

    def health_report(self, plugin_dir: Path) -> HealthReport:
        """A function answering each device's faults now (its name -> faults; a device
        left out is healthy): NVML's queries, or the simulated node's injected faults."""
        ...

    def close(self) -> None: ...


def open_backend(kind: str, node: str, profile: str | None = None) -> Backend:
    """`nvml` (real NVIDIA GPUs) or `simulated` (catalog profile `profile` as node `node`)."""
    if kind == "nvml":
        from kubedra.driver.backends.nvml import NvmlBackend

        return NvmlBackend.open()
    if kind == "simulated":
        from kubedra.driver.backends.simulated import SimulatedBackend

        if not profile:
            raise ValueError("the simulated backend needs a catalog profile (--profile)")
        return SimulatedBackend(profile, node)
    raise ValueError(f"unknown backend {kind!r} (known: {', '.join(BACKENDS)})")


def inventory_for(backend: Backend, driver: str) -> DriverInventory:
    """The backend's inventory of `driver`; a clear error when it serves no such driver."""
    inventories = backend.inventories()
    for inventory in inventories:
        if inventory.driver == driver:
            return inventory
    served = ", ".join(sorted(i.driver for i in inventories)) or "none"
    raise ValueError(
        f"backend {backend.name!r} has no devices of driver {driver!r} (it serves: {served})"
    )
