"""CEL for DRA device selectors: compile once, evaluate against many devices quickly.

The engine parses and type-checks an expression in the Kubernetes DRA environment, estimates
its cost, and compiles it into Python closures (see docs in each module).
"""

from kubedra.cel.device import AttributeValue, DeviceView
from kubedra.cel.errors import CelCompileError, CelError, CelEvalError
from kubedra.cel.lint import BareLookup, bare_lookups, constrained_drivers, portable_rewrite
from kubedra.cel.selector import (
    CompiledExpression,
    CompiledSelector,
    compile_expression,
    compile_selector,
    evaluate_expression,
)

__all__ = [
    "AttributeValue",
    "BareLookup",
    "CelCompileError",
    "CelError",
    "CelEvalError",
    "CompiledExpression",
    "CompiledSelector",
    "DeviceView",
    "bare_lookups",
    "compile_expression",
    "compile_selector",
    "constrained_drivers",
    "evaluate_expression",
    "portable_rewrite",
]
