"""Comparing kubedra's answer with upstream's, and naming every difference.

Results must be equal device for device (share IDs aside, which upstream draws at random:
only their presence is compared). A fatal error must be the same error: the same kind
(a CEL runtime error, a node selection failure, ...) about the same objects (claim,
request, class, selector, device, slice). The words may differ where upstream prints Go
struct dumps; how often they are identical is reported separately.

A difference that is neither is a mismatch. Mismatches kubedra makes on purpose are named
by `DELIBERATE` rules, each with a test pinning both behaviours; anything else is
unexplained and fails the run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kubedra.allocator.types import stable_variant
from tests.conformance.scenario import Outcome, Scenario

# (kind, pattern): the first pattern found in a message names the error's kind.
ERROR_KINDS: tuple[tuple[str, str], ...] = (
    ("cel-runtime", r"CEL runtime error"),
    ("cel-compile", r"CEL compile error"),
    ("node-selection", r"failed to perform node selection|failed to parse node selector"),
    ("all-devices-incomplete", r"asks for all devices, but resource pool \S+ is currently "
                               r"being updated"),
    ("all-devices-invalid", r"asks for all devices, but resource pool \S+ is currently invalid"),
    ("constraint-all", r"because a claim constraint would not be satisfied"),
    ("claim-limit", r"exceeds the claim limit"),
    ("feature-disabled", r"feature is disabled"),
    ("missing-class", r"could not retrieve device class|device class \S+ not found"),
    ("capacity", r"capacity request cannot be represented|capacity value is negative"),
    ("node-selector-terms", r"unsupported ResourceSlice.NodeSelector"),
)  # fmt: skip

# Names of the objects an error is about: claim, request, class, selector, device, slice.
_SUBJECTS = re.compile(
    r"(claim \S+?)[,:]|(request \S+?)[,:]|(class \S+?)[:,]|(selector #\d+)|"
    r"(device [\w.-]+/[\w.-]+/[\w.-]+)|(slice [\w.-]+)|Name:(dev-\d+)"
)


def error_kind(message: str) -> str:
    for kind, pattern in ERROR_KINDS:
        if re.search(pattern, message):
            return kind
    return "other: " + message


def error_subjects(message: str) -> frozenset[str]:
    subjects = set()
    for match in _SUBJECTS.finditer(message):
        text = next(g for g in match.groups() if g)
        if text.startswith("dev-"):  # upstream prints a device as a Go struct
            text = f"device {text}"
        elif text.startswith("device "):
            text = "device " + text.rsplit("/", 1)[-1]
        subjects.add(text)
    return frozenset(subjects)


def same_error(ours: str, theirs: str) -> bool:
    if error_kind(ours) != error_kind(theirs):
        return False
    if error_kind(ours) == "node-selection":
        # Upstream names a device by a struct dump, kubedra by its ID: compare devices
        # by name and the slice when both name one.
        return error_subjects(ours) & error_subjects(theirs) != frozenset() or not (
            error_subjects(ours) and error_subjects(theirs)
        )
    return error_subjects(ours) == error_subjects(theirs)


@dataclass(frozen=True)
class Verdict:
    """`match` (equal), `deliberate` (a named, tested difference) or `unexplained`."""

    status: str
    why: str = ""
    same_words: bool = True


# Asks upstream again, with changes to the oracle request (e.g. which allocators may run).
Ask = Callable[[dict[str, object]], Outcome]


@dataclass(frozen=True)
class Deliberate:
    """A known difference: `applies` decides from the scenario, both outcomes and, where
    that settles it, another question to upstream. Each has a test pinning both sides."""

    name: str
    applies: Callable[[Scenario, Outcome, Outcome, Ask], bool]


def _stable_random_order(scenario: Scenario, ours: Outcome, theirs: Outcome, ask: Ask) -> bool:
    # Upstream's oldest implementation, which runs only with every newer allocator feature
    # off, neither sorts pools nor slices: its first fit follows Go's map order. kubedra
    # always searches in the sorted order the newer implementations use.
    return (
        stable_variant(scenario.features)
        and ours.kind == theirs.kind == "allocated"
        and outcomes_equal(ours, ask({"allocators": ["incubating"]}))
    )


def _stable_permutations(scenario: Scenario, ours: Outcome, theirs: Outcome, ask: Ask) -> bool:
    # The oldest implementation also starts each further device of a request at the first
    # device again (permutations, where the newer ones try combinations): the same answer
    # after more steps, or a search given up on. kubedra takes the newer ones' steps.
    if not stable_variant(scenario.features) or ours.kind == "timeout":
        return False
    if theirs.kind != "timeout" and not outcomes_equal(ours, theirs):
        return False
    newer = ask({"allocators": ["incubating"]})
    return outcomes_equal(ours, newer) and newer.steps == ours.steps < theirs.steps


DELIBERATE: tuple[Deliberate, ...] = (
    Deliberate("stable allocator: random pool and slice order upstream", _stable_random_order),
    Deliberate("stable allocator: permutations within a request (more steps) upstream",
               _stable_permutations),
)


def _steps_differ(ours: Outcome, theirs: Outcome) -> bool:
    """The same search takes the same steps (upstream reports them from its newer
    implementations only)."""
    return bool(theirs.steps) and ours.steps != theirs.steps


def outcomes_equal(ours: Outcome, theirs: Outcome) -> bool:
    if ours.kind != theirs.kind:
        return False
    if ours.kind == "error":
        return same_error(ours.message, theirs.message)
    return ours.kind != "allocated" or ours.results == theirs.results


# kubedra replays upstream's search step for step; past this many steps (a Python step
# costs ~50 times a Go one) it stops there, and both sides must have needed more.
STEP_CAP = 50_000


def step_budget(theirs: Outcome) -> int | None:
    """The step budget kubedra runs with: upstream's count, capped; None if not known."""
    return min(theirs.steps, STEP_CAP) if theirs.steps else None


