"""The public cel-spec conformance suite ("simple" tests) run through kubedra.cel.

The tests are read at run time from the Go module cache (cel.dev/expr, pinned below: the
version cel-go v0.29.2 requires, see tools/oracle/go.mod); the oracle decodes the
textproto files with the suite's own schema (`celspec` mode) and also runs every test
through upstream's DRA CEL environment. Nothing of the suite is copied into this repository.

Which tests are in scope is decided before kubedra runs, by the rules of `scope` (each
documented there): features the DRA environment or kubedra does not have, and the tests
whose expectation upstream itself does not meet (kubedra follows upstream: that is its
contract, and the report lists them, with whether kubedra agrees with upstream on them).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kubedra.cel import CelCompileError, CelError, compile_expression
from kubedra.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    NULL,
    STRING,
    TYPE,
    UINT,
    Type,
    list_of,
    map_of,
    optional_of,
)
from tests.conformance.cel_value import same, tagged, untagged
from tests.conformance.oracle import Oracle

EXPR_MODULE = "cel.dev/expr"
EXPR_VERSION = "v0.25.1"  # the cel-spec module cel-go v0.29.2 (tools/oracle) requires
BAR = 0.995  # the share of in-scope tests kubedra must pass

Wire = dict[str, Any]


def module_cache() -> Path:
    """Go's module cache (GOMODCACHE), where `go` put cel.dev/expr when building the oracle."""
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    try:
        found = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                               check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        found = ""
    return Path(found) if found else Path.home() / "go" / "pkg" / "mod"


def suite_files(cache: Path | None = None) -> list[Path]:
    folder = (cache or module_cache()) / f"{EXPR_MODULE}@{EXPR_VERSION}" / "tests" / "simple"
    return sorted((folder / "testdata").glob("*.textproto"))


# -- one test -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What an implementation did: kind is value | error | compile | checked."""

    kind: str
    value: Any = None  # tagged
    text: str = ""
    type: str = ""


@dataclass(frozen=True)
class SpecCase:
    file: str
    section: str
    raw: Wire  # the SimpleTest as protojson
    expected: Any = None  # tagged value
    expected_type: str = ""
    bindings: Wire = field(default_factory=dict)  # tagged values
    problem: str = ""  # an expectation or binding Go could not turn into a CEL value
    upstream: Wire = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.file}/{self.section}/{self.raw['name']}"

    @property
    def expr(self) -> str:
        return str(self.raw["expr"])

    @property
    def expects(self) -> str:
        """value | error | type | unknown (no matcher means the value true)."""
        if "eval_error" in self.raw or "any_eval_errors" in self.raw:
            return "error"
        if "unknown" in self.raw or "any_unknowns" in self.raw:
            return "unknown"
        if "typed_result" in self.raw and "result" not in self.raw["typed_result"]:
            return "type"
        return "value"

    @property
    def expected_value(self) -> Any:
        return self.expected if self.expected is not None else {"bool": True}

    @cached_property
    def declarations(self) -> list[Wire]:
        return list(self.raw.get("type_env", []))


def load(oracle: Oracle, files: list[Path] | None = None) -> tuple[list[SpecCase], set[str]]:
    """Every test of the suite, and the function and macro names upstream's DRA
    environment declares."""
    paths = files if files is not None else suite_files()
    answer = oracle.ask("celspec", {"files": [str(p) for p in paths], "run": True})
    if answer["exprVersion"] != EXPR_VERSION:
        raise AssertionError(f"the oracle links {EXPR_MODULE} {answer['exprVersion']}, "
                             f"the suite read is {EXPR_VERSION}")  # fmt: skip
    cases = [_case(t) for t in answer["tests"]]
    return cases, set(answer["functions"]) | set(answer["macros"])


def _case(entry: Wire) -> SpecCase:
    return SpecCase(
        entry["file"], entry["section"], entry["test"], entry.get("expected"),
        entry.get("expectedType", ""), entry.get("bindings") or {}, entry.get("problem", ""),
        entry.get("upstream") or {},
    )  # fmt: skip


# -- scope -----------------------------------------------------------------------------------
PROTO_FILES = frozenset({"proto2", "proto2_ext", "proto3", "dynamic", "wrappers", "enums"})
_PROTO_NAMES = re.compile(
    r"\b(TestAllTypes|NestedTestAllTypes|TestRequired|GlobalEnum|NestedEnum|NestedMessage"
    r"|google\s*\.\s*protobuf|cel\s*\.\s*expr\s*\.\s*conformance)\b"
)
_TIME_NAMES = re.compile(r"\b(timestamp|duration|getSeconds|getMilliseconds|getHours|getMinutes"
                         r"|getFullYear|getMonth|getDate|getDayOf\w+)\s*\(")  # fmt: skip
