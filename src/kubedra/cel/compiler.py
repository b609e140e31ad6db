"""Compile a checked AST into nested Python closures `fn(frame) -> value`.

The frame is a list: [root, actual_cost, comprehension variables...]. `root` is the
DeviceView of a selector or the activation mapping of a plain expression.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Mapping

from kubedra.cel import ast
from kubedra.cel import runtime as rt
from kubedra.cel.callcost import RUNTIME, RuntimeRule
from kubedra.cel.errors import BareKeyMissing, CelEvalError, CostLimitExceeded
from kubedra.cel.patterns import bare_lookup, device_map, qualified_type
from kubedra.cel.registry import Impl, Overload
from kubedra.cel.stdlib import TYPE_NAMES, searcher
from kubedra.cel.types import BYTES, DEVICE, STRING, Type, has_dyn
from kubedra.cel.values import (
    MISSING,
    CelType,
    MapBuilder,
    Optional,
    cel_equal,
    no_such_key,
    no_such_overload,
)

Frame = list[object]
Fn = Callable[[Frame], object]

_DEVICE_ATTRS = {"driver": "driver", "attributes": "attributes", "capacity": "capacity",
                 "allowMultipleAllocations": "allow_multiple_allocations"}  # fmt: skip


_DEVICE_FIELDS: dict[str, Fn] = {
    "driver": lambda f: f[0].driver,  # type: ignore[attr-defined]
    "attributes": lambda f: f[0].attributes,  # type: ignore[attr-defined]
    "capacity": lambda f: f[0].capacity,  # type: ignore[attr-defined]
    "allowMultipleAllocations": lambda f: f[0].allow_multiple_allocations,  # type: ignore[attr-defined]
}


# Library constructors of a constant argument: pure, and their values immutable.
_FOLDABLE = frozenset({"semver", "quantity"})


class Compiler:
    """One compilation: assigns frame slots and (optionally) runtime cost charging."""

    def __init__(self, *, device: bool, lenient: bool, iteration_costs: dict[int, int] | None):
        self.device = device
        self.lenient = lenient
        self.iteration_costs = iteration_costs  # None: no runtime cost counting
        self.slots: dict[str, int] = {}
        self.next_slot = 2

    @property
    def frame_size(self) -> int:
        return self.next_slot

    def compile(self, node: ast.Node) -> Fn:
        method = getattr(self, f"_{type(node).__name__.lower()}")
        fn: Fn = method(node)
        return fn

    # -- leaves --------------------------------------------------------------------------
    def _literal(self, node: ast.Literal) -> Fn:
        value = node.value
        return lambda f: value

    def _ident(self, node: ast.Ident) -> Fn:
        name = node.name
        if name in self.slots:
            slot = self.slots[name]
            return lambda f: f[slot]
        if self.device and name == "device":
            return lambda f: f[0]
        if not self.device and name not in TYPE_NAMES:
            return lambda f: _variable(f[0], name)
        type_value = CelType(name)
        return lambda f: type_value

    # -- selection and indexing ---------------------------------------------------------------
    def _select(self, node: ast.Select) -> Fn:
        type_name = qualified_type(node, self.slots)
        if type_name is not None:
            type_value = CelType(type_name)
            return lambda f: type_value
        entry = self._device_entry(node)
        if entry is not None:
            return entry
        operand, name = self.compile(node.operand), node.field
        if node.test_only:
            return lambda f: rt.has_field(operand(f), name)
        if node.optional or (node.operand.typ and node.operand.typ.name == "optional_type"):
            return lambda f: rt.select_optional(operand(f), name)
        if node.operand.typ == DEVICE:
            if isinstance(node.operand, ast.Ident) and node.operand.name not in self.slots:
                return _DEVICE_FIELDS[name]
            getter = operator.attrgetter(_DEVICE_ATTRS[name])
            return lambda f: getter(operand(f))
        if node.operand.typ is not None and node.operand.typ.name == "map":
            return _map_field(operand, name)
        return lambda f: rt.select(operand(f), name)

    def _index(self, node: ast.Index) -> Fn:
        operand, key = self.compile(node.operand), self.compile(node.index)
        if node.optional or (node.operand.typ and node.operand.typ.name == "optional_type"):
            return lambda f: rt.index_optional(operand(f), key(f))
        which = device_map(node.operand)
        if which is not None and isinstance(node.index, ast.Literal):
            return self._device_domain(node, which, str(node.index.value))
        if node.operand.typ is not None and node.operand.typ.name == "map":
            return lambda f: rt.map_get(operand(f), key(f))  # type: ignore[arg-type]
        return lambda f: rt.index(operand(f), key(f))

    def _device_domain_literal(self, node: ast.Node) -> tuple[str, str] | None:
        """`device.<attributes|capacity>["domain"]` looked up strictly -> (map, domain)."""
        if not (self.device and isinstance(node, ast.Index)) or node.optional:
            return None
        which = device_map(node.operand)
        key = node.index
        if which is None or "device" in self.slots:
            return None
        if not isinstance(key, ast.Literal) or type(key.value) is not str:
            return None
        if self.lenient and bare_lookup(node) is not None:
            return None  # a dot-less key may name an entry of the driver's own domain
        return which, key.value

    def _device_entry(self, node: ast.Select) -> Fn | None:
        """`device.attributes["domain"].name` (or capacity, or under has()): one lookup on
        the view, which converts that entry alone (`DeviceView.attribute`)."""
        if node.optional:
            return None
        found = self._device_domain_literal(node.operand)
        if found is None:
            return None
        which, domain = found
        name = node.field
        qualified = f"{domain}/{name}"
        if node.test_only:
            method = "has_attribute" if which == "attributes" else "has_capacity"
            test = operator.methodcaller(method, domain, name, qualified)
            return lambda f: test(f[0])
        method = "attribute" if which == "attributes" else "capacity_entry"
        lookup = operator.methodcaller(method, domain, name, qualified)

        def entry(f: Frame) -> object:
            value = lookup(f[0])
            if value is MISSING:
                raise no_such_key(name)
            return value

        return entry

    def _device_domain(self, node: ast.Index, which: str, domain: str) -> Fn:
        """`device.attributes["domain"]`: a per-domain map, empty when unknown.

        Lenient mode (seed compatibility): a dot-less key that is not one of the device's
        domains resolves to the entry of that name in the device's own driver domain.
        """
        attr = _DEVICE_ATTRS[which]
        if not (self.lenient and bare_lookup(node) is not None):
            if which == "attributes":
                return lambda f: f[0].attributes[domain]  # type: ignore[attr-defined]
            return lambda f: f[0].capacity[domain]  # type: ignore[attr-defined]

        def lenient(f: Frame) -> object:
            device = f[0]
            maps = getattr(device, attr)
            found = maps.get(domain)
            if found is not None:
                return found
            if domain == device.driver:  # type: ignore[attr-defined]
                return rt.EMPTY  # the driver's own (empty) domain, as upstream
            own = maps.get(device.driver)  # type: ignore[attr-defined]
            if own is not None and domain in own:
                return own[domain]
            raise BareKeyMissing(f"device has no {which} named {domain!r} in any domain")

        return lenient

    # -- calls -----------------------------------------------------------------------------
    def _call(self, node: ast.Call) -> Fn:
        args_nodes = ([node.target] if node.target is not None else []) + node.args
        args = [self.compile(a) for a in args_nodes]
        if node.function in ("_==_", "_!=_"):
            return _equality(node.function, args, args_nodes)
        static = [a.typ for a in args_nodes]
        rule = RUNTIME.get(node.function)
        if self.iteration_costs is not None and rule is not None:
            return _charged(node, args, static, rule)
        general = _dispatch(node, args, static)
        if self.iteration_costs is None:
            return self._specialised(node, args_nodes, args, general) or general
        return general

    def _specialised(
        self, node: ast.Call, nodes: list[ast.Node], args: list[Fn], general: Fn
    ) -> Fn | None:
        """What cel-go does at every evaluation and need only be done once, for a program
        that counts no cost: a library value built from constants (`semver("1.2.3")`,
        `quantity("40Gi")`), the regular expression of a constant pattern, the lookup of a
        constant domain in `device.attributes`. Each result equals the general path's."""
        function = node.function
        constants = [n.value for n in nodes if isinstance(n, ast.Literal)]
        if function in _FOLDABLE and node.target is None and len(constants) == len(nodes):
            try:
                value = general([None, 0])
            except Exception:
                return None  # fails when (if ever) it runs, as cel-go's does
            return lambda f: value
        if function == "matches" and len(nodes) == 2 and isinstance(nodes[1], ast.Literal):
            pattern = nodes[1].value
            if type(pattern) is not str:
                return None
            try:
                search = searcher(pattern)
            except CelEvalError:
                return None
            text = args[0]

            def matches(f: Frame) -> object:
                value = text(f)
                if type(value) is str:
                    return search(value)
                return general(f)  # the general path's error for another type

            return matches
        if function == "@in" and len(nodes) == 2 and isinstance(nodes[0], ast.Literal):
            domain = nodes[0].value
            found = device_map(nodes[1])
            if not self.device or found is None or "device" in self.slots:
                return None
            if type(domain) is not str:
                return None
            has_domain = operator.methodcaller("has_domain", found, domain)
            return lambda f: has_domain(f[0])
        return None

    # -- logic -----------------------------------------------------------------------------
    def _logic(self, node: ast.Logic) -> Fn:
        left, right = self.compile(node.left), self.compile(node.right)
        return _logic(node.op == "||", left, right)

    def _conditional(self, node: ast.Conditional) -> Fn:
        cond, then, other = (self.compile(n) for n in (node.cond, node.then, node.otherwise))

        def conditional(f: Frame) -> object:
            c = cond(f)
            if c is True:
                return then(f)
            if c is False:
                return other(f)
            raise no_such_overload("_?_:_", c)

        return conditional

    # -- aggregates ----------------------------------------------------------------------------
    def _listlit(self, node: ast.ListLit) -> Fn:
        elements = [self.compile(e) for e in node.elements]
        optional = node.optional_indices
        if all(isinstance(e, ast.Literal) for e in node.elements) and not optional:
            constant = [e.value for e in node.elements if isinstance(e, ast.Literal)]
            return lambda f: constant
        if optional:
            return lambda f: _optional_list(f, elements, optional)
        return lambda f: [e(f) for e in elements]

    def _maplit(self, node: ast.MapLit) -> Fn:
        entries = [(self.compile(k), self.compile(v), opt) for k, v, opt in node.entries]
        return lambda f: _build_map(f, entries)

    # -- comprehensions ------------------------------------------------------------------------
    def _comprehension(self, node: ast.Comprehension) -> Fn:
        from kubedra.cel.macros import build_comprehension

        outer = dict(self.slots)
        slot = self._bind(node.var)
        slot2 = self._bind(node.var2) if node.var2 else -1
        rng = self.compile(node.range)
        args = [self.compile(a) for a in node.args]
        self.slots = outer
        cost = None if self.iteration_costs is None else self.iteration_costs.get(id(node), 1)
        return build_comprehension(node, rng, args, slot, slot2, cost)

    def _bind(self, name: str) -> int:
        self.slots[name] = self.next_slot
        self.next_slot += 1
        return self.slots[name]


