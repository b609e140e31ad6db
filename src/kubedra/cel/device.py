"""`DeviceView`: the `device` variable, prepared once per device and shared by selectors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubedra.api.quantity import Quantity
from kubedra.api.semver import Semver
from kubedra.cel.runtime import DomainMap

Scalar = int | bool | str | Semver
AttributeValue = Scalar | tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class DeviceView:
    """A device as DRA selectors see it.

    Keys arrive as a ResourceSlice publishes them (`domain/name`, or a bare `name` that
    belongs to the driver's domain) and are regrouped by domain, as upstream does when it
    builds the CEL maps: `device.attributes[domain][name]`.
    """

    driver: str
    attributes: Mapping[str, Mapping[str, object]]
    capacity: Mapping[str, Mapping[str, object]]
    allow_multiple_allocations: bool = False
    list_attribute: str | None = field(default=None, init=False)

    def __init__(
        self,
        driver: str,
        attributes: Mapping[str, AttributeValue],
        capacity: Mapping[str, Quantity],
        allow_multiple_allocations: bool = False,
    ) -> None:
        object.__setattr__(self, "driver", driver)
        object.__setattr__(self, "attributes", _by_domain(driver, attributes))
        object.__setattr__(self, "capacity", _by_domain(driver, capacity))
        object.__setattr__(self, "allow_multiple_allocations", allow_multiple_allocations)
        lists = [k for k, v in attributes.items() if isinstance(v, tuple)]
        object.__setattr__(self, "list_attribute", lists[0] if lists else None)


def _by_domain(driver: str, values: Mapping[str, object]) -> DomainMap:
    """Split each key at its first "/" (no slash: the driver's domain)."""
    out = DomainMap()
    for key, value in values.items():
        domain, sep, name = key.partition("/")
        if not sep:
            domain, name = driver, key
        out.setdefault(domain, {})[name] = value
    return out