_STRINGS = re.compile(
    r'(?:[rRbB]{0,2})("""(?:\\.|[^\\])*?"""|\'\'\'(?:\\.|[^\\])*?\'\'\'|"(?:\\.|[^"\\])*"'
    r"|'(?:\\.|[^'\\])*')",
    re.S,
)
_CALLS = re.compile(r"([A-Za-z_@][\w@]*(?:\s*\.\s*[A-Za-z_@][\w@]*)*)\s*\(")


def called_names(expression: str) -> list[tuple[str, str]]:
    """(qualified name, last segment) of every call, string literals removed first."""
    code = _STRINGS.sub('""', expression)
    out = []
    for match in _CALLS.finditer(code):
        qualified = re.sub(r"\s+", "", match.group(1))
        out.append((qualified, qualified.rsplit(".", 1)[-1]))
    return out


def scope(case: SpecCase, upstream_names: set[str]) -> str | None:
    """Why `case` is outside what kubedra supports, or None. The rules, in order:

    1. protobuf messages: the files about messages, enums, wrappers and the JSON types;
       a test naming a message, enum or google.protobuf type, declaring one, or whose
       bindings or expected value hold one. DRA selectors see no messages.
    2. containers: a test setting a container (name resolution inside a package).
    3. timestamps and durations: the timestamps file, a test calling their functions.
       kubedra has neither (DRA attributes are bool, int, string, version).
    4. declared functions: a test declaring functions of its own (kubedra's environment
       is fixed; only variables can be declared).
    5. qualified variable names: a declaration named `a.b` (namespaces, as containers).
    6. unchecked evaluation: a test that disables the type checker. Kubernetes checks
       every CEL expression it accepts (the API server and the allocator compile selectors
       with the checker), and kubedra has no unchecked mode.
    7. not in the DRA environment: a call of a function or macro upstream's DRA
       environment does not declare (math, encoders, cel.@block, ...), or a name its
       checker reports undeclared that the test does not declare (`math.sign`, whose
       last part a Kubernetes function shares).
    8. unknowns: a test expecting unknown values (the conformance service's partial
       evaluation; none today).
    9. upstream deviates: upstream's DRA environment (run by the oracle) does not meet
       the test's expectation; kubedra follows upstream (homogeneous literals, which
       Kubernetes requires, and cel-go's own known gaps).
    """
    for rule in (_proto, _container, _time, _functions, _qualified, _unchecked):
        reason = rule(case)
        if reason is not None:
            return reason
    if _missing_names(case, upstream_names):
        return "not in the DRA environment"
    if case.expects == "unknown":
        return "unknowns"
    if not meets_spec(upstream_outcome(case), case):
        return "upstream deviates"
    return None


def _proto(case: SpecCase) -> str | None:
    holds_object = "object" in repr(case.expected) or "object" in repr(case.bindings)
    declares = any(_proto_type(d.get("ident", {}).get("type", {})) for d in case.declarations)
    if case.file in PROTO_FILES or _PROTO_NAMES.search(case.expr) or holds_object or declares:
        return "protobuf messages"
    if "object_value" in repr(case.raw.get("value", "")) or case.problem:
        return "protobuf messages"
    return None


def _proto_type(t: Wire) -> bool:
    if "message_type" in t or "wrapper" in t or "well_known" in t:
        return True
    return any(_proto_type(v) for v in t.values() if isinstance(v, dict))


def _container(case: SpecCase) -> str | None:
    return "containers" if case.raw.get("container") else None


def _time(case: SpecCase) -> str | None:
    if case.file == "timestamps" or _TIME_NAMES.search(_STRINGS.sub('""', case.expr)):
        return "timestamps and durations"
    return None


def _functions(case: SpecCase) -> str | None:
    return "declared functions" if any("function" in d for d in case.declarations) else None


def _qualified(case: SpecCase) -> str | None:
    names = [d["name"] for d in case.declarations] + list(case.bindings)
    return "qualified variable names" if any("." in n for n in names) else None


def _unchecked(case: SpecCase) -> str | None:
    return "unchecked evaluation" if case.raw.get("disable_check") else None


def _missing_names(case: SpecCase, upstream_names: set[str]) -> bool:
    if any(q not in upstream_names and last not in upstream_names
           for q, last in called_names(case.expr)):  # fmt: skip
        return True
    declared = {d["name"] for d in case.declarations} | set(case.bindings)
    undeclared = _UNDECLARED.findall(case.upstream.get("compileError", ""))
    return any(name not in declared for name in undeclared)


_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")


# -- running and judging ----------------------------------------------------------------------
_PRIMITIVES = {"BOOL": BOOL, "INT64": INT, "UINT64": UINT, "DOUBLE": DOUBLE,
               "STRING": STRING, "BYTES": BYTES}  # fmt: skip


