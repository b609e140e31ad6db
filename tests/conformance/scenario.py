"""One allocator scenario, run by kubedra and by upstream's allocator.

A scenario is what one kube-scheduler Filter call sees for one node: feature switches,
the node, device classes, ResourceSlices (with DeviceTaintRules), claims already allocated,
and the claims to allocate. Objects are plain wire-form dicts, the files `kubedra
allocate -f` reads: kubedra decodes them with its own codec, the oracle with Go's.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubedra.allocator import (
    AllocatedState,
    AllocationError,
    AllocationTimeout,
    Features,
    Inventory,
    NodeInfo,
    allocate,
)
from kubedra.api.codec import decode_object, plain
from kubedra.api.resource import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice

Wire = dict[str, Any]
TIMEOUT_S = 10.0  # upstream's budget; kubedra gets upstream's step count instead
SAFETY_S = 600.0  # kubedra's wall-clock guard when it runs on a step budget

# kubedra's switches -> upstream's structured.Features (DeviceTaintRules is not an
# allocator feature upstream: the scheduler's slice tracker applies the rules).
UPSTREAM_FEATURES = {
    "admin_access": "AdminAccess",
    "prioritized_list": "PrioritizedList",
    "partitionable_devices": "PartitionableDevices",
    "device_taints": "DeviceTaints",
    "consumable_capacity": "ConsumableCapacity",
    "binding_conditions": "DeviceBindingAndStatus",
    "fractional_capacity_range": "FractionalCapacityRange",
    "list_type_attributes": "ListTypeAttributes",
}


@dataclass(frozen=True)
class Scenario:
    features: Features
    node: str
    node_labels: Mapping[str, str]
    classes: tuple[Wire, ...]
    slices: tuple[Wire, ...]
    claims: tuple[Wire, ...]
    allocated: tuple[Wire, ...] = ()
    taint_rules: tuple[Wire, ...] = ()
    tags: frozenset[str] = field(default=frozenset(), compare=False)

    def oracle_request(self) -> Wire:
        switches = {up: getattr(self.features, ours) for ours, up in UPSTREAM_FEATURES.items()}
        return {
            "features": switches,
            "deviceTaintRules": self.features.device_taint_rules,
            "node": {"name": self.node, "labels": dict(self.node_labels)},
            "classes": list(self.classes),
            "slices": list(self.slices),
            "taintRules": list(self.taint_rules),
            "allocated": list(self.allocated),
            "claims": list(self.claims),
            "timeoutMs": int(TIMEOUT_S * 1000),
        }

    def run_kubedra(self, max_steps: int | None = None) -> Outcome:
        """kubedra's answer, upstream-exact CEL, objects decoded as a manifest would be.

        With `max_steps` (upstream's effort on the same scenario) the search stops there
        instead of after a time: the same search takes the same steps, however much slower
        Python is, and a search upstream abandoned is abandoned at the same point."""
        classes = {c.name: c for c in map(_decode, self.classes)}
        inventory = Inventory.build(
            [_decode(s) for s in self.slices],
            [_decode(r) for r in self.taint_rules],
            features=self.features,
        )
        allocated = [_decode(c) for c in self.allocated]
        state = AllocatedState.from_claims(allocated, features=self.features)
        claims = [_decode(c) for c in self.claims]
        assert all(isinstance(c, ResourceClaim) for c in claims)
        try:
            found = allocate(
                claims,  # type: ignore[arg-type]
                NodeInfo(self.node, dict(self.node_labels)),
                inventory,
                classes,  # type: ignore[arg-type]
                state,
                features=self.features,
                strict_cel=True,
                timeout_s=SAFETY_S if max_steps else TIMEOUT_S,
                max_steps=max_steps,
            )
        except AllocationTimeout:
            return Outcome("timeout", steps=max_steps or 0)
        except AllocationError as exc:
            return Outcome("error", message=str(exc))
        if found.results is None:
            summary = found.unsatisfiable.summary if found.unsatisfiable else ""
            invalid = summary.startswith("invalid resource pools")
            message = "invalid pools" if invalid else ""
            return Outcome("unsatisfiable", message=message, steps=found.steps)
        results = tuple(normalized(plain(r)) for r in found.results)
        return Outcome("allocated", results=results, steps=found.steps)

    def manifests(self) -> str:
        """The scenario as one YAML stream (for a regression test or `kubedra allocate`)."""
        header = {
            "node": self.node,
            "labels": dict(self.node_labels),
            "features": {
                k: v for k, v in dataclasses.asdict(self.features).items() if v != _DEFAULTS[k]
            },
        }
        docs = [*self.classes, *self.slices, *self.taint_rules, *self.allocated, *self.claims]
        return "# " + yaml.safe_dump(header, default_flow_style=True) + yaml.safe_dump_all(
            docs, sort_keys=False
        )


_DEFAULTS = dataclasses.asdict(Features())


def to_api_form(claim: Wire) -> Wire:
    """A ResourceClaim as the API server stores it: allocationMode and count defaulted
    (upstream's allocator reads them as given and refuses an empty mode), tolerations'
    operator defaulted to Equal."""
    claim = copy.deepcopy(claim)
    for request in claim.get("spec", {}).get("devices", {}).get("requests", ()):
        for exact in [request.get("exactly"), *request.get("firstAvailable", ())]:
            if exact is None:
                continue
            exact.setdefault("allocationMode", "ExactCount")
            if exact["allocationMode"] == "ExactCount" and not exact.get("count"):
                exact["count"] = 1
            for toleration in exact.get("tolerations", ()):
                toleration.setdefault("operator", "Equal")
    return claim


def _decode(raw: Wire) -> Any:
    obj = decode_object(raw).obj
    assert isinstance(obj, DeviceClass | ResourceSlice | ResourceClaim | DeviceTaintRule)
    return obj


@dataclass(frozen=True)
class Outcome:
    """allocated (results per claim), unsatisfiable, error (fatal) or timeout."""

    kind: str
    results: tuple[Wire, ...] = ()
    message: str = ""
    steps: int = 0  # search steps (allocateOne invocations); 0: not known


def oracle_outcome(answer: Wire) -> Outcome:
    steps = int(answer.get("steps", 0))
    if answer.get("timeout"):
        return Outcome("timeout", steps=steps)
    error = answer.get("error")
    if error is not None:
        # Upstream reports "no device from a valid pool fits" as an error wrapping
        # ErrFailedAllocationOnNode: the node is unsuitable, nothing is fatal.
        if error.startswith("invalid resource pools were encountered"):
            return Outcome("unsatisfiable", message="invalid pools", steps=steps)
        return Outcome("error", message=error, steps=steps)
    if answer.get("unsatisfiable"):
        return Outcome("unsatisfiable", steps=steps)
    results = tuple(normalized(r) for r in answer.get("results", ()))
    return Outcome("allocated", results=results, steps=steps)


SHARE = "<share id>"


def normalized(result: Wire) -> Wire:
    """An AllocationResult with share IDs (random UUIDs upstream) replaced by a marker."""
    for r in result.get("devices", {}).get("results", ()):
        if "shareID" in r:
            r["shareID"] = SHARE
    return result
