"""CEL fuzzing harness: parse, check, compile and evaluate generated and mutated expressions.

Two sources: a grammar of CEL (selector shapes real classes use, plus what a hostile user
writes: deep nesting, huge literals, ranges, growing strings, formats) and mutations of
the expressions in `examples/` and in the CEL test tables. Every case must end in a value
or in one `CelError`, within a time and memory bound. `python -m tests.cel.fuzz N` runs N
cases and prints what it found (it also runs against other checkouts via PYTHONPATH).
"""

from __future__ import annotations

import contextlib
import random
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from kubedra.api.quantity import Quantity
from kubedra.api.semver import Semver
from kubedra.cel import CelError, DeviceView, compile_selector, evaluate_expression
from tests.fuzz.harness import Runs, main, run_drawn, span_edit

ROOT = Path(__file__).resolve().parents[2]

DEVICES = [
    DeviceView(
        "gpu.nvidia.com",
        {
            "productName": "NVIDIA H100 80GB HBM3",
            "count": 8,
            "mig": True,
            "ip": "10.0.0.7",
            "driverVersion": Semver.parse("550.54.15"),
            "example.com/zone": "a",
        },
        {"memory": Quantity.parse("80Gi")},
        allow_multiple_allocations=True,
    ),
    DeviceView("dra.example.com", {}, {}),
]
GPU = 'device.attributes["gpu.nvidia.com"]'

# -- the grammar -----------------------------------------------------------------------
_LEAVES = [
    "1", "0", "-1", "9223372036854775807", "-9223372036854775808", "1u", "1.5", "0.0",
    "1e308", "true", "false", "null", "''", "'abc'", "'a,b,c'", "b'x'", "[]", "{}",
    "[1, 2, 3]", "['a', 'b']", "{'a': 1}", "device.driver", f"{GPU}.productName",
    f"{GPU}.count", f"{GPU}.mig", f"{GPU}.driverVersion", f"{GPU}.ip",
    'device.capacity["gpu.nvidia.com"].memory', 'device.attributes["example.com"].zone',
    'device.capacity["memory"]', 'quantity("40Gi")', 'semver("1.2.3")', "ip('10.0.0.1')",
    "cidr('10.0.0.0/8')", "optional.of(1)", "optional.none()", "lists.range(5)",
    "'9' * 3", "9" * 40, "1e999", "'%.999999999f'", "x", "dyn(1)",
]  # fmt: skip
_UNARY = ["!{}", "-{}", "({})", "[{}]", "size({})", "string({})", "int({})", "double({})",
          "dyn({})", "type({})", "has({}.a)", "{}.size()", "[{}, ?optional.of({})]",
          "optional.of({}).optMap(v, v)", "{{'k': {}}}"]  # fmt: skip
_BINARY = ["{} && {}", "{} || {}", "{} == {}", "{} != {}", "{} < {}", "{} >= {}", "{} + {}",
           "{} - {}", "{} * {}", "{} / {}", "{} % {}", "{} in {}", "{} ? {} : {}",
           "{}.contains({})", "{}.startsWith({})", "{}.matches({})", "{}.split({})",
           "{}.join({})", "{}.indexOf({})", "{}.lastIndexOf({}, 1000)", "{}.replace({}, {})",
           "{}.format([{}])", "{}[{}]", "{}.?{}", "cel.bind(v, {}, v + {})",
           "lists.range({}).map(i, {})", "{}.all(v, {})", "{}.exists(v, {})",
           "{}.filter(v, {})", "{}.map(v, {})", "{}.isGreaterThan({})", "{}.compareTo({})",
           "sets.contains({}, {})", "{}.slice(0, {})", "{}.flatten()", "{}.sort()",
           "{}.distinct()", "{}.containsIP({})", "{}.find({})", "{}.findAll({})"]  # fmt: skip
_HOSTILE = [
    "(" * 100 + "1" + ")" * 100, "!" * 400 + "true", "-" * 401 + "1", "9" * 5000,
    "9" * 5000 + ".0", "9" * 5000 + "u", "0x" + "f" * 5000, "1" + " + 1" * 3000,
    "true" + " && true" * 3000, "[" * 300 + "]" * 300, "a.b" + ".c" * 500,
    "lists.range(30000000).size() > 0", "'%.999999999f'.format([1.0]).size() > 0",
    "'%.10000009e'.format([1.0]).size() > 0",
    "cel.bind(a, 'xx'.replace('x', 'xxxxxxxxxx'), cel.bind(b, a.replace('x', a), "
    "cel.bind(c, b.replace('x', b), c.size() > 0)))",
    "lists.range(1000).map(i, 'x').join('').replace('x', lists.range(1000).map(j, 'y')"
    ".join('')).size() > 0",
    "lists.range(1000).map(i, lists.range(1000).map(j, 'abc').join(',')).join('').size()",
    "'a'.replace('', 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb')",
    "[[1]]" + ".map(x, [x, x, x, x])" * 40,
    "lists.range(1000000).distinct().size() > 0",
    "lists.range(100000).map(i, string(i)).join(',').split(',').size() > 0",
]  # fmt: skip


