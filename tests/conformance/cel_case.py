"""One CEL selector case: an expression, feature switches and devices, run by kubedra.cel
(strict, upstream's environment) and by upstream's DRA CEL compiler.

Compared: whether it compiles; the cost estimate; per device the match or the error. The
words of errors are compared separately (reported, not required): upstream's come from
cel-go and Go's libraries, kubedra's from its own implementation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubedra.api.codec import decode_object
from kubedra.api.resource import Device, ResourceSlice
from kubedra.cel import CelCompileError, CelError, DeviceView, compile_selector

Wire = dict[str, Any]


@dataclass(frozen=True)
class CelCase:
    expression: str
    devices: tuple[Wire, ...]
    consumable_capacity: bool = True
    list_attributes: bool = False
    # True: compiled as the API server compiles an expression being written (the switches
    # choose the environment); False: as the allocator compiles a stored one.
    new_expression: bool = False
    tags: frozenset[str] = field(default=frozenset(), compare=False)

    def oracle_request(self) -> Wire:
        return {
            "expression": self.expression,
            "features": {
                "EnableConsumableCapacity": self.consumable_capacity,
                "EnableListTypeAttributes": self.list_attributes,
            },
            "devices": list(self.devices),
            "newExpression": self.new_expression,
        }

    def run_kubedra(self) -> CelOutcome:
        try:
            # A stored expression (the allocator's) compiles in the newest environment.
            new = self.new_expression
            compiled = compile_selector(
                self.expression,
                strict=True,
                consumable_capacity=self.consumable_capacity or not new,
                list_attributes=self.list_attributes or not new,
                enforce_cost_limit=False,
            )
        except CelCompileError as exc:
            return CelOutcome(compile_error=str(exc))
        results = []
        for wire in self.devices:
            view = DeviceView.of(wire["driver"], _decode_device(wire))
            try:
                results.append((compiled.evaluate(view), ""))
            except CelError as exc:
                results.append((False, str(exc)))
        return CelOutcome(cost=compiled.estimated_cost, results=tuple(results))


def _decode_device(wire: Wire) -> Device:
    """The device through kubedra's own decoding (a one-device ResourceSlice)."""
    device = {k: v for k, v in wire.items() if k != "driver" and v is not None}
    raw = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
           "spec": {"driver": wire["driver"], "devices": [{"name": "d", **device}]}}  # fmt: skip
    obj = decode_object(raw).obj
    assert isinstance(obj, ResourceSlice)
    return obj.spec.devices[0]


@dataclass(frozen=True)
class CelOutcome:
    compile_error: str = ""
    cost: int | None = None
    results: tuple[tuple[bool, str], ...] = ()  # (match, error) per device


def oracle_cel_outcome(answer: Wire) -> CelOutcome:
    if "compileError" in answer:
        return CelOutcome(compile_error=answer["compileError"])
    return CelOutcome(
        cost=answer.get("cost"),
        results=tuple((r.get("match", False), r.get("error", "")) for r in answer.get("results", [])),
    )


@dataclass(frozen=True)
class CelVerdict:
    status: str  # match | unexplained
    why: str = ""
    same_words: bool = True
    cost_equal: bool = True


def judge_cel(ours: CelOutcome, theirs: CelOutcome) -> CelVerdict:
    if bool(ours.compile_error) != bool(theirs.compile_error):
        return CelVerdict("unexplained", _describe(ours, theirs))
    if ours.compile_error:
        return CelVerdict("match", same_words=_same_text(ours.compile_error,
                                                         theirs.compile_error))  # fmt: skip
    if ours.cost != theirs.cost:
        return CelVerdict("unexplained", "cost estimate differs\n" + _describe(ours, theirs),
                          cost_equal=False)  # fmt: skip
    same_words = True
    for (match, error), (their_match, their_error) in zip(
        ours.results, theirs.results, strict=True
    ):
        if bool(error) != bool(their_error) or (not error and match != their_match):
            return CelVerdict("unexplained", _describe(ours, theirs))
        same_words = same_words and _same_text(error, their_error)
    return CelVerdict("match", same_words=same_words)


def _same_text(ours: str, theirs: str) -> bool:
    """Equal words; cel-go's source excerpts under compile errors (" | ...") aside."""
    return ours == _without_excerpts(theirs)


def _without_excerpts(message: str) -> str:
    return "\n".join(line for line in message.split("\n") if not line.startswith(" | "))


def _describe(ours: CelOutcome, theirs: CelOutcome) -> str:
    return f"kubedra:  {ours}\nupstream: {theirs}"
