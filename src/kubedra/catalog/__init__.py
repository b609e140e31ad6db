"""Realistic hardware profiles: nodes and the devices real DRA drivers publish for them.

`profile(name)` / `PROFILES` give a `Profile`; `Profile.node(name)` is the core/v1 Node and
`Profile.inventories(name)` the devices (and counter sets) each driver on it publishes.
Splitting inventories into ResourceSlices is the driver module's job.
"""

from __future__ import annotations

from kubedra.catalog.gpus import GPU_MODELS, GpuSpec, MigGeometry, MigProfile
from kubedra.catalog.inventory import DriverInventory, PcieRootComplex
from kubedra.catalog.nvidia import NVLINK_DOMAIN_ATTRIBUTE
from kubedra.catalog.profiles import PROFILES, Profile, profile

__all__ = [
    "GPU_MODELS",
    "NVLINK_DOMAIN_ATTRIBUTE",
    "PROFILES",
    "DriverInventory",
    "GpuSpec",
    "MigGeometry",
    "MigProfile",
    "PcieRootComplex",
    "Profile",
    "profile",
]