def _variable(activation: object, name: str) -> object:
    try:
        return activation[name]  # type: ignore[index]
    except KeyError:
        raise CelEvalError(f"no such attribute: {name}") from None


def _map_field(operand: Fn, name: str) -> Fn:
    def field(f: Frame) -> object:
        try:
            return operand(f)[name]  # type: ignore[index]
        except KeyError:
            raise CelEvalError(f"no such key: {name}") from None

    return field


def _optional_list(f: Frame, elements: list[Fn], optional: frozenset[int]) -> list[object]:
    out: list[object] = []
    for i, element in enumerate(elements):
        value = element(f)
        if i not in optional:
            out.append(value)
        elif type(value) is Optional and value.present:
            out.append(value.value)
    return out


def _build_map(f: Frame, entries: list[tuple[Fn, Fn, bool]]) -> Mapping[object, object]:
    """A map literal as cel-go builds one: a repeated key replaces the earlier entry (no
    error), an absent optional entry removes it; keys stay typed (`MapBuilder`)."""
    out = MapBuilder()
    for key_fn, value_fn, optional in entries:
        key, value = key_fn(f), value_fn(f)
        if not optional:
            out.put(key, value)
        elif type(value) is Optional and value.present:
            out.put(key, value.value)
        else:
            out.drop(key)
    return out.build()


