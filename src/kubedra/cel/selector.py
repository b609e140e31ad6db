"""Public entry points: compile a selector once (cached), evaluate it per device."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from kubedra.cel import ast
from kubedra.cel.checker import check
from kubedra.cel.compiler import Compiler, Fn
from kubedra.cel.cost import estimate
from kubedra.cel.device import DeviceView
from kubedra.cel.env import Env, plain_env, selector_env
from kubedra.cel.errors import (
    BareKeyMissing,
    CelCompileError,
    CelError,
    CelEvalError,
    CostLimitExceeded,
    Issue,
)
from kubedra.cel.parser import parse
from kubedra.cel.planner import plan
from kubedra.cel.runtime import COST_LIMIT
from kubedra.cel.types import BOOL, DYN, Type
from kubedra.cel.values import to_cel, type_name

T = TypeVar("T")
MAX_EXPRESSION_BYTES = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength
CACHE_SIZE = 1024


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    """A compiled device selector; `evaluate` is safe to call concurrently."""

    expression: str
    estimated_cost: int
    list_attributes: bool
    _fn: Fn
    _frame_size: int

    def evaluate(self, device: DeviceView) -> bool:
        """True/False for `device`; raises CelEvalError as upstream's runtime errors."""
        fault = device.fault(self.list_attributes)
        if fault is not None:
            raise CelEvalError(fault)  # upstream fails before it runs the program
        try:
            value = _run(self._fn, device, self._frame_size)
        except BareKeyMissing:
            return False  # lenient mode only: the device lacks what a bare lookup names
        if value is True or value is False:
            return value
        raise CelEvalError(
            f"CEL result of type {type_name(value)} could not be converted to bool: {value!r}"
        )


def _run(fn: Fn, root: object, frame_size: int) -> object:
    frame: list[object] = [root, 0]
    if frame_size > 2:
        frame.extend([None] * (frame_size - 2))
    try:
        return fn(frame)
    except CelError:
        raise
    except RecursionError:
        raise CelEvalError("expression too deeply nested for the remaining stack") from None
    except MemoryError:
        raise CostLimitExceeded("operation cancelled: out of memory") from None
    except Exception as exc:  # a Python-level failure inside a library function
        raise CelEvalError(f"{type(exc).__name__}: {exc}") from None


@lru_cache(maxsize=CACHE_SIZE)
def compile_selector(
    expression: str,
    *,
    strict: bool = False,
    consumable_capacity: bool = True,
    list_attributes: bool = False,
    enforce_cost_limit: bool = True,
) -> CompiledSelector:
    """Compile a DRA device selector.

    `strict` gives upstream behaviour exactly; the default (lenient) also resolves a dot-less
    `device.attributes[K]`/`device.capacity[K]` to K in the device's own driver domain.
    `enforce_cost_limit=False` mirrors the allocator (no estimate check; runtime limit only).
    """
    if len(expression.encode("utf-8")) > MAX_EXPRESSION_BYTES:
        raise CelCompileError(
            f"expression too long: {len(expression.encode())} bytes, "
            f"may not be more than {MAX_EXPRESSION_BYTES}"
        )
    env = selector_env(
        strict=strict, consumable_capacity=consumable_capacity, list_attributes=list_attributes
    )
    tree = _checked(expression, env)
    result = tree.typ
    if result not in (BOOL, env.attribute_type):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {result}")
    est = _shallow(lambda: estimate(tree, device=True))
    if enforce_cost_limit and est.total > COST_LIMIT:
        raise CelCompileError(
            f"too complex, exceeds cost limit: estimated cost {est.total}, limit {COST_LIMIT}"
        )
    fn, size = _closure(tree, env, est.iteration if est.total > COST_LIMIT else None, True)
    return CompiledSelector(expression, est.total, list_attributes, fn, size)


def _checked(expression: str, env: Env) -> ast.Node:
    try:
        tree = _shallow(lambda: parse(expression))
        _shallow(lambda: check(tree, env))
    except Issue as issue:
        raise CelCompileError(f"compilation failed: {issue.render(expression)}") from None
    _shallow(lambda: plan(tree))
    return tree


def _shallow(step: Callable[[], T]) -> T:
    """Run a pass over the tree. The parser's limits keep every pass far below Python's
    recursion limit; should a caller's own stack already be nearly full, the pass fails
    with a clear error instead of a RecursionError."""
    try:
        return step()
    except RecursionError:
        raise CelCompileError(
            "compilation failed: expression nested too deeply for the remaining stack"
        ) from None


def _closure(
    tree: ast.Node, env: Env, iteration: dict[int, int] | None, device: bool
) -> tuple[Fn, int]:
    compiler = Compiler(device=device, lenient=env.lenient, iteration_costs=iteration)
    fn = _shallow(lambda: compiler.compile(tree))
    return fn, compiler.frame_size


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    """A plain expression (no `device`) compiled against declared variables: its checked
    type and cost estimate (upstream's, without DRA's size hints), then `evaluate`."""

    expression: str
    result_type: Type
    estimated_cost: int
    _fn: Fn
    _frame_size: int

    def evaluate(self, activation: Mapping[str, object]) -> object:
        """The value for `activation`; raises CelEvalError as upstream's runtime errors.
        Python dicts with keys other than strings become CEL maps first (`to_cel`)."""
        bound = {name: to_cel(value) for name, value in activation.items()}
        return _run(self._fn, bound, self._frame_size)


def compile_expression(
    expression: str, variables: Mapping[str, Type] | None = None
) -> CompiledExpression:
    """Parse, check (with `variables` declared, each `dyn` unless typed) and compile."""
    return _compile_plain(expression, frozenset((variables or {}).items()))


@lru_cache(maxsize=CACHE_SIZE)
def _compile_plain(expression: str, variables: frozenset[tuple[str, Type]]) -> CompiledExpression:
    env = plain_env(variables)
    tree = _checked(expression, env)
    est = _shallow(lambda: estimate(tree, device=False))
    fn, size = _closure(tree, env, est.iteration if est.total > COST_LIMIT else None, False)
    assert tree.typ is not None
    return CompiledExpression(expression, tree.typ, est.total, fn, size)


def evaluate_expression(expression: str, activation: Mapping[str, object]) -> object:
    """Evaluate plain CEL (no `device`) with dynamically typed variables."""
    compiled = compile_expression(expression, dict.fromkeys(activation, DYN))
    return compiled.evaluate(activation)
