"""Plain CEL expressions (no device) evaluated by kubedra and by upstream's environment.

Values travel in the oracle's tagged JSON ({"int": "5"}, {"list": [...]}, library objects as
their type and text); kubedra's are put in the same form. Compared: compile error or not,
run-time error or not, and the value. Cost estimates are compared for selectors only
(`cel_case`): upstream estimates a plain expression without DRA's size hints.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubedra.api.quantity import Quantity
from kubedra.cel import CelCompileError, CelError, evaluate_expression
from kubedra.cel.values import CelType, Optional, UInt, new_map, type_name


def tagged(value: object) -> Any:
    """A kubedra CEL value in the oracle's tagged JSON form."""
    kind = type(value)
    if kind is bool:
        return {"bool": value}
    if kind is UInt:
        return {"uint": str(int(value))}  # type: ignore[call-overload]
    if kind is int:
        return {"int": str(value)}
    if kind is float:
        return {"double": value}
    if kind is str:
        return {"string": value}
    if kind is bytes:
        return {"bytes": base64.b64encode(value).decode()}  # type: ignore[arg-type]
    if value is None:
        return {"null": True}
    if isinstance(value, CelType):
        return {"type": value.name}
    if isinstance(value, Optional):
        return {"optional": tagged(value.value) if value.present else None}
    if isinstance(value, list | tuple):
        return {"list": [tagged(v) for v in value]}
    if isinstance(value, Mapping):
        return {"map": sorted(([tagged(k), tagged(v)] for k, v in value.items()), key=str)}
    return {"object": type_name(value), "text": str(value)}


def untagged(value: Any) -> object:
    """The kubedra CEL value of a tagged scalar, list or map (the inverse of `tagged`);
    maps go through `new_map`, so keys keep their CEL kinds."""
    (kind, content), *_ = value.items()
    scalars: dict[str, Any] = {
        "bool": bool, "int": int, "uint": lambda v: UInt(int(v)), "string": str,
        "double": lambda v: float(str(v).replace("Inf", "inf")),
        "bytes": base64.b64decode, "null": lambda v: None, "type": CelType,
    }  # fmt: skip
    if kind in scalars:
        return scalars[kind](content)
    if kind == "list":
        return [untagged(v) for v in content]
    if kind == "map":
        return new_map((untagged(k), untagged(v)) for k, v in content)
    if kind == "optional":
        return Optional.NONE if content is None else Optional(untagged(content))
    raise ValueError(f"no kubedra value for {value}")


def same(ours: Any, theirs: Any) -> bool:
    """Equal tagged values (doubles as numbers, NaN equal to NaN, maps in any order)."""
    if isinstance(ours, dict) and "double" in ours and isinstance(theirs, dict):
        if "double" not in theirs:
            return False
        a, b = (float(str(v["double"]).replace("Inf", "inf")) for v in (ours, theirs))
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if ours.get("object") == theirs.get("object") == "kubernetes.Quantity":
            # Upstream prints a quantity as it was written when that text passed its
            # canonical-form test ("5.", "+1"); kubedra always prints the canonical form.
            return bool(Quantity.parse(ours["text"]) == Quantity.parse(theirs["text"]))
        if "map" in ours and "map" in theirs:
            return same(sorted(ours["map"], key=str), sorted(theirs["map"], key=str))
        return ours.keys() == theirs.keys() and all(same(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(map(same, ours, theirs))
    return bool(ours == theirs)


@dataclass(frozen=True)
class ValueCase:
    expression: str
    tags: frozenset[str] = field(default=frozenset(), compare=False)


@dataclass(frozen=True)
class ValueVerdict:
    status: str  # match | unexplained
    why: str = ""
    same_words: bool = True


def judge_value(case: ValueCase, answer: dict[str, Any]) -> ValueVerdict:
    """kubedra's outcome for `case` against upstream's answer."""
    try:
        ours: Any = tagged(evaluate_expression(case.expression, {}))
        kind, text = "value", ""
    except CelCompileError as exc:
        kind, text = "compile error", str(exc)
    except CelError as exc:
        kind, text = "error", str(exc)
    theirs_kind = ("compile error" if "compileError" in answer
                   else "error" if "error" in answer else "value")  # fmt: skip
    theirs_text = answer.get("compileError") or answer.get("error") or ""
    why = f"kubedra: {kind} {ours if kind == 'value' else text}\nupstream: {answer}"
    if kind != theirs_kind or (kind == "value" and not same(ours, answer["value"])):
        return ValueVerdict("unexplained", why)
    plain = "\n".join(line for line in theirs_text.split("\n") if not line.startswith(" | "))
    return ValueVerdict("match", same_words=text == plain)
