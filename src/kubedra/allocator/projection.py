"""What of a device a selector reads, so that devices alike in that part share one result.

A selector's result depends only on what it reads of `device`. When every use of `device`
in the expression is one of

- `device.driver`, `device.allowMultipleAllocations`,
- `device.attributes["d.omain"].name` / `["name"]` (also under `has()`, `.?name`, `[?"name"]`),
  the same for `device.capacity`,
- `device.attributes["d.omain"]` used whole (iterated, compared, passed on), or capacity's,

then two devices that agree on the driver, on allowMultipleAllocations and on the published
entries those reads can resolve to evaluate alike, and the allocator evaluates the selector
once per distinct projection instead of once per device. For a lookup of `d.omain`/`name`
the projection takes both entries that can answer it (`d.omain/name` and, in the driver's
own domain, bare `name`), so any resolution of the two gives the same answer for devices
that agree on both; for a whole domain it takes every entry of the domain in published
order. Attribute values are compared as published values, field by field (an int 1 never
equals the bool true); capacity values by identity of the Quantity (the same object only,
formats and all).

Anything else (a dot-less domain, which lenient mode resolves in the driver's domain; a
computed key; `device` used whole; a macro variable named `device`) makes the expression
not projectable: it is then evaluated device by device, as before. Devices that fail every
selector (an unusable attribute value, a version that does not parse) are never projected:
they keep their own error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Final, TypeVar

from kubedra.api.resource import Device, DeviceAttribute, DeviceCapacity
from kubedra.cel import ast
from kubedra.cel.errors import Issue
from kubedra.cel.parser import parse

# A read: ("attr" | "cap", domain, name), or ("attr" | "cap", domain, None) for a whole domain.
Read = tuple[str, str, str | None]
# A constraint-comparable attribute: (type, values, is_list); None when the value is unusable.
Tagged = tuple[str, tuple[object, ...], bool]
T = TypeVar("T")
_DEVICE = "device"
_FIELD: Final[Read] = ("field", "", None)
_KINDS = {"attributes": "attr", "capacity": "cap"}


class _NotProjectable(Exception):
    pass


@lru_cache(maxsize=1024)
def reads(expression: str) -> tuple[Read, ...] | None:
    """The reads of `device` in `expression`, in first-use order, or None when the
    expression uses `device` in any other way (or does not parse)."""
    try:
        tree = parse(expression)
    except Issue:
        return None
    found: dict[Read, None] = {}
    try:
        _walk(tree, found)
    except _NotProjectable:
        return None
    return tuple(found)


@lru_cache(maxsize=1024)
def pinned_driver(expression: str) -> str | None:
    """The driver a selector requires at its top level, or None: `device.driver == "name"`
    (either way round) as an operand of the expression's outermost chain of `&&`.

    CEL's `&&` is false as soon as one operand is false, whatever error the other has, so
    such a selector is false on every device of another driver that converts (an
    unconvertible device fails before any selector runs, upstream as here): a search may
    pass over those devices without evaluating it."""
    try:
        tree = parse(expression)
    except Issue:
        return None
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Logic) and node.op == "&&":
            stack.append(node.right)
            stack.append(node.left)
        elif isinstance(node, ast.Call) and node.function == "_==_" and node.target is None:
            found = _driver_equals(*node.args) or _driver_equals(*reversed(node.args))
            if found is not None:
                return found
    return None


def _driver_equals(field: ast.Node, value: ast.Node) -> str | None:
    """The literal of `device.driver == "literal"`, or None."""
    if (
        isinstance(field, ast.Select)
        and field.field == "driver"
        and not field.test_only
        and not field.optional
        and isinstance(field.operand, ast.Ident)
        and field.operand.name == _DEVICE
        and isinstance(value, ast.Literal)
        and type(value.value) is str
    ):
        return value.value
    return None


def _walk(root: ast.Node, found: dict[Read, None]) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Ident):
            if node.name == _DEVICE:
                raise _NotProjectable  # `device` on its own, not under a known access
            continue
        if isinstance(node, ast.Literal):
            continue
        if isinstance(node, ast.Select):
            read = _member_read(node)
            if read is not None:
                if read is not _FIELD:
                    found[read] = None
                continue
            stack.append(node.operand)
            continue
        if isinstance(node, ast.Index):
            read = _member_read(node)
            if read is not None:
                found[read] = None
                continue
            stack.append(node.operand)
            stack.append(node.index)
            continue
        if isinstance(node, ast.Call):
            if node.target is not None:
                stack.append(node.target)
            stack.extend(node.args)
            continue
        if isinstance(node, ast.Logic):
            stack.append(node.left)
            stack.append(node.right)
            continue
        if isinstance(node, ast.Conditional):
            stack.extend((node.cond, node.then, node.otherwise))
            continue
        if isinstance(node, ast.ListLit):
            stack.extend(node.elements)
            continue
        if isinstance(node, ast.MapLit):
            for key, value, _ in node.entries:
                stack.append(key)
                stack.append(value)
            continue
        if isinstance(node, ast.Comprehension):
            if _DEVICE in (node.var, node.var2):
                raise _NotProjectable  # `device` means the macro's variable in there
            stack.append(node.range)
            stack.extend(node.args)
            continue
        raise _NotProjectable  # a node kind this walk does not know


def _domain_map(node: ast.Node) -> tuple[str, str] | None:
    """(kind, domain) for `device.attributes["domain"]` / `device.capacity["domain"]`."""
    if not (isinstance(node, ast.Index) and not node.optional):
        return None
    holder = node.operand
    if not (
        isinstance(holder, ast.Select)
        and not holder.test_only
        and not holder.optional
        and isinstance(holder.operand, ast.Ident)
        and holder.operand.name == _DEVICE
    ):
        return None
    kind = _KINDS.get(holder.field)
    index = node.index
    if kind is None or not isinstance(index, ast.Literal) or type(index.value) is not str:
        raise _NotProjectable  # a computed or non-string domain key
    domain = index.value
    if "." not in domain or "/" in domain:
        raise _NotProjectable  # lenient bare lookups, or a key no domain can have
    return kind, domain


def _member_read(node: ast.Select | ast.Index) -> Read | None:
    """The read a Select/Index node makes of `device`, None if it is not one (its operands
    are then walked), _FIELD for `device.driver` / `device.allowMultipleAllocations`."""
    if isinstance(node, ast.Select):
        operand = node.operand
        if isinstance(operand, ast.Ident) and operand.name == _DEVICE:
            if node.field in ("driver", "allowMultipleAllocations") and not node.test_only:
                return _FIELD  # always part of the projection
            if node.field in _KINDS and not node.test_only and not node.optional:
                raise _NotProjectable  # `device.attributes` as a whole
            raise _NotProjectable  # has(device.x), device.unknown, ...
        holder = _domain_map(operand)
        if holder is not None:
            return (*holder, _name(node.field))
        return None
    holder = _domain_map(node.operand)
    if holder is not None:
        index = node.index
        if not isinstance(index, ast.Literal) or type(index.value) is not str:
            raise _NotProjectable
        return (*holder, _name(index.value))
    holder = _domain_map(node)
    if holder is not None:
        return (*holder, None)  # the domain's map used whole
    return None


def _name(name: str) -> str:
    if "/" in name:
        raise _NotProjectable  # a name that no published key resolves to alone
    return name


def tagged(attr: DeviceAttribute) -> Tagged | None:
    """An attribute as a typed, hashable value (None: no usable value)."""
    if attr.int_ is not None:
        return ("int", (attr.int_,), False)
    if attr.bool_ is not None:
        return ("bool", (attr.bool_,), False)
    if attr.string is not None:
        return ("string", (attr.string,), False)
    if attr.version is not None:
        # Versions compare by exact string: semver 2.0.0 strings are minimal (upstream rule).
        return ("version", (attr.version,), False)
    for kind, values in (
        ("int", attr.ints),
        ("bool", attr.bools),
        ("string", attr.strings),
        ("version", attr.versions),
    ):
        if values:
            return (kind, tuple(values), True)
    return None


Projector = Callable[[str, bool, Device], tuple[object, ...]]


@lru_cache(maxsize=1024)
def projector(plan: tuple[Read, ...]) -> Projector:
    """A function giving the device as far as `plan` reads it, hashable, with the driver
    and allowMultipleAllocations (which every plan may read). Attribute values are the
    published DeviceAttribute values (compared field by field: an int never equals a
    bool); capacity values are the Quantity objects' identities."""
    if len(plan) == 1 and plan[0][0] == "attr" and plan[0][2] is not None:
        _, domain, name = plan[0]
        assert name is not None
        qualified = f"{domain}/{name}"

        def one_attribute(driver: str, multi: bool, device: Device) -> tuple[object, ...]:
            attributes = device.attributes
            if domain != driver:
                return (driver, multi, attributes.get(qualified))
            return (driver, multi, attributes.get(qualified), attributes.get(name))

        return one_attribute

    if len(plan) == 1 and plan[0][0] == "cap" and plan[0][2] is not None:
        _, domain, cap_name = plan[0]
        assert cap_name is not None
        bare_name: str = cap_name
        qualified = f"{domain}/{bare_name}"

        def one_capacity(driver: str, multi: bool, device: Device) -> tuple[object, ...]:
            capacity = device.capacity
            cap = capacity.get(qualified)
            value = None if cap is None else id(cap.value)
            if domain != driver:
                return (driver, multi, value)
            bare = capacity.get(bare_name)
            return (driver, multi, value, None if bare is None else id(bare.value))

        return one_capacity

    def general(driver: str, multi: bool, device: Device) -> tuple[object, ...]:
        return project(driver, multi, device, plan)

    return general


