"""Upstream's own DRA CEL test table (k8s.io/dynamic-resource-allocation cel/compile_test.go,
`testcases`), each scenario compiled by kubedra and by upstream's compiler (the oracle,
"cel" mode) in every combination the upstream test runs it in: a scenario without
`features` runs with all four settings of EnableConsumableCapacity and
EnableListTypeAttributes, one without `envType` as a stored and as a new expression.

Compared (`judge_cel`): whether it compiles, and the cost estimate (the scenarios' devices
are not rebuilt here: matching is what the selector differential runs cover). The table is read from the Go module cache at run time; the report also shows the
cost the upstream test itself expects, evaluated from its `expectCost` field.
"""

from __future__ import annotations

import ast as pyast
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.conformance.cel_case import CelCase, Wire, judge_cel, oracle_cel_outcome
from tests.conformance.cel_spec import module_cache
from tests.conformance.go_literals import literal_at
from tests.conformance.oracle import K8S_VERSION, Oracle

TABLE = Path("k8s.io") / f"dynamic-resource-allocation@{K8S_VERSION}" / "cel" / "compile_test.go"
API_TYPES = Path("k8s.io") / f"api@{K8S_VERSION}" / "resource" / "v1" / "types.go"


@dataclass(frozen=True)
class Scenario:
    name: str
    expression: str | None  # None: not a literal (built with fmt.Sprintf)
    features: tuple[bool, bool] | None  # (consumable capacity, list attributes)
    env_type: str | None  # "NewExpressions" | "StoredExpressions"
    expect_cost: int | None  # what the upstream test expects, where it says

    def runs(self) -> list[CelCase]:
        if self.expression is None:
            return []
        features = [self.features] if self.features else list(itertools.product((True, False), repeat=2))
        news = [self.env_type == "NewExpressions"] if self.env_type else [True, False]
        return [CelCase(self.expression, (), consumable, lists, new)
                for (consumable, lists), new in itertools.product(features, news)]  # fmt: skip


def scenarios(cache: Path | None = None) -> list[Scenario]:
    root = cache or module_cache()
    source = (root / TABLE).read_text()
    constants = _constants((root / API_TYPES).read_text())
    body = source[source.index("var testcases = map[string]struct {") :]
    body = body[body.index("\n}{\n") :]
    entries = re.finditer(r'^\t"([^"]+)": \{\n(.*?)^\t\},$', body, re.S | re.M)
    return [_scenario(m.group(1), m.group(2), constants) for m in entries]


def _scenario(name: str, text: str, constants: dict[str, int]) -> Scenario:
    expression = re.search(r"^\t\texpression:", text, re.M)
    literal = literal_at(text, expression.end()) if expression else None
    features = re.search(r"features:\s*&Features\{([^}]*)\}", text)
    env = re.search(r"envType:\s*(?:new|ptr\.To)\(environment\.(\w+)\)", text)
    cost = re.search(r"expectCost:\s*(.*?),?\s*(?://[^\n]*)?$", text, re.M)
    return Scenario(name, literal, _features(features.group(1)) if features else None,
                    env.group(1) if env else None,
                    _go_int(cost.group(1), constants) if cost else None)  # fmt: skip


def _features(fields: str) -> tuple[bool, bool]:
    """A Features literal: fields it does not set are false."""
    set_true = set(re.findall(r"(\w+):\s*true", fields))
    return "EnableConsumableCapacity" in set_true, "EnableListTypeAttributes" in set_true


def _constants(api_types: str) -> dict[str, int]:
    found = {m.group(1): int(m.group(2))
             for m in re.finditer(r"^const (\w+) = (\d+)$", api_types, re.M)}  # fmt: skip
    # compile_test.go: the larger of the two limits (a value may be a scalar or a list).
    found["maxElementsListTypeEnabled"] = max(found["DeviceAttributeMaxValueLength"],
                                              found["ResourceSliceMaxAttributeValuesPerDevice"])  # fmt: skip
    return found


def _go_int(expression: str, constants: dict[str, int]) -> int | None:
    """An integer expression of the table (+, *, parentheses, the constants) or None."""
    text = re.sub(r"/\*.*?\*/", "", expression).strip().rstrip(",")
    try:
        return _evaluate(pyast.parse(text, mode="eval").body, constants)
    except (SyntaxError, ValueError, KeyError):
        return None


def _evaluate(node: pyast.expr, constants: dict[str, int]) -> int:
    if isinstance(node, pyast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, pyast.Name):
        return constants[node.id]
    if isinstance(node, pyast.BinOp) and isinstance(node.op, pyast.Add | pyast.Mult):
        left, right = _evaluate(node.left, constants), _evaluate(node.right, constants)
        return left + right if isinstance(node.op, pyast.Add) else left * right
    raise ValueError(f"not a table cost: {pyast.dump(node)}")


@dataclass
class TableReport:
    scenarios: int = 0
    not_literal: list[str] = field(default_factory=list)
    runs: int = 0
    matched: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    costs: list[tuple[str, str, int | None, int | None, int | None]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.matched / self.runs if self.runs else 1.0

    def render(self) -> str:
        lines = [f"DRA compile table (k8s.io/dynamic-resource-allocation@{K8S_VERSION} "
                 "cel/compile_test.go testcases)",
                 f"  scenarios {self.scenarios} ({len(self.not_literal)} not a literal: "
                 f"{', '.join(self.not_literal) or '-'}), runs {self.runs}, compile outcome "
                 f"and cost equal on {self.matched} ({self.rate:.2%})"]  # fmt: skip
        lines += [f"  FAILED {name}: {detail}" for name, detail in self.failures]
        lines.append("  cost estimates (upstream's test expects / oracle / kubedra, runs):")
        grouped = Counter((name, expect, theirs, ours) for name, _, expect, theirs, ours in self.costs)
        lines += [f"    {name}: {'-' if expect is None else expect} / {theirs} / {ours}, {n}"
                  for (name, expect, theirs, ours), n in grouped.items()]  # fmt: skip
        return "\n".join(lines)


def measure(oracle: Oracle, cache: Path | None = None) -> TableReport:
    table = scenarios(cache)
    report = TableReport(scenarios=len(table))
    report.not_literal = [s.name for s in table if s.expression is None]
    # Grouped by feature switches: upstream keeps one compiler, rebuilt when they change.
    runs = sorted(((s, c) for s in table for c in s.runs()),
                  key=lambda run: (run[1].consumable_capacity, run[1].list_attributes))  # fmt: skip
    answers = oracle.ask_many([("cel", case.oracle_request()) for _, case in runs])
    for (scenario, case), answer in zip(runs, answers, strict=True):
        _judge(report, scenario, case, answer)
    return report


def _judge(report: TableReport, scenario: Scenario, case: CelCase, answer: Wire) -> None:
    report.runs += 1
    ours, theirs = case.run_kubedra(), oracle_cel_outcome(answer)
    run = (f"consumable={case.consumable_capacity} lists={case.list_attributes} "
           f"{'new' if case.new_expression else 'stored'}")  # fmt: skip
    verdict = judge_cel(ours, theirs)
    if verdict.status == "match":
        report.matched += 1
    else:
        report.failures.append((f"{scenario.name} [{run}]", verdict.why))
    if not theirs.compile_error:
        report.costs.append((scenario.name, run, scenario.expect_cost, theirs.cost, ours.cost))
