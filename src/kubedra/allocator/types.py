"""Small value types shared by the allocator modules (features, node, ids, errors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from kubedra.errors import KubedraError

# Upstream's per-claim result limit (resourceapi.AllocationResultsMaxSize).
MAX_RESULTS_PER_CLAIM = 32


@dataclass(frozen=True)
class Features:
    """The allocator's feature switches (upstream `structured.Features`), 1.37 defaults.

    `binding_conditions` stands for both DRADeviceBindingConditions and
    DRAResourceClaimDeviceStatus (upstream's single DeviceBindingAndStatus flag).
    `fractional_capacity_range` is DRAFractionalCapacityRange (beta in 1.37): capacity
    request ranges are rounded in milli units, so fractional steps work.
    """

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_taint_rules: bool = True
    consumable_capacity: bool = True
    binding_conditions: bool = True
    fractional_capacity_range: bool = True
    list_type_attributes: bool = False


DEFAULT_FEATURES = Features()


def stable_variant(features: Features) -> bool:
    """Whether upstream would run its oldest allocator ("stable") for these switches.

    NewAllocator picks the first implementation that supports every enabled feature; the
    stable one supports only admin access, prioritized lists, partitionable devices and
    taints, and knows no distinctAttribute constraint.
    """
    newer = ("consumable_capacity", "binding_conditions", "fractional_capacity_range",
             "list_type_attributes")  # fmt: skip
    return not any(getattr(features, name) for name in newer)


@dataclass(frozen=True)
class NodeInfo:
    """The node allocation is attempted for: its name and labels (for node selectors)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


class DeviceRef(NamedTuple):
    """Identity of a device: driver, pool name, device name (upstream DeviceID)."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class RequestKey(NamedTuple):
    """A request of a claim: claim as `namespace/name`, request as `req` or `req/sub`."""

    claim: str
    request: str


class AllocationError(KubedraError):
    """A fatal problem with the input: upstream's Allocate returns an error (not "no fit")."""


class ResultsLimitExceeded(AllocationError):
    """A claim's requests need more devices than its status may hold, whatever the node
    (upstream checks AllocationResultsMaxSize request by request before the search)."""

    def __init__(self, message: str, claim: str, request: str, need: int) -> None:
        super().__init__(message)
        self.claim, self.request, self.need = claim, request, need


class AllocationTimeout(AllocationError):
    """The search ran past its time or step budget (upstream: the filter timeout)."""