def project(driver: str, multi: bool, device: Device, plan: tuple[Read, ...]) -> tuple[object, ...]:
    """The device as far as `plan` reads it (see `projector`)."""
    out: list[object] = [driver, multi]
    attributes = device.attributes
    capacity = device.capacity
    for kind, domain, name in plan:
        if kind == "attr":
            if name is None:
                out.append(_whole(attributes, driver, domain, _same))
                continue
            out.append(attributes.get(f"{domain}/{name}"))
            if domain == driver:
                out.append(attributes.get(name))
        else:
            if name is None:
                out.append(_whole(capacity, driver, domain, _quantity_id))
                continue
            cap = capacity.get(f"{domain}/{name}")
            out.append(None if cap is None else id(cap.value))
            if domain == driver:
                bare_cap = capacity.get(name)
                out.append(None if bare_cap is None else id(bare_cap.value))
    return tuple(out)


def _same(attr: DeviceAttribute) -> object:
    return attr


def _quantity_id(cap: DeviceCapacity) -> object:
    return id(cap.value)


def _whole(
    entries: Mapping[str, T], driver: str, domain: str, value: Callable[[T], object]
) -> tuple[tuple[str, object], ...]:
    """Every entry of a domain, in published order (a map used whole may be iterated)."""
    prefix = f"{domain}/"
    return tuple(
        (key, value(entry))
        for key, entry in entries.items()
        if key.startswith(prefix) or (domain == driver and "/" not in key)
    )
