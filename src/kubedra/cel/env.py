"""The compilation environment: which functions and variables an expression may use."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from kubedra.cel.ext_lists import list_extensions, optional_library
from kubedra.cel.ext_strings import string_extensions
from kubedra.cel.ip_lib import cidr_library, ip_library
from kubedra.cel.k8s_lib import includes_library, kubernetes_library
from kubedra.cel.named_format import named_format_library
from kubedra.cel.registry import Library
from kubedra.cel.stdlib import standard_library
from kubedra.cel.types import ANY, BOOL, DEVICE, DYN, QUANTITY, STRING, Type, map_of
from kubedra.cel.url_lib import url_library

# Namespaces of global functions written like member calls (`strings.quote(x)`).
NAMESPACES = frozenset({"strings", "optional", "sets", "lists", "ip", "format"})


@dataclass(frozen=True, slots=True)
class Env:
    """Declarations plus the DRA feature switches that change them."""

    library: Library
    variables: dict[str, Type]
    device_fields: dict[str, Type]
    lenient: bool
    attribute_type: Type = DYN  # what a selector may evaluate to besides bool

    def field_type(self, owner: Type, name: str) -> Type | None:
        return self.device_fields.get(name) if owner == DEVICE else None


@cache
def _base_library(list_attributes: bool) -> Library:
    lib = (
        standard_library()
        .merged(string_extensions())
        .merged(kubernetes_library())
        .merged(list_extensions())
        .merged(optional_library())
        .merged(ip_library())  # IP and CIDR: in the base environment since 1.30
        .merged(cidr_library())
        .merged(url_library())  # URLs: in the base environment since 1.24
        .merged(named_format_library())  # format.dns1123Label() ...: since 1.31
    )
    return lib.merged(includes_library()) if list_attributes else lib


@cache
def selector_env(*, strict: bool, consumable_capacity: bool, list_attributes: bool) -> Env:
    """The DRA selector environment (`device` variable) for one feature combination.

    Attribute values are `any` typed (upstream's 1.31 declaration) until list attributes
    come in, then `dyn` (so that lists can be ranged over); a stored expression always
    gets the newest declaration.
    """
    attribute = DYN if list_attributes else ANY
    fields = {
        "driver": STRING,
        "attributes": map_of(STRING, map_of(STRING, attribute)),
        "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
    }
    if consumable_capacity:
        fields["allowMultipleAllocations"] = BOOL
    library = _base_library(list_attributes)
    return Env(library, {"device": DEVICE}, fields, lenient=not strict, attribute_type=attribute)


@cache
def plain_env(variables: frozenset[tuple[str, Type]]) -> Env:
    """Plain CEL with declared variables (the generic evaluation path): the library of
    a stored expression, the newest (upstream compiles those with every library, `includes`
    among them, whatever the feature switches)."""
    return Env(_base_library(True), dict(variables), {}, lenient=False)
