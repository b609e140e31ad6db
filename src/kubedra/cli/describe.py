"""`kubedra describe`: an object as indented `Key: value` lines, kubectl's describe style."""

from __future__ import annotations

from typing import Any

from kubedra.api.codec import to_dict
from kubedra.api.meta import KubeObject

SKIP = {"managedFields"}


def describe_object(obj: KubeObject) -> str:
    data = to_dict(obj)
    meta = data.pop("metadata", {})
    lines = [f"Name:         {obj.name}"]
    if obj.namespace:
        lines.append(f"Namespace:    {obj.namespace}")
    for key in ("labels", "annotations"):
        values = meta.get(key) or {}
        shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "<none>"
        lines.append(f"{key.capitalize() + ':':<13} {shown}")
    lines.append(f"API Version:  {data.pop('apiVersion', '')}")
    lines.append(f"Kind:         {data.pop('kind', '')}")
    for section in ("spec", "status"):
        if section in data:
            lines.append(f"{section.capitalize()}:")
            lines += _lines(data.pop(section), 1)
    return "\n".join(lines) + "\n"


def _lines(value: Any, depth: int) -> list[str]:
    pad = "  " * depth
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            if key in SKIP:
                continue
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{_title(key)}:")
                out += _lines(item, depth + 1)
            else:
                out.append(f"{pad}{_title(key)}:  {item}")
        return out
    if isinstance(value, list):
        out = []
        for item in value:
            sub = _lines(item, depth + 1)
            if sub:
                out.append(f"{pad}- {sub[0].strip()}")
                out += sub[1:]
        return out
    return [f"{pad}{value}"]


def _title(key: str) -> str:
    out = "".join(" " + c if c.isupper() else c for c in key)
    return out[:1].upper() + out[1:]
