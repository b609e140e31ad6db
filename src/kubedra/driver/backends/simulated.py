"""The simulated backend: a hardware profile of `kubedra.catalog` (GPUs, RDMA NICs, TPUs)."""

from __future__ import annotations

from kubedra.api.core import Node
from kubedra.catalog import profile as catalog_profile
from kubedra.catalog.inventory import DriverInventory
from kubedra.driver.cdi import SIMULATED, CdiHost


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

    def close(self) -> None:
        pass
