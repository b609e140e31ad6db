"""Shared devices for the CEL tests."""

from __future__ import annotations

from kubedra.api.quantity import Quantity
from kubedra.api.semver import Semver
from kubedra.cel import DeviceView

DEVICES: dict[str, DeviceView] = {
    "gpu": DeviceView(
        "gpu.nvidia.com",
        {
            "productName": "NVIDIA H100 80GB HBM3",
            "architecture": "Hopper",
            "driverVersion": Semver.parse("550.54.15"),
            "count": 8,
            "mig": True,
            "example.com/zone": "a",
        },
        {"memory": Quantity.parse("80Gi"), "example.com/power": Quantity.parse("700")},
        allow_multiple_allocations=True,
    ),
    "small": DeviceView(
        "gpu.nvidia.com",
        {
            "productName": "NVIDIA T4",
            "architecture": "Turing",
            "driverVersion": Semver.parse("535.0.0"),
        },
        {"memory": Quantity.parse("16Gi")},
    ),
    "dra": DeviceView(
        "dra.example.com",
        {"name": True, "services": "some_example_value", "other.example.com/name": True},
        {"memory": Quantity.parse("1Mi")},
    ),
    "empty": DeviceView("dra.example.com", {}, {}),
    "listy": DeviceView("dra.example.com", {"names": ("fish", "bird"), "ints": (1, 2, 3)}, {}),
}