def kubedra_type(t: Wire) -> Type:
    """A declaration's type (cel.expr.Type as protojson) as a kubedra type."""
    if "primitive" in t:
        return _PRIMITIVES[t["primitive"]]
    if "list_type" in t:
        return list_of(kubedra_type(t["list_type"]["elem_type"]))
    if "map_type" in t:
        m = t["map_type"]
        return map_of(kubedra_type(m["key_type"]), kubedra_type(m["value_type"]))
    if t.get("abstract_type", {}).get("name") == "optional_type":
        return optional_of(kubedra_type(t["abstract_type"]["parameter_types"][0]))
    if "null" in t:
        return NULL
    if "type" in t:
        return TYPE
    return DYN


def run_kubedra(case: SpecCase) -> Outcome:
    """The test through kubedra.cel: checked with its declarations (a bound variable it
    does not declare is dyn), then evaluated with its bindings."""
    variables = {d["name"]: kubedra_type(d["ident"]["type"]) for d in case.declarations}
    variables.update({n: DYN for n in case.bindings if n not in variables})
    try:
        compiled = compile_expression(case.expr, variables)
    except CelCompileError as exc:
        return Outcome("compile", text=str(exc))
    if case.raw.get("check_only"):
        return Outcome("checked", type=str(compiled.result_type))
    activation = {name: untagged(value) for name, value in case.bindings.items()}
    try:
        result = compiled.evaluate(activation)
    except CelError as exc:
        return Outcome("error", text=str(exc), type=str(compiled.result_type))
    return Outcome("value", value=tagged(result), type=str(compiled.result_type))


def upstream_outcome(case: SpecCase) -> Outcome:
    run = case.upstream
    if "setup" in run or "compileError" in run:
        return Outcome("compile", text=run.get("setup") or run["compileError"])
    if case.raw.get("check_only"):
        return Outcome("checked", type=run.get("type", ""))
    if "error" in run:
        return Outcome("error", text=run["error"], type=run.get("type", ""))
    return Outcome("value", value=run.get("value"), type=run.get("type", ""))


def meets_spec(outcome: Outcome, case: SpecCase) -> bool:
    """The test's expectation met: the value (and deduced type, where given), or an
    evaluation error (any words; a program that fails to build fails when evaluated, so
    "program instantiation failed" counts too)."""
    expects = case.expects
    if expects == "error":
        return outcome.kind == "error" or "program instantiation failed" in outcome.text
    if case.expected_type and outcome.type != case.expected_type:
        return False
    if expects == "type":
        return outcome.kind in ("checked", "value", "error")
    return outcome.kind == "value" and same(outcome.value, case.expected_value)


def agree(ours: Outcome, theirs: Outcome) -> bool:
    """The same outcome as upstream's (value, or kind of failure; type where checked)."""
    if ours.kind != theirs.kind:
        return False
    if ours.kind == "checked":
        return ours.type == theirs.type
    return ours.kind != "value" or same(ours.value, theirs.value)


# -- the report --------------------------------------------------------------------------------
@dataclass
class SpecReport:
    total: int = 0
    excluded: Counter[str] = field(default_factory=Counter)
    passed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (name, detail)
    deviations: int = 0  # upstream deviates
    disagreements: list[tuple[str, str]] = field(default_factory=list)  # kubedra != upstream

    @property
    def in_scope(self) -> int:
        return self.total - sum(self.excluded.values())

    @property
    def rate(self) -> float:
        return self.passed / self.in_scope if self.in_scope else 1.0

    def render(self) -> str:
        lines = [f"cel-spec {EXPR_MODULE}@{EXPR_VERSION} simple tests",
                 f"  total {self.total}, in scope {self.in_scope}, passed {self.passed}, "
                 f"rate {self.rate:.2%} (bar {BAR:.1%})"]  # fmt: skip
        lines += [f"  out of scope: {reason}: {n}" for reason, n in sorted(self.excluded.items())]
        agreed = self.deviations - len(self.disagreements)
        lines.append(f"  where upstream deviates, kubedra agrees with upstream on {agreed} of "
                     f"{self.deviations}")  # fmt: skip
        lines += [f"  FAILED {name}: {detail}" for name, detail in self.failures]
        lines += [f"  differs from upstream {name}: {d}" for name, d in self.disagreements]
        return "\n".join(lines)


def measure(oracle: Oracle, files: list[Path] | None = None) -> SpecReport:
    cases, names = load(oracle, files)
    report = SpecReport(total=len(cases))
    for case in cases:
        reason = scope(case, names)
        if reason == "upstream deviates":
            report.deviations += 1
            ours, theirs = run_kubedra(case), upstream_outcome(case)
            if not agree(ours, theirs):
                report.disagreements.append((case.name, f"kubedra {ours} upstream {theirs}"))
        if reason is not None:
            report.excluded[reason] += 1
            continue
        ours = run_kubedra(case)
        if meets_spec(ours, case):
            report.passed += 1
        else:
            detail = f"{case.expr!r}: kubedra {ours}, expected {case.expects} "
            report.failures.append((case.name, detail + _expectation(case)))
    return report


def _expectation(case: SpecCase) -> str:
    if case.expects == "value":
        return f"{case.expected_value} {case.expected_type}".rstrip()
    return case.expected_type