def _expressions(depth: int) -> st.SearchStrategy[str]:
    leaves = st.sampled_from(_LEAVES)
    if depth == 0:
        return leaves
    inner = _expressions(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.sampled_from(_UNARY), inner).map(lambda t: t[0].replace("{}", t[1])),
        st.tuples(st.sampled_from(_BINARY), inner, inner, inner).map(
            lambda t: (
                t[0].format(t[1], t[2], t[3]) if t[0].count("{}") == 3 else t[0].format(t[1], t[2])
            )
        ),
    )


GRAMMAR = st.one_of(_expressions(4), st.sampled_from(_HOSTILE))

# -- the corpus and its mutations ---------------------------------------------------------
_EXPRESSION_LINE = re.compile(r"expression:\s*(['\"|>]?)(.*)")
_MUTATION_TOKENS = ["(", ")", "[", "]", "{", "}", ".", ".?", "[?", "?", ":", ",", "!", "-",
                    "&&", "||", "==", "'", '"', "\\", "in", "has(", "9" * 30, " + ", "%",
                    "${", "\x00", "é", "\ud7ff", "//", "\n", "cel.bind(", "lists.range(",
                    ".map(x, ", ".all(x, ", "'''", "r'", "b'", "0x", "e+", "u"]  # fmt: skip


def corpus() -> list[str]:
    """Selector expressions of the examples and of the CEL test tables."""
    found: list[str] = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        for line in path.read_text(encoding="utf-8").splitlines():
            m = _EXPRESSION_LINE.search(line)
            if m and m.group(2).strip():
                found.append(m.group(2).strip().strip("'\""))
    from tests.cel import test_language_cases, test_selector_cases

    found += [row[0] for row in test_language_cases.VALUES + test_language_cases.ERRORS]
    found += [row[1] for row in test_selector_cases.CASES + test_selector_cases.LIST_CASES]
    found += [row[0] for row in test_selector_cases.COSTS]
    return sorted(set(found))


def mutate(rng: random.Random, text: str) -> str:
    """A few random edits: insert, delete or duplicate a span, splice a token."""
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op < 3:
            text = span_edit(rng, text, _MUTATION_TOKENS, 8)
        elif op == 3:
            text = "(" * rng.randint(1, 300) + text + ")" * rng.randint(0, 300)
        else:
            text = text.replace(" ", rng.choice(_MUTATION_TOKENS), 1)
    return text


def mutations(seed: int) -> st.SearchStrategy[str]:
    base = corpus()
    return st.integers(min_value=0, max_value=2**32).map(
        lambda n: mutate(random.Random(seed ^ n), base[n % len(base)])
    )


# -- running one case -------------------------------------------------------------------
@dataclass
class Stats:
    expressions: int = 0
    values: int = 0
    errors: int = 0
    runs: Runs = field(default_factory=Runs)


def run_case(expression: str, stats: Stats) -> None:
    """Every entry point on one expression; records crashes (non-CelError exceptions)."""
    stats.expressions += 1
    for step, fn in _steps(expression):
        outcome = stats.runs.run(step, fn, (CelError,), repr(expression[:120]))
        stats.errors += isinstance(outcome, CelError)
        stats.values += outcome is True


def _steps(expression: str) -> Iterator[tuple[str, Callable[[], bool]]]:
    """(entry point, run): each run returns True when it got a value."""

    def plain() -> bool:
        evaluate_expression(expression, {"x": [1, "a", {"k": 2.5}], "a": {"b": {}}})
        return True

    yield "evaluate", plain
    for strict in (False, True):

        def selector(strict: bool = strict) -> bool:
            compiled = compile_selector(expression, strict=strict, enforce_cost_limit=False)
            for device in DEVICES:
                with contextlib.suppress(CelError):
                    compiled.evaluate(device)
            return True

        yield f"selector strict={strict}", selector


def fuzz(count: int, seed_value: int = 0) -> Stats:
    """Run `count` generated or mutated expressions (reproducible for a given seed)."""
    stats = Stats()
    run_drawn(st.one_of(GRAMMAR, mutations(seed_value)), count, seed_value,
              lambda expression: run_case(expression, stats))  # fmt: skip
    return stats


def report(stats: Stats) -> str:
    head = (f"{stats.expressions} expressions: {stats.values} values, {stats.errors} CEL "
            f"errors; {stats.runs.summary()}")  # fmt: skip
    return "\n".join([head, *stats.runs.details()])


if __name__ == "__main__":
    sys.setrecursionlimit(1000)
    raise SystemExit(main(sys.argv[1:], fuzz, report))
