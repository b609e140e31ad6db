"""Static type checker: annotates every node with a type and resolves call overloads."""

from __future__ import annotations

from kubedra.cel import ast
from kubedra.cel.env import NAMESPACES, Env
from kubedra.cel.errors import CelEvalError, Issue
from kubedra.cel.ext_format import template_problem
from kubedra.cel.patterns import bare_lookup, children, qualified_type
from kubedra.cel.registry import Overload
from kubedra.cel.stdlib import compile_regex, static_type_of_name
from kubedra.cel.types import (
    BOOL,
    BYTES,
    DEVICE,
    DOUBLE,
    DYN,
    FREE,
    INT,
    NULL,
    STRING,
    UINT,
    Type,
    equivalent,
    is_dyn,
    join,
    list_of,
    map_of,
    optional_of,
    substitute,
    type_of,
    unify,
)  # fmt: skip
from kubedra.cel.values import UInt

Scope = dict[str, Type]
# cel.OptionalTypes' macros: `opt.optMap(x, expr)` / `opt.optFlatMap(x, expr)`.
_OPTIONAL_MACROS = frozenset({"optMap", "optFlatMap"})


def check(node: ast.Node, env: Env) -> Type:
    """Type-check `node` in `env`, then validate aggregate literals; raises `Issue` on the
    first error."""
    result = _Checker(env).visit(node, {})
    _check_homogeneous(node, exempt=False)
    return result


def _check_homogeneous(node: ast.Node, exempt: bool) -> None:
    """cel-go's HomogeneousAggregateLiterals validator: the elements of a list literal (keys
    and values of a map literal) must all have the first one's type exactly (`dyn` is no
    wildcard here), except inside a `format` call. Pre-order, as cel-go reports."""
    if isinstance(node, ast.Call) and node.function == "format":
        exempt = True
    if not exempt and isinstance(node, ast.ListLit):
        types = [_unwrapped(e.typ, i in node.optional_indices) for i, e in enumerate(node.elements)]
        _same_types(node.elements, types)
    if not exempt and isinstance(node, ast.MapLit):
        keys = [k for k, _, _ in node.entries]
        values = [v for _, v, _ in node.entries]
        _same_types(keys, [k.typ for k in keys])
        _same_types(values, [_unwrapped(v.typ, o) for _, v, o in node.entries])
    for child in children(node):
        _check_homogeneous(child, exempt)


def _unwrapped(t: Type | None, optional: bool) -> Type | None:
    return t.params[0] if optional and t is not None and t.params else t


def _same_types(nodes: list[ast.Node], types: list[Type | None]) -> None:
    """Each element against the first one's type as cel-go's checker resolved it: a free
    type parameter in it (`[]`) takes the type of the element it was unified with, so
    `[[], ['a'], [1]]` fails at `[1]` (expected list(string))."""
    if not types:
        return
    expected = types[0]
    for element, t in zip(nodes[1:], types[1:], strict=True):
        if not equivalent(expected, t):
            raise Issue(f"expected type '{expected}' but found '{t}'", element.pos)
        if expected is not None and t is not None:
            expected = join(expected, t) or expected


def _signature(types: list[Type], member: bool) -> str:
    if member:
        return f"{types[0]}.({', '.join(str(t) for t in types[1:])})"
    return f"({', '.join(str(t) for t in types)})"


def _boolish(t: Type) -> bool:
    return t == BOOL or is_dyn(t)


def literal_type(value: object) -> Type:
    kinds: dict[type, Type] = {bool: BOOL, int: INT, UInt: UINT, float: DOUBLE, str: STRING,
                               bytes: BYTES, type(None): NULL}  # fmt: skip
    return kinds[type(value)]


