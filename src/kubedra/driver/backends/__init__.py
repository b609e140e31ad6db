"""Where a node agent's inventory comes from: real GPUs (NVML) or a simulated catalog profile.

A backend answers `inventories()`: one `DriverInventory` per DRA driver it serves; the agent
publishes the one of its own driver. `devices()` in `kubedra.driver.prepare` reads device
details (UUIDs, minors) back from the published devices, so backends need nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kubedra.api.core import Node
from kubedra.catalog.inventory import DriverInventory
from kubedra.driver.cdi import CdiHost
from kubedra.driver.devicemetrics import Sampler
from kubedra.driver.health import Fault

if TYPE_CHECKING:
    from kubedra.driver.backends.nvml import Nvml

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

    def mig_nvml(self, driver: str, plugin_dir: Path) -> Nvml | None:
        """The NVML that makes the MIG instances of `driver`'s claims at prepare
        (`kubedra.driver.mig`): the machine's, or the simulated profile's GPUs (their
        instances kept in `plugin_dir`); None where no GPU of `driver` is in MIG mode."""
        ...

    def device_sampler(self, driver: str, plugin_dir: Path) -> Sampler:
        """A function answering the figures of each device of `driver` now, for the
        metrics (`kubedra.driver.devicemetrics`): NVML's, or the simulated node's, which
        follow what prepared claims hold and the faults injected into it."""
        ...

    def close(self) -> None: ...


def open_backend(
    kind: str, node: str, profile: str | None = None, *, ignored_xids: Collection[int] | None = None
) -> Backend:
    """`nvml` (real NVIDIA GPUs) or `simulated` (catalog profile `profile` as node `node`).
    `ignored_xids`: the Xid errors that leave a GPU healthy (nvml; default: NVIDIA's
    application errors, `nvml.APPLICATION_XIDS`)."""
    if kind == "nvml":
        from kubedra.driver.backends.nvml import APPLICATION_XIDS, NvmlBackend

        return NvmlBackend.open(APPLICATION_XIDS if ignored_xids is None else ignored_xids)
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


def parse_xids(spec: str) -> frozenset[int]:
    """`--ignored-xids`: a comma-separated list of Xid codes; `+` in front adds them to
    NVIDIA's application errors (`+94,95`), `none` ignores none."""
    from kubedra.driver.backends.nvml import APPLICATION_XIDS

    spec = spec.strip()
    if spec == "none":
        return frozenset()
    base = APPLICATION_XIDS if spec.startswith("+") else frozenset()
    try:
        codes = {int(part) for part in spec.removeprefix("+").split(",") if part.strip()}
    except ValueError:
        raise ValueError(
            f"{spec!r}: expected Xid codes separated by commas (e.g. 13,31 or +94), or none"
        ) from None
    return base | codes
