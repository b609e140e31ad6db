"""Recognisers for DRA-specific expression shapes, shared by checker, compiler and linter."""

from __future__ import annotations

from kubedra.cel import ast

DEVICE_MAPS = frozenset({"attributes", "capacity"})


def device_map(node: ast.Node) -> str | None:
    """`device.attributes` / `device.capacity` -> the map name, else None."""
    if (
        isinstance(node, ast.Select)
        and not node.test_only
        and not node.optional
        and node.field in DEVICE_MAPS
        and isinstance(node.operand, ast.Ident)
        and node.operand.name == "device"
    ):
        return node.field
    return None


# Type names written as qualified identifiers: the IP and CIDR libraries declare their types
# under the `net` namespace (no other library type has a name the DRA environment resolves).
QUALIFIED_TYPES = frozenset({"net.IP", "net.CIDR"})


def qualified_type(node: ast.Node, scope: object = ()) -> str | None:
    """`net.IP` / `net.CIDR`: the type name a selection spells, else None. As in cel-go's
    checker the qualified name wins over a variable `net` (`scope`: names bound locally,
    which do shadow it)."""
    if (
        isinstance(node, ast.Select)
        and not node.test_only
        and not node.optional
        and isinstance(node.operand, ast.Ident)
        and node.operand.name not in scope  # type: ignore[operator]
    ):
        name = f"{node.operand.name}.{node.field}"
        return name if name in QUALIFIED_TYPES else None
    return None


def bare_lookup(node: ast.Node) -> tuple[str, str] | None:
    """`device.<map>["key"]` where the key has no "." (so it cannot be a driver domain)."""
    if not isinstance(node, ast.Index) or node.optional:
        return None
    name = device_map(node.operand)
    key = node.index
    if name is None or not isinstance(key, ast.Literal) or type(key.value) is not str:
        return None
    return (name, key.value) if "." not in key.value else None


def walk(node: ast.Node) -> list[ast.Node]:
    """All nodes in source order (pre-order)."""
    out: list[ast.Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(children(current)))
    return out


def children(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.Select):
        return [node.operand]
    if isinstance(node, ast.Index):
        return [node.operand, node.index]
    if isinstance(node, ast.Call):
        return ([node.target] if node.target is not None else []) + node.args
    if isinstance(node, ast.Logic):
        return [node.left, node.right]
    if isinstance(node, ast.Conditional):
        return [node.cond, node.then, node.otherwise]
    if isinstance(node, ast.ListLit):
        return list(node.elements)
    if isinstance(node, ast.MapLit):
        return [part for key, value, _ in node.entries for part in (key, value)]
    if isinstance(node, ast.Comprehension):
        return [node.range, *node.args]
    return []
