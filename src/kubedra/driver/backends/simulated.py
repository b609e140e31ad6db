"""The simulated backend: a hardware profile of `kubedra.catalog` (GPUs, RDMA NICs, TPUs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kubedra.api.core import Node
from kubedra.catalog import profile as catalog_profile
from kubedra.catalog.inventory import DriverInventory
from kubedra.driver import faults
from kubedra.driver.cdi import SIMULATED, CdiHost
from kubedra.driver.health import Fault


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

    def health_report(self, plugin_dir: Path) -> Callable[[], Mapping[str, Sequence[Fault]]]:
        """The faults `kubedra driver fault` injected into this node's devices."""
        return lambda: faults.read(plugin_dir, self.node_name)

    def close(self) -> None:
        pass
