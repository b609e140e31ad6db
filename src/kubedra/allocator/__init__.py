"""The structured-parameters DRA allocator (upstream k8s.io/dynamic-resource-allocation/structured).

Pure: no I/O. Build an `Inventory` once from all ResourceSlices (and DeviceTaintRules), an
`AllocatedState` from the claims' statuses, then call `allocate` per (pod, node).
"""

from kubedra.allocator.api import Allocation, Explanation, allocate, explain
from kubedra.allocator.blockers import diagnose, holders_of
from kubedra.allocator.explain import STAGES, Blocker, RequestFunnel, Unsatisfiable
from kubedra.allocator.inventory import Inventory
from kubedra.allocator.search import CelSelectorError, ConstraintFailure, DeviceOrder
from kubedra.allocator.state import AllocatedState
from kubedra.allocator.types import (
    MAX_RESULTS_PER_CLAIM,
    AllocationError,
    AllocationTimeout,
    DeviceRef,
    Features,
    NodeInfo,
    RequestKey,
)

__all__ = [
    "MAX_RESULTS_PER_CLAIM",
    "STAGES",
    "AllocatedState",
    "Allocation",
    "AllocationError",
    "AllocationTimeout",
    "Blocker",
    "CelSelectorError",
    "ConstraintFailure",
    "DeviceOrder",
    "DeviceRef",
    "Explanation",
    "Features",
    "Inventory",
    "NodeInfo",
    "RequestFunnel",
    "RequestKey",
    "Unsatisfiable",
    "allocate",
    "diagnose",
    "explain",
    "holders_of",
]
