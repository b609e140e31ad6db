"""The API server's defaults for resource.k8s.io/v1, so the embedded store holds what a real
cluster would hold for the same manifest.

Upstream fills these when it decodes a request (the v1 defaulting functions and the
`+default` tags of the types): a request without `allocationMode` means `ExactCount`, an
exact request without `count` (or with 0, which JSON cannot tell from unset) asks for one
device, a toleration without `operator` means `Equal`, and a taint without `timeAdded` was
added now. `adminAccess` has no default: absent stays absent. A PodGroup without
`disruptionMode` gets `single` (scheduling.k8s.io/v1beta1's only default). Everything else
a manifest leaves out stays out, as upstream leaves it.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from kubedra.api.meta import KubeObject
from kubedra.api.resource import (
    DeviceRequest,
    DeviceSubRequest,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubedra.api.scheduling import DisruptionMode, PodGroup, SingleDisruptionMode

T = TypeVar("T", bound=KubeObject)
R = TypeVar("R", ExactDeviceRequest, DeviceSubRequest)

EXACT_COUNT = "ExactCount"


def with_defaults(obj: T, now: str) -> T:
    """`obj` as the API server would store it; `now` stamps taints added without a time."""
    if isinstance(obj, ResourceClaim):
        return msgspec.structs.replace(obj, spec=_claim_spec(obj.spec))
    if isinstance(obj, ResourceClaimTemplate):
        inner = msgspec.structs.replace(obj.spec, spec=_claim_spec(obj.spec.spec))
        return msgspec.structs.replace(obj, spec=inner)
    if isinstance(obj, ResourceSlice):
        devices = tuple(
            msgspec.structs.replace(d, taints=tuple(_taint(t, now) for t in d.taints))
            if d.taints
            else d
            for d in obj.spec.devices
        )
        return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, devices=devices))
    if isinstance(obj, DeviceTaintRule):
        rule = msgspec.structs.replace(obj.spec, taint=_taint(obj.spec.taint, now))
        return msgspec.structs.replace(obj, spec=rule)
    if isinstance(obj, PodGroup) and obj.spec.disruption_mode is None:
        single = DisruptionMode(single=SingleDisruptionMode())
        return msgspec.structs.replace(
            obj, spec=msgspec.structs.replace(obj.spec, disruption_mode=single)
        )
    return obj


def _claim_spec(spec: ResourceClaimSpec) -> ResourceClaimSpec:
    requests = tuple(_request(r) for r in spec.devices.requests)
    if requests == spec.devices.requests:
        return spec
    return msgspec.structs.replace(
        spec, devices=msgspec.structs.replace(spec.devices, requests=requests)
    )


def _request(request: DeviceRequest) -> DeviceRequest:
    exactly = _counted(request.exactly) if request.exactly is not None else None
    first = tuple(_counted(s) for s in request.first_available)
    return msgspec.structs.replace(request, exactly=exactly, first_available=first)


def _counted(request: R) -> R:
    """allocationMode ExactCount unless given; one device when ExactCount and no count."""
    mode = request.allocation_mode or EXACT_COUNT
    count = request.count or (1 if mode == EXACT_COUNT else request.count)
    tolerations = tuple(_toleration(t) for t in request.tolerations)
    return msgspec.structs.replace(
        request, allocation_mode=mode, count=count, tolerations=tolerations
    )


def _toleration(toleration: DeviceToleration) -> DeviceToleration:
    if toleration.operator:
        return toleration
    return msgspec.structs.replace(toleration, operator="Equal")


def _taint(taint: DeviceTaint, now: str) -> DeviceTaint:
    return taint if taint.time_added else msgspec.structs.replace(taint, time_added=now)