def judge(scenario: Scenario, ours: Outcome, theirs: Outcome, ask: Ask | None = None) -> Verdict:
    if theirs.steps > STEP_CAP and ours.kind == "timeout":
        return Verdict("match", f"both searches past {STEP_CAP} steps")
    if theirs.steps > STEP_CAP:
        why = f"upstream took {theirs.steps} steps, kubedra stopped within {STEP_CAP}\n"
    elif outcomes_equal(ours, theirs) and ours.kind != "error" and _steps_differ(ours, theirs):
        why = f"search steps differ: kubedra {ours.steps}, upstream {theirs.steps}\n"
    elif outcomes_equal(ours, theirs):
        same = ours.kind != "error" or ours.message == theirs.message
        return Verdict("match", same_words=same)
    else:
        why = ""
    for rule in DELIBERATE:
        if ask is not None and rule.applies(scenario, ours, theirs, ask):
            return Verdict("deliberate", rule.name)
    return Verdict("unexplained", why + describe(ours, theirs))


def describe(ours: Outcome, theirs: Outcome) -> str:
    def one(o: Outcome) -> str:
        if o.kind == "allocated":
            return "allocated " + str([_picks(r) for r in o.results])
        return f"{o.kind} {o.message}".strip()

    text = f"kubedra: {one(ours)}\nupstream: {one(theirs)}"
    if ours.kind == theirs.kind == "allocated":
        text += "".join(f"\n  {line}" for line in differences(ours.results, theirs.results))
    return text


def differences(ours: object, theirs: object, path: str = "") -> list[str]:
    """Where two JSON values differ, as `path: ours != theirs` lines."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [
            line
            for key in sorted(ours.keys() | theirs.keys())
            for line in differences(ours.get(key), theirs.get(key), f"{path}.{key}")
        ]
    if isinstance(ours, list | tuple) and isinstance(theirs, list | tuple) and len(ours) == len(
        theirs
    ):
        return [
            line
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for line in differences(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path or '.'}: {ours!r} != {theirs!r}"]


def _picks(result: dict[str, object]) -> object:
    devices = result.get("devices", {})
    assert isinstance(devices, dict)
    return [f"{r['request']}={r['driver']}/{r['pool']}/{r['device']}" for r in
            devices.get("results", ())] or result  # fmt: skip