def _logic(is_or: bool, left: Fn, right: Fn) -> Fn:
    """`||`/`&&` with CEL's commutative semantics: the absorbing value wins over errors."""
    absorbing = is_or  # True absorbs for ||, False for &&
    name = "_||_" if is_or else "_&&_"

    def logic(f: Frame) -> object:
        try:
            a = left(f)
        except CostLimitExceeded:
            raise
        except Exception as exc:
            return _recover(exc, right, f, absorbing)
        if a is absorbing:
            return a
        b = right(f)
        if b is absorbing:
            return b
        if type(a) is bool and type(b) is bool:
            return a
        raise no_such_overload(name, a, b)

    return logic


def _recover(exc: Exception, right: Fn, f: Frame, absorbing: bool) -> object:
    """The left operand failed: the result is the right one if it absorbs, else the error."""
    try:
        b = right(f)
    except CostLimitExceeded:
        raise
    except Exception:
        raise exc from None
    if b is absorbing:
        return b
    raise exc


def _equality(function: str, args: list[Fn], nodes: list[ast.Node]) -> Fn:
    """`==`/`!=`; when a side is statically a string or bytes, Python equality is exact."""
    textual = any(n.typ in (STRING, BYTES) for n in nodes)
    equal = operator.eq if textual else cel_equal
    a, b = args
    if isinstance(nodes[1], ast.Literal):
        c = nodes[1].value
        if function == "_==_":
            return lambda f: equal(a(f), c)
        return lambda f: not equal(a(f), c)
    if function == "_==_":
        return lambda f: equal(a(f), b(f))
    return lambda f: not equal(a(f), b(f))


