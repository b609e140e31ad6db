"""AST node types produced by the parser and annotated by the checker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubedra.cel.registry import Overload
    from kubedra.cel.types import Type


@dataclass(eq=False, slots=True)
class Node:
    """Common base: source offset plus the checker's annotations."""

    pos: int
    typ: Type | None = field(default=None, init=False)


@dataclass(eq=False, slots=True)
class Literal(Node):
    value: object


@dataclass(eq=False, slots=True)
class Ident(Node):
    name: str


@dataclass(eq=False, slots=True)
class Select(Node):
    """`operand.field`; `test_only` marks `has()`, `optional` marks `.?field`."""

    operand: Node
    field: str
    test_only: bool = False
    optional: bool = False


@dataclass(eq=False, slots=True)
class Index(Node):
    """`operand[index]`; `optional` marks `[?index]`."""

    operand: Node
    index: Node
    optional: bool = False


@dataclass(eq=False, slots=True)
class Call(Node):
    """Function or operator call; `target` is the receiver of a member call."""

    function: str
    target: Node | None
    args: list[Node]
    overloads: list[Overload] = field(default_factory=list, init=False)


@dataclass(eq=False, slots=True)
class Logic(Node):
    """`&&` / `||` (kept apart from calls: they absorb errors commutatively)."""

    op: str
    left: Node
    right: Node


@dataclass(eq=False, slots=True)
class Conditional(Node):
    cond: Node
    then: Node
    otherwise: Node


@dataclass(eq=False, slots=True)
class ListLit(Node):
    elements: list[Node]
    optional_indices: frozenset[int] = frozenset()


@dataclass(eq=False, slots=True)
class MapLit(Node):
    entries: list[tuple[Node, Node, bool]]


@dataclass(eq=False, slots=True)
class Comprehension(Node):
    """A macro over a range: all/exists/exists_one/map/filter/bind/two-variable forms.

    `var2` is the value variable of two-variable comprehensions; `args` holds the macro's
    expressions after the variables (predicate, or filter + transform, or bind init + body).
    """

    kind: str
    range: Node
    var: str
    var2: str | None
    args: list[Node]
