"""Program planning: what cel-go does once, when a checked expression becomes a program.

Kubernetes' base environment plans with cel-go's OptOptimize: a type conversion (`int`,
`string`, `dyn`, ...) of a constant is evaluated right away, and a constant regular
expression given to `matches`, `find` or `findAll` is compiled right away. Either failing
fails the program ("program instantiation failed: ..."): the API server refuses such a
selector, and the allocator reports a CEL compile error, not a run-time one, even where
the failing part would never run (`true || int('x') == 1`).
"""

from __future__ import annotations

from kubedra.cel import ast
from kubedra.cel.compiler import Compiler
from kubedra.cel.errors import CelCompileError, CelEvalError
from kubedra.cel.patterns import children
from kubedra.cel.runtime import check_qualifier
from kubedra.cel.stdlib import compile_regex

_CONVERSIONS = frozenset(
    {"bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"}
)
_REGEX_FUNCTIONS = frozenset({"matches", "find", "findAll"})


def plan(tree: ast.Node) -> None:
    """Evaluate the constant parts cel-go's planner evaluates; raises CelCompileError."""
    _Planner().constant(tree)


class _Planner:
    def __init__(self) -> None:
        self.compiler = Compiler(device=False, lenient=False, iteration_costs=None)
        self.values: dict[int, object] = {}  # id(node) -> value, for constant nodes

    def constant(self, node: ast.Node) -> bool:
        """Plan `node` (children first, as cel-go builds its program bottom-up); whether it
        is a constant of the program."""
        parts = [self.constant(child) for child in children(node)]
        if isinstance(node, ast.Literal):
            return True
        if isinstance(node, ast.ListLit | ast.MapLit):
            return all(parts)
        if isinstance(node, ast.Index) and parts[1]:
            self._qualifier(node.index)
        if isinstance(node, ast.Call):
            args = ([node.target] if node.target is not None else []) + node.args
            self._regex(node, args, parts)
            if node.function in _CONVERSIONS and node.target is None and parts == [True]:
                self._evaluate(node)
                return True
        return False

    def _evaluate(self, node: ast.Node) -> object:
        if id(node) not in self.values:
            try:
                self.values[id(node)] = self.compiler.compile(node)([None, 0])
            except CelEvalError as exc:
                raise CelCompileError(f"program instantiation failed: {exc}") from None
        return self.values[id(node)]

    def _qualifier(self, index: ast.Node) -> None:
        """A constant index becomes a qualifier of the indexed value when cel-go plans the
        program; only strings, numbers and bools can be one (`dyn(m)[dyn(null)]`)."""
        try:
            check_qualifier(self._evaluate(index))
        except CelEvalError as exc:
            raise CelCompileError(f"program instantiation failed: {exc}") from None

    def _regex(self, node: ast.Call, args: list[ast.Node], constant: list[bool]) -> None:
        if node.function not in _REGEX_FUNCTIONS or len(args) < 2 or not constant[1]:
            return
        pattern = self._evaluate(args[1])
        if type(pattern) is str:
            try:
                compile_regex(pattern)
            except CelEvalError as exc:
                raise CelCompileError(f"program instantiation failed: {exc}") from None
