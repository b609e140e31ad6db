"""Opaque device configuration (`status.allocation.devices.config[].opaque`) of a driver.

`gpu.nvidia.com` understands NVIDIA's `resource.nvidia.com/v1beta1` kinds (drivers.md §1.6):
`GpuConfig` for full GPUs and `MigDeviceConfig` for MIG devices, each with an optional
`sharing` (`TimeSlicing` + `timeSlicingConfig.interval` Default|Short|Medium|Long, or `MPS` +
`mpsConfig`); no config means exclusive use. Decoding is strict like upstream's for user
input: unknown kinds, unknown fields and bad values are per-claim errors. Other drivers take
no opaque configuration, so any opaque config addressed to them is an error too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from kubedra.api.quantity import Quantity, QuantityError
from kubedra.api.resource import DeviceAllocationConfiguration

NVIDIA_GROUP_VERSION = "resource.nvidia.com/v1beta1"
GPU_DRIVER = "gpu.nvidia.com"
INTERVALS = {"Default": 0, "Short": 1, "Medium": 2, "Long": 3}  # nvidia-smi --set-timeslice


class ConfigError(ValueError):
    pass


class _Strict(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class TimeSlicingConfig(_Strict):
    interval: str = "Default"


class MpsConfig(_Strict):
    default_active_thread_percentage: int | None = None
    default_pinned_device_memory_limit: str | None = None
    default_per_device_pinned_memory_limit: dict[str, str] = msgspec.field(default_factory=dict)


class Sharing(_Strict):
    strategy: str
    time_slicing_config: TimeSlicingConfig | None = None
    mps_config: MpsConfig | None = None


class DeviceConfig(_Strict):
    """GpuConfig / MigDeviceConfig (same shape for what kubedra applies)."""

    api_version: str
    kind: str
    sharing: Sharing | None = None


KIND_FOR_TYPE = {"gpu": "GpuConfig", "mig": "MigDeviceConfig"}


def parse_config(parameters: Any) -> DeviceConfig:
    """One NVIDIA opaque config, strictly decoded and checked."""
    if not isinstance(parameters, dict):
        raise ConfigError("opaque parameters must be a JSON object")
    api_version, kind = parameters.get("apiVersion"), parameters.get("kind")
    if api_version != NVIDIA_GROUP_VERSION:
        raise ConfigError(f"unsupported apiVersion {api_version!r} (want {NVIDIA_GROUP_VERSION!r})")
    if kind not in KIND_FOR_TYPE.values():
        known = ", ".join(sorted(KIND_FOR_TYPE.values()))
        raise ConfigError(f"unsupported config kind {kind!r} (supported: {known})")
    try:
        config = msgspec.convert(parameters, DeviceConfig)
    except msgspec.ValidationError as err:
        raise ConfigError(f"invalid {kind}: {err}") from None
    sharing = config.sharing
    if sharing is None:
        return config
    where = f"{kind}.sharing"
    if sharing.strategy == "TimeSlicing":
        if kind == "MigDeviceConfig":
            raise ConfigError(f"{where}.strategy: MIG devices support only MPS sharing")
        if sharing.mps_config is not None:
            raise ConfigError(f"{where}: mpsConfig is set but strategy is TimeSlicing")
        interval = (sharing.time_slicing_config or TimeSlicingConfig()).interval
        if interval not in INTERVALS:
            raise ConfigError(
                f"{where}.timeSlicingConfig.interval: unknown interval {interval!r} "
                f"(one of {', '.join(INTERVALS)})"
            )
    elif sharing.strategy == "MPS":
        if sharing.time_slicing_config is not None:
            raise ConfigError(f"{where}: timeSlicingConfig is set but strategy is MPS")
        mps = sharing.mps_config or MpsConfig()
        pct = mps.default_active_thread_percentage
        if pct is not None and not 0 <= pct <= 100:
            raise ConfigError(
                f"{where}.mpsConfig.defaultActiveThreadPercentage: {pct} is not in 0..100"
            )
        limits = dict(mps.default_per_device_pinned_memory_limit)
        if mps.default_pinned_device_memory_limit is not None:
            limits["(default)"] = mps.default_pinned_device_memory_limit
        for key, value in limits.items():
            try:
                Quantity.parse(value)
            except QuantityError as err:
                raise ConfigError(f"{where}.mpsConfig: pinned memory limit {key}: {err}") from None
    else:
        raise ConfigError(
            f"{where}.strategy: unknown strategy {sharing.strategy!r} (TimeSlicing or MPS)"
        )
    return config


def _applies(config: DeviceAllocationConfiguration, request: str) -> bool:
    parent = request.split("/", 1)[0]
    return not config.requests or request in config.requests or parent in config.requests


def config_for(
    driver: str,
    request: str,
    device_type: str,
    configs: Sequence[DeviceAllocationConfiguration],
) -> DeviceConfig | None:
    """The config that applies to one allocated device: the last matching one wins (the
    allocation lists class configs before claim configs, so the claim's override the class's)."""
    chosen: DeviceConfig | None = None
    for entry in configs:
        opaque = entry.opaque
        if opaque is None or opaque.driver != driver or not _applies(entry, request):
            continue
        if driver != GPU_DRIVER:
            raise ConfigError(f"driver {driver} accepts no opaque configuration")
        config = parse_config(opaque.parameters)
        if config.kind != KIND_FOR_TYPE.get(device_type):
            if not entry.requests:
                continue  # a claim-wide config of the other kind: meant for other devices
            raise ConfigError(
                f"{config.kind} cannot configure request {request!r}: its device is of type "
                f"{device_type!r}"
            )
        chosen = config
    return chosen


def describe(config: DeviceConfig | None) -> dict[str, Any]:
    """The applied sharing as plain data (checkpoint, CDI annotations, logs)."""
    if config is None or config.sharing is None:
        return {"strategy": "Exclusive"}
    sharing = config.sharing
    if sharing.strategy == "TimeSlicing":
        interval = (sharing.time_slicing_config or TimeSlicingConfig()).interval
        return {"strategy": "TimeSlicing", "interval": interval}
    mps = sharing.mps_config or MpsConfig()
    out: dict[str, Any] = {"strategy": "MPS"}
    if mps.default_active_thread_percentage is not None:
        out["activeThreadPercentage"] = mps.default_active_thread_percentage
    if mps.default_pinned_device_memory_limit is not None:
        out["pinnedDeviceMemoryLimit"] = mps.default_pinned_device_memory_limit
    if mps.default_per_device_pinned_memory_limit:
        out["perDevicePinnedMemoryLimit"] = dict(mps.default_per_device_pinned_memory_limit)
    return out
