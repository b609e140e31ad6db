"""Static analysis for the linter: non-portable bare lookups and driver constraints."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from kubedra.cel import ast
from kubedra.cel.errors import CelCompileError, CelEvalError, Issue
from kubedra.cel.ip_lib import parse_cidr, parse_ip
from kubedra.cel.k8s_lib import parse_quantity, parse_semver
from kubedra.cel.lexer import RESERVED, tokenize
from kubedra.cel.parser import parse
from kubedra.cel.patterns import bare_lookup, walk

_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")


@dataclass(frozen=True, slots=True)
class BareLookup:
    """`device.<map>["key"]` with a dot-less key; only lenient mode resolves it."""

    map: str  # "attributes" | "capacity"
    key: str
    line: int
    column: int  # 1-based, of the "["
    start: int  # source offsets of the `["key"]` part
    end: int


def _parsed(expression: str) -> ast.Node:
    try:
        return parse(expression)
    except Issue as issue:
        raise CelCompileError(f"compilation failed: {issue.render(expression)}") from None


def bare_lookups(expression: str) -> list[BareLookup]:
    """Literal-string lookups whose key cannot be a driver domain, in source order."""
    tree = _parsed(expression)
    closers = {t.pos: t for t in tokenize(expression)}
    ends = _bracket_ends(expression)
    found: list[BareLookup] = []
    for node in walk(tree):
        hit = bare_lookup(node)
        if hit is None or not isinstance(node, ast.Index):
            continue
        start = node.pos
        line = expression.count("\n", 0, start) + 1
        column = start - (expression.rfind("\n", 0, start) + 1) + 1
        end = ends.get(node.index.pos, closers[node.index.pos].pos)
        found.append(BareLookup(hit[0], hit[1], line, column, start, end))
    return sorted(found, key=lambda b: b.start)


def _bracket_ends(expression: str) -> dict[int, int]:
    """For each token, the end offset of the `]` that follows it (if that is next)."""
    tokens = tokenize(expression)
    out: dict[int, int] = {}
    for tok, following in itertools.pairwise(tokens):
        if following.kind == "op" and following.text == "]":
            out[tok.pos] = following.pos + 1
    return out


def portable_rewrite(expression: str, domain: str) -> str:
    """Rewrite bare lookups to `device.<map>["domain"].key` (works in strict mode too), behind
    `device.driver == "domain" &&` unless the expression already pins the driver: upstream
    evaluates a class's selectors on every device of every driver, and a lookup of a key
    another driver's device lacks is a run-time error that fails scheduling on the node
    (seen on a real cluster: a NIC has no `memory`), while `false && error` is false."""
    out = expression
    for hit in reversed(bare_lookups(expression)):
        if _IDENT.fullmatch(hit.key) and hit.key not in RESERVED and hit.key != "in":
            suffix = f".{hit.key}"
        else:
            suffix = f"[{_quote(hit.key)}]"
        out = out[: hit.start] + f"[{_quote(domain)}]{suffix}" + out[hit.end :]
    if out == expression or constrained_drivers(expression) is not None:
        return out
    tree = _parsed(expression)
    binds_looser = isinstance(tree, ast.Conditional) or (
        isinstance(tree, ast.Logic) and tree.op == "||"
    )
    return f"device.driver == {_quote(domain)} && " + (f"({out})" if binds_looser else out)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class BadLiteral:
    """A constant argument that the function rejects on every evaluation."""

    call: str  # e.g. `quantity("40GB")`
    error: str
    line: int
    column: int


# Constructors whose string argument upstream parses only at run time (so the API server
# accepts a selector that then fails on every device it is evaluated on).
_LITERAL_PARSERS: dict[str, Callable[[str], object]] = {
    "quantity": parse_quantity,
    "semver": parse_semver,
    "ip": parse_ip,
    "cidr": parse_cidr,
}


def bad_literals(expression: str) -> list[BadLiteral]:
    """`quantity("40GB")`, `semver("1.2")`, `ip(...)`, `cidr(...)` with an invalid literal."""
    found: list[BadLiteral] = []
    for node in walk(_parsed(expression)):
        if not isinstance(node, ast.Call) or node.target is not None or not node.args:
            continue
        parse = _LITERAL_PARSERS.get(node.function)
        arg = node.args[0]
        if parse is None or not isinstance(arg, ast.Literal) or type(arg.value) is not str:
            continue
        flag = node.args[-1]
        if len(node.args) == 2:  # semver(text, normalize): only with a literal flag
            if not (isinstance(flag, ast.Literal) and type(flag.value) is bool):
                continue
            parse = partial(parse_semver, normalize=flag.value)
        try:
            parse(arg.value)
        except CelEvalError as exc:
            line = expression.count("\n", 0, node.pos) + 1
            column = node.pos - (expression.rfind("\n", 0, node.pos) + 1) + 1
            call = f"{node.function}({_quote(arg.value)})"
            found.append(BadLiteral(call, str(exc), line, column))
    return found


def constrained_drivers(expression: str) -> frozenset[str] | None:
    """Drivers an expression can admit, if a top-level conjunct pins `device.driver`."""
    allowed: frozenset[str] | None = None
    for conjunct in _conjuncts(_parsed(expression)):
        drivers = _driver_constraint(conjunct)
        if drivers is not None:
            allowed = drivers if allowed is None else allowed & drivers
    return allowed


def _conjuncts(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.Logic) and node.op == "&&":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _is_driver(node: ast.Node) -> bool:
    return (
        isinstance(node, ast.Select)
        and node.field == "driver"
        and not node.test_only
        and isinstance(node.operand, ast.Ident)
        and node.operand.name == "device"
    )


def _string(node: ast.Node) -> str | None:
    return node.value if isinstance(node, ast.Literal) and type(node.value) is str else None


def _driver_constraint(node: ast.Node) -> frozenset[str] | None:
    if not isinstance(node, ast.Call) or node.target is not None or len(node.args) != 2:
        return None
    left, right = node.args
    if node.function == "_==_":
        for a, b in ((left, right), (right, left)):
            value = _string(b)
            if _is_driver(a) and value is not None:
                return frozenset({value})
    if node.function == "@in" and _is_driver(left) and isinstance(right, ast.ListLit):
        values = [_string(e) for e in right.elements]
        if not right.optional_indices and all(v is not None for v in values):
            return frozenset(v for v in values if v is not None)
    return None