class _Checker:
    def __init__(self, env: Env) -> None:
        self.env = env

    def visit(self, node: ast.Node, scope: Scope) -> Type:
        method = getattr(self, f"_{type(node).__name__.lower()}")
        result: Type = method(node, scope)
        node.typ = result
        return result

    def _literal(self, node: ast.Literal, scope: Scope) -> Type:
        return literal_type(node.value)

    def _ident(self, node: ast.Ident, scope: Scope) -> Type:
        found = scope.get(node.name) or self.env.variables.get(node.name)
        found = found or static_type_of_name(node.name)
        if found is None:
            raise Issue(f"undeclared reference to '{node.name}' (in container '')", node.pos)
        return found

    def _select(self, node: ast.Select, scope: Scope) -> Type:
        qualified = qualified_type(node, scope)
        if qualified is not None:
            return type_of(Type(qualified))
        operand = self.visit(node.operand, scope)
        if operand.name == "optional_type":  # `a.?b.c`, and `has(a.?b.c)` (optional chain)
            field = self._field(node, operand.params[0])
            return BOOL if node.test_only else optional_of(field)
        result = self._field(node, operand)
        if node.test_only:
            return BOOL
        return optional_of(result) if node.optional else result

    def _field(self, node: ast.Select, operand: Type) -> Type:
        if operand == DEVICE:
            found = self.env.field_type(operand, node.field)
            if found is None:
                raise Issue(f"undefined field '{node.field}'", node.pos)
            return found
        if operand.name == "map":  # any key type: cel-go checks no key for a selection
            return operand.params[1]
        if is_dyn(operand):
            return DYN
        raise Issue(f"type '{operand}' does not support field selection", node.pos)

    def _index(self, node: ast.Index, scope: Scope) -> Type:
        operand = self.visit(node.operand, scope)
        index = self.visit(node.index, scope)
        if self.env.lenient and bare_lookup(node) is not None:
            return DYN  # may resolve to an attribute of the driver's own domain (seed compat)
        wrap = node.optional or operand.name == "optional_type"
        inner = operand.params[0] if operand.name == "optional_type" else operand
        result = self._element(node, inner, index, operand)
        return optional_of(result) if wrap else result

    def _element(self, node: ast.Index, operand: Type, index: Type, shown: Type) -> Type:
        if operand.name == "list" and (index in (INT, UINT) or is_dyn(index)):
            return operand.params[0]
        if operand.name == "map" and unify(operand.params[0], index, {}):
            return operand.params[1]
        if is_dyn(operand):
            return DYN
        sig = _signature([shown, index], False)
        function = "_[?_]" if node.optional else "_[_]"
        raise Issue(f"found no matching overload for '{function}' applied to '{sig}'", node.pos)

    def _call(self, node: ast.Call, scope: Scope) -> Type:
        self._resolve_namespace(node, scope)
        member = node.target is not None
        args = ([node.target] if node.target is not None else []) + node.args
        types = [self.visit(a, scope) for a in args]
        candidates = self.env.library.lookup(node.function, member)
        if not candidates and not self.env.library.has_name(node.function):
            raise Issue(f"undeclared reference to '{node.function}' (in container '')", node.pos)
        matched: list[tuple[Overload, Type]] = []
        for overload in candidates:
            bound: dict[str, Type] = {}
            if len(overload.args) == len(types) and all(
                unify(p, t, bound) for p, t in zip(overload.args, types, strict=True)
            ):
                matched.append((overload, substitute(overload.result, bound)))
        if not matched:
            sig = _signature(types, member)
            raise Issue(f"found no matching overload for '{node.function}' applied to '{sig}'",
                        node.pos)  # fmt: skip
        node.overloads = [o for o, _ in matched]
        self._validate_regex(node)
        self._validate_format(node)
        results = {r for _, r in matched}
        return results.pop() if len(results) == 1 else DYN

    def _resolve_namespace(self, node: ast.Call, scope: Scope) -> None:
        """`strings.quote(x)` parses as a member call on `strings`; make it a global call."""
        target = node.target
        if (
            isinstance(target, ast.Ident)
            and target.name in NAMESPACES
            and target.name not in scope
            and target.name not in self.env.variables
        ):
            node.function = f"{target.name}.{node.function}"
            node.target = None

    def _validate_regex(self, node: ast.Call) -> None:
        """cel-go's ValidateRegexLiterals: a member `matches` with a literal pattern that
        does not compile is a compile issue (other constant patterns fail when the program
        is planned, see `planner`)."""
        if node.function != "matches" or node.target is None:
            return
        pattern = node.args[0]
        if isinstance(pattern, ast.Literal) and type(pattern.value) is str:
            try:
                compile_regex(pattern.value)
            except CelEvalError:
                raise Issue("invalid matches argument", pattern.pos) from None

    def _validate_format(self, node: ast.Call) -> None:
        """A literal template with a list literal is checked against the arguments' static
        types when compiling, as cel-go's string format validator does."""
        target, args = node.target, node.args
        if (
            node.function != "format"
            or not isinstance(target, ast.Literal)
            or type(target.value) is not str
            or len(args) != 1
            or not isinstance(args[0], ast.ListLit)
        ):
            return
        problem = template_problem(target.value, args[0].elements)
        if problem is not None:
            message, blame = problem
            raise Issue(message, (blame or node).pos)

    def _logic(self, node: ast.Logic, scope: Scope) -> Type:
        for operand in (node.left, node.right):
            t = self.visit(operand, scope)
            if not _boolish(t):
                raise Issue(f"expected type 'bool' but found '{t}'", operand.pos)
        return BOOL

    def _conditional(self, node: ast.Conditional, scope: Scope) -> Type:
        cond = self.visit(node.cond, scope)
        then, other = self.visit(node.then, scope), self.visit(node.otherwise, scope)
        result = join(then, other, conditional=True)
        if not _boolish(cond) or result is None:
            sig = _signature([cond, then, other], False)
            raise Issue(f"found no matching overload for '_?_:_' applied to '{sig}'", node.pos)
        return result

    def _listlit(self, node: ast.ListLit, scope: Scope) -> Type:
        elem: Type | None = None
        for i, element in enumerate(node.elements):
            t = self.visit(element, scope)
            if i in node.optional_indices:
                t = t.params[0] if t.name == "optional_type" else DYN
            elem = self._homogeneous(elem, t, element)
        return list_of(elem or FREE)

    def _maplit(self, node: ast.MapLit, scope: Scope) -> Type:
        key_t: Type | None = None
        value_t: Type | None = None
        for key, value, optional in node.entries:
            kt = self.visit(key, scope)  # any type: cel-go's checker restricts no key type
            vt = self.visit(value, scope)
            if optional:
                vt = vt.params[0] if vt.name == "optional_type" else DYN
            key_t = self._homogeneous(key_t, kt, key)
            value_t = self._homogeneous(value_t, vt, value)
        return map_of(key_t or FREE, value_t or FREE)

    def _homogeneous(self, seen: Type | None, t: Type, node: ast.Node) -> Type:
        """The literal's element type: their common type, dyn if none (mixed types are
        reported after checking, by `_check_homogeneous`)."""
        if seen is None:
            return t
        return join(seen, t) or DYN

    def _comprehension(self, node: ast.Comprehension, scope: Scope) -> Type:
        if node.kind == "bind":
            init = self.visit(node.args[0], scope)
            return self.visit(node.args[1], {**scope, node.var: init})
        rng = self.visit(node.range, scope)
        inner = {**scope, **self._loop_vars(node, rng)}
        results = [self.visit(arg, inner) for arg in node.args]
        return self._comprehension_result(node, rng, results)

    def _loop_vars(self, node: ast.Comprehension, rng: Type) -> Scope:
        if node.kind in _OPTIONAL_MACROS:
            if rng.name != "optional_type" and not is_dyn(rng):
                raise Issue(f"found no matching overload for '{node.kind}' applied to "
                            f"'{rng}.(...)'", node.pos)  # fmt: skip
            return {node.var: rng.params[0] if rng.params else DYN}
        if rng.name == "list":
            first, second = (INT, rng.params[0]) if node.var2 else (rng.params[0], DYN)
        elif rng.name == "map":
            first, second = rng.params
        elif rng.name == "dyn":
            first, second = DYN, DYN
        else:
            raise Issue(f"expression of type '{rng}' cannot be range of a comprehension "
                        "(must be list, map, or dynamic)", node.range.pos)  # fmt: skip
        out = {node.var: first}
        if node.var2:
            out[node.var2] = second
        return out

    @staticmethod
    def _map_entry_result(node: ast.Comprehension, transform: Type) -> Type:
        """transformMapEntry merges the map each step makes (cel.@mapInsert(accu, map)):
        the transform must be a map, whose type is the result's."""
        if transform.name == "map":
            return transform
        if is_dyn(transform):
            return map_of(DYN, DYN)
        raise Issue("found no matching overload for 'cel.@mapInsert' applied to "
                    f"'(map(dyn, dyn), {transform})'", node.args[-1].pos)  # fmt: skip

    def _comprehension_result(self, node: ast.Comprehension, rng: Type, res: list[Type]) -> Type:
        kind = node.kind
        if kind == "optMap":
            return optional_of(res[-1])
        if kind == "optFlatMap":
            if res[-1].name != "optional_type" and not is_dyn(res[-1]):
                raise Issue(f"expected type 'optional_type' but found '{res[-1]}'",
                            node.args[-1].pos)  # fmt: skip
            return res[-1]
        predicates = res if kind in ("all", "exists", "exists_one", "existsOne", "filter") else []
        if kind in ("map_filter", "transformList", "transformMap", "transformMapEntry") \
                and len(res) == 2:  # fmt: skip
            predicates = res[:1]
        for arg, t in zip(node.args, predicates, strict=False):
            if not _boolish(t):
                raise Issue(f"expected type 'bool' but found '{t}'", arg.pos)
        if kind in ("all", "exists", "exists_one", "existsOne"):
            return BOOL
        elem = rng.params[0] if rng.name in ("list", "map") else DYN
        if kind in ("filter", "sortBy"):
            return list_of(elem)
        if kind == "transformMap":
            return map_of(elem, res[-1])
        if kind == "transformMapEntry":
            return self._map_entry_result(node, res[-1])
        return list_of(res[-1])
