"""`DeviceView`: the `device` variable, prepared once per device and shared by selectors.

Two ways to make one:

- `DeviceView(driver, attributes, capacity)` from values already converted (a Semver for a
  version, a tuple for a list attribute, a Quantity for a capacity);
- `DeviceView.of(driver, device)` from a published `resource.k8s.io` Device. Nothing is
  converted up front: a selector that reads `device.attributes["d"].name` converts that one
  attribute, the whole maps are built only when a selector needs them (iterating them,
  comparing them, a lenient bare lookup), and the device is checked once, at its first
  evaluation, for what makes every selector fail on it (upstream's DeviceMatches builds
  and checks every attribute before it runs the program; the outcome is the same).

One view serves every selector and claim of an allocation: what it converts, it keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Final, TypeVar

from kubedra.api.quantity import Quantity
from kubedra.api.resource import Device, DeviceAttribute
from kubedra.api.semver import Semver, SemverError
from kubedra.cel.runtime import DomainMap
from kubedra.cel.values import MISSING

Scalar = int | bool | str | Semver
AttributeValue = Scalar | tuple[Scalar, ...]

_UNCHECKED: Final = object()


class DeviceView:
    """A device as DRA selectors see it.

    Keys arrive as a ResourceSlice publishes them (`domain/name`, or a bare `name` that
    belongs to the driver's domain) and are regrouped by domain, as upstream does when it
    builds the CEL maps: `device.attributes[domain][name]`.
    """

    __slots__ = (
        "_attributes",
        "_capacity",
        "_domains",
        "_list_attribute",
        "_problem",
        "_raw",
        "allow_multiple_allocations",
        "driver",
    )

    driver: str
    allow_multiple_allocations: bool
    _attributes: DomainMap | None
    _capacity: DomainMap | None
    _raw: Device  # the published device (an empty one for a view of converted values)
    _domains: dict[tuple[str, str], bool] | None  # has_domain's answers so far
    _problem: object  # str | None once checked, _UNCHECKED before
    _list_attribute: str | None

    def __init__(
        self,
        driver: str,
        attributes: Mapping[str, AttributeValue],
        capacity: Mapping[str, Quantity],
        allow_multiple_allocations: bool = False,
    ) -> None:
        self.driver = driver
        self._attributes = _by_domain(driver, attributes)
        self._capacity = _by_domain(driver, capacity)
        self.allow_multiple_allocations = allow_multiple_allocations
        self._raw = _CONVERTED
        self._domains = None
        self._problem = None
        lists = [k for k, v in attributes.items() if isinstance(v, tuple)]
        self._list_attribute = lists[0] if lists else None

    @classmethod
    def of(cls, driver: str, device: Device) -> DeviceView:
        """The view of a published device; converts nothing until a selector reads it."""
        view = cls.__new__(cls)
        view.driver = driver
        view.allow_multiple_allocations = bool(device.allow_multiple_allocations)
        view._raw = device
        view._attributes = None
        view._capacity = None
        view._domains = None
        view._problem = _UNCHECKED
        view._list_attribute = None
        return view

    # -- what every selector sees first -------------------------------------------------------
    @property
    def problem(self) -> str | None:
        """Why every selector fails on this device (an attribute without a usable value, a
        version that does not parse), or None. Checked once, in attribute order."""
        problem = self._problem
        if problem is _UNCHECKED:
            problem = self._check()
        return problem  # type: ignore[return-value]

    @property
    def list_attribute(self) -> str | None:
        """The first list-valued attribute (only list-enabled selectors may see the device)."""
        if self._problem is _UNCHECKED:
            self._check()
        return self._list_attribute

    def fault(self, lists: bool) -> str | None:
        """Why a selector fails on this device before it runs: `problem`, or, for a selector
        that may not see list attributes (`lists` False), the first list attribute."""
        problem = self._problem
        if problem is _UNCHECKED:
            problem = self._check()
        if problem is None and not lists and self._list_attribute is not None:
            return f"attribute {self._list_attribute}: unsupported attribute value"
        return problem  # type: ignore[return-value]

    def _check(self) -> str | None:
        problem = None
        for name, attr in self._raw.attributes.items():
            if attr.string is not None or attr.int_ is not None or attr.bool_ is not None:
                continue
            if attr.version is not None:
                try:
                    parse_version(attr.version)
                except SemverError as exc:
                    problem = f"parse semantic version: {exc}"
                    break
                continue
            try:
                value = convert(attr)
            except SemverError as exc:
                problem = f"parse semantic version: {exc}"
                break
            if value is None:
                problem = f"attribute {name}: unsupported attribute value"
                break
            if self._list_attribute is None:
                self._list_attribute = name
        self._problem = problem
        return problem

    # -- the maps, whole ------------------------------------------------------------------------
    @property
    def attributes(self) -> DomainMap:
        """`device.attributes`: domain -> name -> value."""
        attributes = self._attributes
        if attributes is None:
            values = {}
            for name, attr in self._raw.attributes.items():
                try:
                    value = convert(attr)
                except SemverError:
                    value = None  # the device fails every selector (`problem`) anyway
                if value is not None:
                    values[name] = value
            attributes = self._attributes = _by_domain(self.driver, values)
        return attributes

    @property
    def capacity(self) -> DomainMap:
        """`device.capacity`: domain -> name -> Quantity."""
        capacity = self._capacity
        if capacity is None:
            values = {name: cap.value for name, cap in self._raw.capacity.items()}
            capacity = self._capacity = _by_domain(self.driver, values)
        return capacity

    # -- one entry, for `device.attributes["domain"].name` --------------------------------------
    def attribute(self, domain: str, name: str, qualified: str) -> object:
        """`device.attributes[domain][name]` (`qualified` is `domain/name`), MISSING if absent."""
        if self._attributes is None:
            found, ambiguous = _find(self._raw.attributes, self.driver, domain, name, qualified)
            if not ambiguous:
                if found is None:
                    return MISSING
                try:
                    value = convert(found)
                except SemverError:
                    value = None
                return MISSING if value is None else value
        return self.attributes[domain].get(name, MISSING)

    def capacity_entry(self, domain: str, name: str, qualified: str) -> object:
        """`device.capacity[domain][name]` (`qualified` is `domain/name`), MISSING if absent."""
        if self._capacity is None:
            found, ambiguous = _find(self._raw.capacity, self.driver, domain, name, qualified)
            if not ambiguous:
                return MISSING if found is None else found.value
        return self.capacity[domain].get(name, MISSING)

    def has_attribute(self, domain: str, name: str, qualified: str) -> bool:
        """`has(device.attributes[domain].name)`, without converting the value."""
        if self._attributes is None:
            found, _ = _find(self._raw.attributes, self.driver, domain, name, qualified)
            return found is not None
        return name in self._attributes[domain]

    def has_capacity(self, domain: str, name: str, qualified: str) -> bool:
        """`has(device.capacity[domain].name)`."""
        if self._capacity is None:
            found, _ = _find(self._raw.capacity, self.driver, domain, name, qualified)
            return found is not None
        return name in self._capacity[domain]

    def has_domain(self, which: str, domain: str) -> bool:
        """`domain in device.attributes` (`which`: "attributes" or "capacity")."""
        built = self._attributes if which == "attributes" else self._capacity
        if built is not None:
            return domain in built
        key = (which, domain)
        seen = self._domains
        if seen is None:
            seen = self._domains = {}
        else:
            known = seen.get(key)
            if known is not None:
                return known
        found = seen[key] = self._has_domain(which, domain)
        return found

    def _has_domain(self, which: str, domain: str) -> bool:
        raw = self._raw
        keys = raw.attributes if which == "attributes" else raw.capacity
        if "/" in domain:
            return False  # a domain is what precedes the first "/" of a key
        if domain == self.driver and any("/" not in k for k in keys):
            return True  # a bare key belongs to the driver's domain
        # One substring search over the keys, each preceded by NUL, instead of a loop; a
        # key that holds a NUL itself (never valid, but possible in memory) takes the loop.
        joined = "\0" + "\0".join(keys)
        if joined.count("\0") != len(keys) + (not keys):
            return any(k.partition("/")[0] == domain and "/" in k for k in keys)
        return f"\0{domain}/" in joined

    def __repr__(self) -> str:
        return (
            f"DeviceView(driver={self.driver!r}, attributes={dict(self.attributes)!r}, "
            f"capacity={dict(self.capacity)!r})"
        )


_CONVERTED: Final = Device()
T = TypeVar("T")


def _find(
    raw: Mapping[str, T], driver: str, domain: str, name: str, qualified: str
) -> tuple[T | None, bool]:
    """The raw entry for domain/name (None if absent), and whether the device publishes it
    twice, bare and qualified (then the whole map decides which one counts)."""
    if domain == driver:
        bare = raw.get(name)
        full = raw.get(qualified)
        if bare is None:
            return full, False
        return bare, full is not None
    if "/" in domain:
        return None, False  # a domain is what precedes the first "/" of a key
    return raw.get(qualified), False


def convert(attr: DeviceAttribute) -> AttributeValue | None:
    """The CEL value of a published attribute (None: no usable value); raises SemverError."""
    if attr.int_ is not None:
        return attr.int_
    if attr.bool_ is not None:
        return attr.bool_
    if attr.string is not None:
        return attr.string
    if attr.version is not None:
        return parse_version(attr.version)
    if attr.ints:
        return tuple(attr.ints)
    if attr.bools:
        return tuple(attr.bools)
    if attr.strings:
        return tuple(attr.strings)
    if attr.versions:
        return tuple(parse_version(v) for v in attr.versions)
    return None


@lru_cache(maxsize=4096)
def parse_version(text: str) -> Semver:
    """A version attribute, parsed once per distinct text (a Semver is immutable)."""
    return Semver.parse(text)


def _by_domain(driver: str, values: Mapping[str, object]) -> DomainMap:
    """Split each key at its first "/" (no slash: the driver's domain)."""
    out = DomainMap()
    for key, value in values.items():
        domain, sep, name = key.partition("/")
        if not sep:
            domain, name = driver, key
        out.setdefault(domain, {})[name] = value
    return out


__all__ = ["AttributeValue", "DeviceView", "convert", "parse_version"]
