"""Kubernetes' CEL library test expressions, run through upstream's DRA environment (the
oracle, "value" mode) and through kubedra.

The expressions are the `expr:` fields of k8s.io/apiserver's pkg/cel/library tests (quantity,
semver, ip, cidr, format, and the cost tests of lists, strings, regex, url, sets ...),
read at run time from the Go module cache at the pinned version; none is copied here. An
expression is compared when it is a string literal (a few are built with fmt.Sprintf) and
upstream's DRA environment declares every name it uses (the authorizer library's variables
are not). Compared: the outcome's class (value, run-time error, compile error), the value,
and the cost estimate where both compile.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kubedra.cel import CelCompileError, compile_expression
from tests.conformance.cel_spec import BAR, module_cache
from tests.conformance.cel_value import ValueCase, judge_value
from tests.conformance.go_literals import field_literals
from tests.conformance.oracle import K8S_VERSION, Oracle, chunks

LIBRARY = Path("k8s.io") / f"apiserver@{K8S_VERSION}" / "pkg" / "cel" / "library"
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")


def test_sources(cache: Path | None = None) -> list[Path]:
    return sorted(((cache or module_cache()) / LIBRARY).glob("*_test.go"))


@dataclass(frozen=True)
class LibraryCase:
    file: str
    line: int
    expression: str

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"


def extract(paths: list[Path]) -> tuple[list[LibraryCase], int]:
    """Every distinct literal expression (first occurrence), and how many were not literals."""
    cases: dict[str, LibraryCase] = {}
    computed = 0
    for path in paths:
        for line, text in field_literals(path.read_text(), "expr"):
            if text is None:
                computed += 1
            elif text not in cases:
                cases[text] = LibraryCase(path.name, line, text)
    return list(cases.values()), computed


@dataclass
class LibraryReport:
    total: int = 0  # expr fields read, literal or not
    excluded: Counter[str] = field(default_factory=Counter)
    passed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    costs_compared: int = 0
    cost_failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def in_scope(self) -> int:
        return self.total - sum(self.excluded.values())

    @property
    def rate(self) -> float:
        return self.passed / self.in_scope if self.in_scope else 1.0

    def render(self) -> str:
        lines = [f"Kubernetes CEL library tests (k8s.io/apiserver@{K8S_VERSION} pkg/cel/library)",
                 f"  total {self.total}, in scope {self.in_scope}, passed {self.passed}, "
                 f"rate {self.rate:.2%} (bar {BAR:.1%}); cost estimates equal on "
                 f"{self.costs_compared - len(self.cost_failures)} of {self.costs_compared}"]  # fmt: skip
        lines += [f"  out of scope: {reason}: {n}" for reason, n in sorted(self.excluded.items())]
        lines += [f"  FAILED {name}: {detail}" for name, detail in self.failures]
        lines += [f"  COST {name}: {detail}" for name, detail in self.cost_failures]
        return "\n".join(lines)


def measure(oracle: Oracle, paths: list[Path] | None = None) -> LibraryReport:
    cases, computed = extract(paths if paths is not None else test_sources())
    duplicates = _duplicates(paths if paths is not None else test_sources()) - computed
    report = LibraryReport(total=len(cases) + computed + duplicates)
    report.excluded["built at run time (fmt.Sprintf)"] = computed
    report.excluded["repeated expression"] = duplicates
    for part in chunks(cases, 500):
        answers = oracle.ask_many([("value", {"expression": c.expression}) for c in part])
        for case, answer in zip(part, answers, strict=True):
            _judge(report, case, answer)
    return report


def _duplicates(paths: list[Path]) -> int:
    fields = sum(1 for path in paths for _ in field_literals(path.read_text(), "expr"))
    return fields - len(extract(paths)[0])


def _judge(report: LibraryReport, case: LibraryCase, answer: dict[str, object]) -> None:
    """Scope (by upstream's answer alone), then kubedra's outcome and cost."""
    undeclared = _UNDECLARED.findall(str(answer.get("compileError", "")))
    if undeclared:
        report.excluded["not in the DRA environment"] += 1
        return
    verdict = judge_value(ValueCase(case.expression), answer)
    if verdict.status != "match":
        report.failures.append((case.name, f"{case.expression!r}\n    {verdict.why}"))
        return
    report.passed += 1
    if "cost" in answer:
        _compare_cost(report, case, int(str(answer["cost"])))


def _compare_cost(report: LibraryReport, case: LibraryCase, theirs: int) -> None:
    try:
        ours = compile_expression(case.expression).estimated_cost
    except CelCompileError:
        return
    report.costs_compared += 1
    if ours != theirs:
        report.cost_failures.append((case.name, f"{case.expression!r}: kubedra {ours}, "
                                                f"upstream {theirs}"))  # fmt: skip
