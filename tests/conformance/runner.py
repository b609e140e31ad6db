"""Differential runs: N generated cases through kubedra and upstream, tallied.

`make test` runs a fixed-seed sample (tests/conformance/test_*.py); `make conformance`
runs the large counts (`python -m tests.conformance`) and writes docs/conformance.md. An
unexplained mismatch stops a run: Hypothesis then shrinks the case to a minimal one and
the failure prints it as manifests, ready to become a regression test.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.conformance import cel_grammar, strategies, value_grammar
from tests.conformance.cel_case import CelCase, judge_cel, oracle_cel_outcome
from tests.conformance.cel_value import ValueCase, judge_value
from tests.conformance.compare import Ask, judge, step_budget
from tests.conformance.oracle import Oracle
from tests.conformance.scenario import Scenario, oracle_outcome


def asker(oracle: Oracle, scenario: Scenario) -> Ask:
    """Ask upstream about the scenario again, with changes to the request."""
    return lambda changes: oracle_outcome(
        oracle.ask("alloc", {**scenario.oracle_request(), **changes})
    )


class Mismatch(AssertionError):
    """kubedra and upstream disagree, and no deliberate difference explains it."""


@dataclass
class Tally:
    cases: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # allocated, error, ...
    tags: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)  # match, deliberate: <class>
    different_words: int = 0  # errors that are the same error in other words
    errors: int = 0
    costs_equal: int = 0
    evaluations: int = 0  # CEL: devices a selector ran on
    seconds: float = 0.0


def _run(strategy: Any, count: int, seed_value: int, check: Callable[[Any], None]) -> None:
    @settings(max_examples=count, deadline=None, database=None,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))  # fmt: skip
    @seed(seed_value)
    @given(strategy)
    def one(case: Any) -> None:
        check(case)

    one()


def run_allocator(oracle: Oracle, count: int, seed_value: int, tally: Tally) -> Tally:
    started = time.perf_counter()

    def check(scenario: Scenario) -> None:
        theirs = oracle_outcome(oracle.ask("alloc", scenario.oracle_request()))
        ours = scenario.run_kubedra(max_steps=step_budget(theirs))
        verdict = judge(scenario, ours, theirs, asker(oracle, scenario))
        if verdict.status == "unexplained":
            raise Mismatch(f"{verdict.why}\n--- scenario ---\n{scenario.manifests()}")
        tally.cases += 1
        tally.outcomes[theirs.kind] += 1
        tally.tags.update(scenario.tags)
        tally.verdicts[verdict.status + (f": {verdict.why}" if verdict.why else "")] += 1
        tally.errors += theirs.kind == "error"
        tally.different_words += not verdict.same_words

    _run(strategies.scenarios(), count, seed_value, check)
    tally.seconds += time.perf_counter() - started
    return tally


def run_cel(oracle: Oracle, count: int, seed_value: int, tally: Tally) -> Tally:
    started = time.perf_counter()

    def check(case: CelCase) -> None:
        ours = case.run_kubedra()
        theirs = oracle_cel_outcome(oracle.ask("cel", case.oracle_request()))
        verdict = judge_cel(ours, theirs)
        if verdict.status == "unexplained":
            raise Mismatch(
                f"{verdict.why}\n--- case ---\nexpression: {case.expression}\n"
                f"new expression: {case.new_expression}, consumable capacity: "
                f"{case.consumable_capacity}, list attributes: {case.list_attributes}\n"
                f"devices: {list(case.devices)}"
            )
        tally.cases += 1
        tally.outcomes["compile error" if theirs.compile_error else "compiled"] += 1
        tally.tags.update(case.tags)
        tally.tags["new expression" if case.new_expression else "stored expression"] += 1
        tally.verdicts[verdict.status] += 1
        tally.costs_equal += verdict.cost_equal and not theirs.compile_error
        tally.evaluations += len(theirs.results)
        tally.errors += sum(1 for _, e in theirs.results if e) + bool(theirs.compile_error)
        tally.different_words += not verdict.same_words

    _run(cel_grammar.cases(), count, seed_value, check)
    tally.seconds += time.perf_counter() - started
    return tally


def run_values(oracle: Oracle, count: int, seed_value: int, tally: Tally) -> Tally:
    started = time.perf_counter()

    def check(case: ValueCase) -> None:
        answer = oracle.ask("value", {"expression": case.expression})
        verdict = judge_value(case, answer)
        if verdict.status == "unexplained":
            raise Mismatch(f"{verdict.why}\n--- expression ---\n{case.expression}")
        kind = "compile error" if "compileError" in answer else "error" if "error" in answer \
            else "value"  # fmt: skip
        tally.cases += 1
        tally.outcomes[kind] += 1
        tally.tags.update(case.tags)
        tally.verdicts[verdict.status] += 1
        tally.different_words += not verdict.same_words

    _run(value_grammar.cases(), count, seed_value, check)
    tally.seconds += time.perf_counter() - started
    return tally
