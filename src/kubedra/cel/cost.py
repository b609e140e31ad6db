"""Static worst-case cost estimate, modelled on cel-go's checker cost estimator.

Each node gets (cost, shape); a shape bounds the size of a value (string length, list or
map entries) and of its keys/elements. The DRA size hints come from the API limits: at most
32 domains and 32 names per device, domains <= 63 chars, names <= 32, values <= 64.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubedra.cel import ast
from kubedra.cel.callcost import (
    LIST_CREATE,
    LIST_TRAVERSALS,
    MAP_CREATE,
    RUNTIME,
    STATIC,
    UNBOUNDED,
    Static,
    containment,
    list_call,
    scan,
)  # fmt: skip
from kubedra.cel.named_format import MAX_FORMAT_SIZE
from kubedra.cel.patterns import device_map, qualified_type
from kubedra.cel.types import (
    BYTES,
    CIDR,
    DYN,
    IP,
    NAMED_FORMAT,
    QUANTITY,
    SEMVER,
    STRING,
    URL,
    Type,
    is_dyn,
)  # fmt: skip

_TEXTUAL = (STRING, BYTES)
_CONSTANT_EQUALITY = (QUANTITY, SEMVER, IP, CIDR)
# Functions Kubernetes' library cost estimator prices itself (k8s.io/apiserver/pkg/cel/
# library/cost.go): it sees the call's nodes, not cel-go's overload candidates.
_KUBERNETES_ESTIMATED = frozenset({
    "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes", "url",
    "lowerAscii", "upperAscii", "substring", "trim", "replace", "split", "join", "find",
    "findAll", "cidr", "isIP", "isCIDR", "ip", "ip.isCanonical", "masked", "prefixLength",
    "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
    "isGlobalUnicast", "containsIP", "containsCIDR", "quantity", "isQuantity", "semver",
    "isSemver", "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan",
    "isLessThan", "compareTo", "add", "sub", "major", "minor", "patch", "getScheme",
    "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery", "validate",
    "format.named",
})  # fmt: skip
_ORDERING = frozenset({"_<_", "_<=_", "_>_", "_>=_"})
# string -> bytes (up to 4 bytes a character) and bytes -> string traverse their argument.
_CONVERSIONS = frozenset({("bytes", STRING), ("string", BYTES)})


@dataclass(frozen=True, slots=True)
class Shape:
    size: int
    key: Shape | None = None
    elem: Shape | None = None

    def part(self, which: str) -> Shape:
        found = self.key if which == "key" else self.elem
        return found or UNKNOWN


UNKNOWN = Shape(UNBOUNDED)
SCALAR = Shape(1)
# A string (<= 64 characters) or a list attribute (<= 64 values of unknown size: upstream's
# size hints bound the value, not its elements).
_ATTRIBUTE_VALUE = Shape(64)
DEVICE_SHAPES = {
    "driver": Shape(63),
    "attributes": Shape(32, Shape(63), Shape(32, Shape(32), _ATTRIBUTE_VALUE)),
    "capacity": Shape(32, Shape(63), Shape(32, Shape(32), SCALAR)),
    "allowMultipleAllocations": SCALAR,
}

# Per-iteration overhead of each macro's accumulator logic, and its init and result costs.
_LOOP = {  # kind: (init, per-iteration overhead, result)
    "all": (0, 3, 1),  # not_strictly_false(accu) + accu && pred
    "exists": (0, 4, 1),  # not_strictly_false(!accu) + accu || pred
    "exists_one": (0, 2, 2),  # pred ? accu + 1 : accu ; accu == 1
    "existsOne": (0, 2, 2),
    "filter": (LIST_CREATE, 13, 1),  # pred ? accu + [x] : accu
    "map": (LIST_CREATE, 12, 1),  # accu + [f(x)]
    "map_filter": (LIST_CREATE, 12, 1),
    "transformList": (LIST_CREATE, 12, 1),
    "transformMap": (MAP_CREATE, 3, 1),  # cel.@mapInsert(accu, k, t): call, accu, k
    "transformMapEntry": (MAP_CREATE, 2, 1),  # cel.@mapInsert(accu, t): call, accu
}


@dataclass(slots=True)
class Estimate:
    """The worst-case cost, and what run-time cost tracking charges where it is enabled:
    each comprehension iteration its static cost, less what its nested comprehensions and
    size-dependent calls charge for themselves (those charge their actual cost)."""

    total: int
    iteration: dict[int, int] = field(default_factory=dict)  # id(comprehension) -> cost


def estimate(node: ast.Node, device: bool) -> Estimate:
    """Worst-case cost of `node`; `device` selects the DRA size hints for `device`."""
    est = _Estimator(device)
    cost, _ = est.visit(node, {})
    return Estimate(min(cost, UNBOUNDED), est.iteration)


class _Estimator:
    def __init__(self, device: bool) -> None:
        self.device = device
        self.iteration: dict[int, int] = {}
        # Per open comprehension: cost charged by what is nested in it at run time.
        self.nested: list[int] = []

    def visit(self, node: ast.Node, scope: dict[str, Shape]) -> tuple[int, Shape]:
        method = getattr(self, f"_{type(node).__name__.lower()}")
        result: tuple[int, Shape] = method(node, scope)
        return result

    def _literal(self, node: ast.Literal, scope: dict[str, Shape]) -> tuple[int, Shape]:
        value = node.value
        return 0, Shape(len(value)) if isinstance(value, str | bytes) else SCALAR

    def _ident(self, node: ast.Ident, scope: dict[str, Shape]) -> tuple[int, Shape]:
        if node.name in scope:
            return 1, scope[node.name]
        return 1, UNKNOWN

    def _select(self, node: ast.Select, scope: dict[str, Shape]) -> tuple[int, Shape]:
        if qualified_type(node, scope) is not None:
            return 1, UNKNOWN  # an identifier (cel-go resolved the qualified name)
        cost, shape = self.visit(node.operand, scope)
        if node.test_only:
            return cost, SCALAR  # has() itself is free (PresenceTestHasCost(false))
        operand = node.operand
        is_device = isinstance(operand, ast.Ident) and operand.name == "device"
        if self.device and is_device and "device" not in scope:
            return cost + 1, DEVICE_SHAPES.get(node.field, UNKNOWN)
        return cost + 1, shape.part("elem")

    def _index(self, node: ast.Index, scope: dict[str, Shape]) -> tuple[int, Shape]:
        cost, shape = self.visit(node.operand, scope)
        index_cost, _ = self.visit(node.index, scope)
        return cost + index_cost + 1, shape.part("elem")

    def _call(self, node: ast.Call, scope: dict[str, Shape]) -> tuple[int, Shape]:
        args = ([node.target] if node.target is not None else []) + node.args
        if node.function == "dyn" and len(args) == 1:
            # cel-go unwraps dyn(x): 1 plus x's cost, and x's size (dyn only disables
            # type checking), so `dyn(1) == dyn(1)` compares two scalars, not unknowns.
            cost, shape = self.visit(args[0], scope)
            return cost + 1, shape
        total, shapes = 0, []
        for arg in args:
            cost, shape = self.visit(arg, scope)
            total += cost
            shapes.append(shape)
        # A call on dyn arguments may dispatch to any overload the checker kept: cel-go
        # charges the most expensive of them (the union of their estimates).
        own, result = max(
            (self._own_cost(node, args, shapes, types, result)
             for types, result in _signatures(node, args)),
            key=lambda pair: (pair[0].cost, pair[0].size or 0),
        )  # fmt: skip
        if self.nested and node.function in RUNTIME:
            self.nested[-1] += own.cost  # charged by the call itself at run time
        return total + own.cost, self._result_shape(result, shapes, own)

    def _own_cost(
        self, node: ast.Call, args: list[ast.Node], shapes: list[Shape], types: list[Type | None],
        result: Type | None,
    ) -> tuple[Static, Type | None]:
        """The call's own cost (arguments excluded) and a bound on its result's size, for
        one overload (`types`: its argument types)."""
        function, sizes = node.function, [s.size for s in shapes]
        textual = any(t in _TEXTUAL for t in types)
        if function == "_==_" and types[0] == types[1] and types[0] in _CONSTANT_EQUALITY:
            return Static(1), result  # Kubernetes' estimator: O(1) for its own types
        if function == "_==_" and types[0] == types[1] == NAMED_FORMAT:
            return Static(scan(MAX_FORMAT_SIZE)), result  # Kubernetes' estimator: formats are small
        if function == "_==_" and types[0] == types[1] == URL:
            # Kubernetes' estimator: the right operand's string scanned (it takes the right
            # one's size for both sides).
            return Static(scan(sizes[1])), result
        if function in ("_==_", "_!=_") or (function in _ORDERING and textual):
            # cel-go: a traversal of the smaller operand, whatever the types (scalars have
            # size 1, values of unknown size - a semver next to a dyn - are unbounded).
            return Static(scan(min(sizes))), result
        if function == "_+_":
            if result in _TEXTUAL:
                return Static(scan(sizes[0] + sizes[1]), sizes[0] + sizes[1]), result
            return Static(1, sizes[0] + sizes[1] if len(sizes) == 2 else None), result
        literals = [a.value if isinstance(a, ast.Literal) else None for a in args]
        target = types[0] if node.target is not None else None
        if function in LIST_TRAVERSALS and (function == "includes" or _is_list(target)):
            elem = None
            if _string_elements(target):
                # Upstream knows element sizes only from the device's size hints.
                hinted = self.device and _under_device(args[0])
                elem = shapes[0].part("elem").size if hinted else UNBOUNDED
            return list_call(function, sizes, literals, elem), result
        if function == "@in" and types[1] is not None and types[1].name == "map":
            return Static(1), result  # a map lookup; lists (and dyn, as upstream) cost their size
        if (function, types[0] if types else None) in _CONVERSIONS:
            return Static(scan(sizes[0]), sizes[0] * (4 if function == "bytes" else 1)), result
        if function == "ip" and types[0] == CIDR:
            return Static(1), result  # Kubernetes' estimator: a CIDR's ip() reads a field
        if function in ("containsIP", "containsCIDR"):
            return Static(containment(function, sizes[1] if types[1] == STRING else None)), result
        rule = STATIC.get(function)
        return (rule(sizes, literals) if rule is not None else Static(1)), result

    @staticmethod
    def _result_shape(result: Type | None, shapes: list[Shape], own: Static) -> Shape:
        if result == URL and own.size is not None:
            return Shape(own.size)  # url() keeps its string's size for equality's estimate
        if result is None or result.name not in ("string", "bytes", "list", "map"):
            return SCALAR if _scalar(result) else UNKNOWN
        if own.size is not None:
            elem = Shape(own.elem) if own.elem is not None else _first_elem(shapes)
            return Shape(own.size, elem=elem)
        biggest = max(shapes, key=lambda s: s.size, default=UNKNOWN)
        return biggest if result.name in ("list", "map") else Shape(biggest.size)

    def _logic(self, node: ast.Logic, scope: dict[str, Shape]) -> tuple[int, Shape]:
        return self.visit(node.left, scope)[0] + self.visit(node.right, scope)[0], SCALAR

    def _conditional(self, node: ast.Conditional, scope: dict[str, Shape]) -> tuple[int, Shape]:
        cond, _ = self.visit(node.cond, scope)
        then, then_shape = self.visit(node.then, scope)
        other, other_shape = self.visit(node.otherwise, scope)
        bigger = then_shape if then_shape.size >= other_shape.size else other_shape
        return cond + max(then, other), bigger

    def _listlit(self, node: ast.ListLit, scope: dict[str, Shape]) -> tuple[int, Shape]:
        parts = [self.visit(e, scope) for e in node.elements]
        elem = max((s for _, s in parts), key=lambda s: s.size, default=SCALAR)
        return LIST_CREATE + sum(c for c, _ in parts), Shape(len(parts), elem=elem)

    def _maplit(self, node: ast.MapLit, scope: dict[str, Shape]) -> tuple[int, Shape]:
        keys = [self.visit(k, scope) for k, _, _ in node.entries]
        values = [self.visit(v, scope) for _, v, _ in node.entries]
        key = max((s for _, s in keys), key=lambda s: s.size, default=SCALAR)
        elem = max((s for _, s in values), key=lambda s: s.size, default=SCALAR)
        cost = MAP_CREATE + sum(c for c, _ in keys) + sum(c for c, _ in values)
        return cost, Shape(len(keys), key, elem)

    def _optional_map(
        self, node: ast.Comprehension, scope: dict[str, Shape], rng: int, shape: Shape
    ) -> tuple[int, Shape]:
        """Costed as cel-go's expansion: `o.hasValue() ? [optional.of](cel.bind(x,
        o.value(), expr)) : optional.none()` (the target is evaluated twice)."""
        body, body_shape = self.visit(node.args[0], {**scope, node.var: shape})
        wrap = 1 if node.kind == "optMap" else 0
        return 2 * rng + body + LIST_CREATE + 2 + wrap, body_shape

    def _sort_by(
        self, node: ast.Comprehension, scope: dict[str, Shape], rng: int, shape: Shape
    ) -> tuple[int, Shape]:
        """Costed as cel-go's expansion: `cel.bind(in, target, in.@sortByAssociatedKeys(
        in.map(x, key)))`, the keys sorted as sort() sorts a list (O(n^2), 2 a comparison
        and a string scan more for string or bytes keys)."""
        self.nested.append(0)
        key, _ = self.visit(node.args[0], {**scope, node.var: shape.part("elem")})
        nested = self.nested.pop()
        per_iteration = 12 + key  # map's accu + [key]
        self.iteration[id(node)] = max(1, per_iteration - nested)
        size = shape.size
        keys = 1 + LIST_CREATE + size * per_iteration + 1  # in.map(x, key)
        key_type = node.args[0].typ
        textual = key_type is None or is_dyn(key_type) or key_type in _TEXTUAL
        sort = list_call("sort", [size], [], 1 if textual else None).cost
        total = rng + LIST_CREATE + 1 + keys + sort  # bind's range, `in`, keys, sort
        if self.nested:
            self.nested[-1] += total
        return total, shape

    def _comprehension(self, node: ast.Comprehension, scope: dict[str, Shape]) -> tuple[int, Shape]:
        if node.kind == "bind":
            init, init_shape = self.visit(node.args[0], scope)
            body, body_shape = self.visit(node.args[1], {**scope, node.var: init_shape})
            return LIST_CREATE + init + body, body_shape
        rng, shape = self.visit(node.range, scope)
        if node.kind in ("optMap", "optFlatMap"):
            return self._optional_map(node, scope, rng, shape)
        if node.kind == "sortBy":
            return self._sort_by(node, scope, rng, shape)
        is_map = node.range.typ is not None and node.range.typ.name == "map"
        if device_map(node.range) is not None and self.device:
            is_map = True
        inner = dict(scope)
        first = shape.part("key") if is_map else shape.part("elem")
        inner[node.var] = SCALAR if node.var2 and not is_map else first
        if node.var2:
            inner[node.var2] = shape.part("elem")
        self.nested.append(0)
        parts = [self.visit(arg, inner) for arg in node.args]
        nested = self.nested.pop()
        init, overhead, result = _LOOP[node.kind]
        per_iteration = overhead + sum(c for c, _ in parts)
        # Runtime charging: nested macros charge their own iterations.
        self.iteration[id(node)] = max(1, per_iteration - nested)
        total = rng + init + shape.size * per_iteration + result
        if self.nested:
            self.nested[-1] += total
        out_elem = parts[-1][1] if node.kind in ("map", "map_filter", "transformList") else first
        return total, Shape(shape.size, elem=out_elem)


def _signatures(
    node: ast.Call, args: list[ast.Node]
) -> list[tuple[list[Type | None], Type | None]]:
    """Argument and result types of each overload the call may run: an argument typed
    dyn takes the overload's declared type."""
    actual = [a.typ for a in args]
    if not node.overloads or node.function in _KUBERNETES_ESTIMATED:
        # Kubernetes' estimator answers first, from the argument nodes' own types.
        return [(actual, node.typ)]
    out = []
    for overload in node.overloads:
        types = [_as_declared(t, p) for t, p in zip(actual, overload.args, strict=False)]
        result = overload.result if not overload.result.is_param and node.typ == DYN else node.typ
        out.append((types, result))
    return out


def _as_declared(actual: Type | None, declared: Type) -> Type | None:
    """The argument type an overload sees: a dyn part takes the declared type there
    (`list(dyn)` is a `list(string)` for sort's string overload)."""
    if actual is None or declared.is_param:
        return actual
    if is_dyn(actual):
        return declared
    if actual.name == declared.name and len(actual.params) == len(declared.params):
        pairs = list(zip(actual.params, declared.params, strict=True))
        return Type(actual.name, tuple(_as_declared(a, d) or d for a, d in pairs))
    return actual


def _scalar(t: Type | None) -> bool:
    """Types of a fixed size (cel-go isScalar): everything else has an unknown size."""
    if t is not None and t.name == "optional_type":
        return _scalar(t.params[0])
    return t is not None and t.name in _SCALAR_TYPES


_SCALAR_TYPES = frozenset({"bool", "int", "uint", "double", "google.protobuf.Duration",
                           "google.protobuf.Timestamp"})  # fmt: skip


def _is_list(t: Type | None) -> bool:
    return t is not None and t.name == "list"


def _string_elements(t: Type | None) -> bool:
    return _is_list(t) and t is not None and t.params[0] in _TEXTUAL


def _first_elem(shapes: list[Shape]) -> Shape | None:
    return shapes[0].elem if shapes else None


def _under_device(node: ast.Node) -> bool:
    """A value read from the `device` variable (whose sizes the DRA hints bound)."""
    while isinstance(node, ast.Select | ast.Index):
        node = node.operand
    return isinstance(node, ast.Ident) and node.name == "device"