def _dispatch(node: ast.Call, args: list[Fn], static: list[Type | None]) -> Fn:
    """Pick the overload at compile time when types are known, else by runtime types."""
    candidates = node.overloads
    checks = [_checks(o, static) for o in candidates]
    if len(candidates) == 1 and not any(checks[0]):
        return _direct(candidates[0].impl, args)
    positions = sorted({i for c in checks for i, t in enumerate(c) if t})
    if any(not c[i] for c in checks for i in positions):
        return _generic(node.function, candidates, checks, args)
    table: dict[tuple[type, ...], Impl] = {}
    for overload, c in zip(candidates, checks, strict=True):
        for key in itertools.product(*(c[i] or () for i in positions)):
            table.setdefault(key, overload.impl)
    return _by_type(node.function, table, positions, args)


def _checks(overload: Overload, static: list[Type | None]) -> list[tuple[type, ...] | None]:
    """Per argument: the Python types to verify at runtime (None: statically guaranteed)."""
    out: list[tuple[type, ...] | None] = []
    for param, actual in zip(overload.args, static, strict=True):
        needs = actual is None or has_dyn(actual)
        out.append(rt.python_types(param) if needs and not param.is_param else None)
    return out


def _direct(impl: Impl, args: list[Fn]) -> Fn:
    if len(args) == 0:
        return lambda f: impl()
    if len(args) == 1:
        (a,) = args
        return lambda f: impl(a(f))
    if len(args) == 2:
        a, b = args
        return lambda f: impl(a(f), b(f))
    return lambda f: impl(*[x(f) for x in args])


def _by_type(
    function: str, table: dict[tuple[type, ...], Impl], positions: list[int], args: list[Fn]
) -> Fn:
    if len(args) == 1 and positions == [0]:
        (a,) = args
        single = {k[0]: v for k, v in table.items()}

        def one(f: Frame) -> object:
            x = a(f)
            impl = single.get(type(x))
            if impl is None:
                raise no_such_overload(function, x)
            return impl(x)

        return one
    if len(args) == 2 and len(positions) == 1:
        a, b = args
        by_one = {k[0]: v for k, v in table.items()}
        at = positions[0]

        def one_of_two(f: Frame) -> object:
            x, y = a(f), b(f)
            impl = by_one.get(type(y if at else x))
            if impl is None:
                raise no_such_overload(function, x, y)
            return impl(x, y)

        return one_of_two
    if len(args) == 2 and positions == [0, 1]:
        a, b = args

        def two(f: Frame) -> object:
            x, y = a(f), b(f)
            impl = table.get((type(x), type(y)))
            if impl is None:
                raise no_such_overload(function, x, y)
            return impl(x, y)

        return two

    def many(f: Frame) -> object:
        values = [x(f) for x in args]
        impl = table.get(tuple(type(values[i]) for i in positions))
        if impl is None:
            raise no_such_overload(function, *values)
        return impl(*values)

    return many


def _charged(node: ast.Call, args: list[Fn], static: list[Type | None], rule: RuntimeRule) -> Fn:
    """A size-dependent call under cost tracking: charged from its actual arguments before
    it runs (cel-go charges after the call; before, a call the budget cannot pay for never
    allocates its result)."""
    pairs = [(o, _checks(o, static)) for o in node.overloads]
    function = node.function

    def charged(f: Frame) -> object:
        values = [x(f) for x in args]
        rt.charge(f, rule(values))
        for overload, check in pairs:
            if all(t is None or type(v) in t for v, t in zip(values, check, strict=True)):
                return overload.impl(*values)
        raise no_such_overload(function, *values)

    return charged


def _generic(
    function: str,
    candidates: list[Overload],
    checks: list[list[tuple[type, ...] | None]],
    args: list[Fn],
) -> Fn:
    pairs = list(zip(candidates, checks, strict=True))

    def generic(f: Frame) -> object:
        values = [x(f) for x in args]
        for overload, check in pairs:
            if all(t is None or type(v) in t for v, t in zip(values, check, strict=True)):
                return overload.impl(*values)
        raise no_such_overload(function, *values)

    return generic
