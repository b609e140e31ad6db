"""Label and field selectors, as kubectl's `-l` and `--field-selector` accept them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# Fields a store can select on without loading objects (indexed columns).
FIELD_PATHS = {
    "spec.nodeName": "node_name",
    "spec.driver": "driver",
    "metadata.name": "name",
    "metadata.namespace": "namespace",
}

_REQUIREMENT = re.compile(
    r"\s*(?:(?P<notkey>!\s*[^\s,!=()]+)"
    r"|(?P<setkey>[^\s,!=()]+)\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)"
    r"|(?P<key>[^\s,!=()]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s,!=()]*))?)\s*(?:,|$)"
)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector: equality (`a=b`, `a!=b`), set (`a in (x,y)`), existence."""

    text: str
    requirements: tuple[Callable[[Mapping[str, str]], bool], ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req(labels) for req in self.requirements)


def parse_label_selector(text: str) -> LabelSelector:
    """Parse kubectl's label selector syntax; raises ValueError naming the bad part."""
    requirements: list[Callable[[Mapping[str, str]], bool]] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _REQUIREMENT.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"unable to parse requirement: {text[pos:]!r}")
        requirements.append(_requirement(m))
        pos = m.end()
    return LabelSelector(text, tuple(requirements))


def _requirement(m: re.Match[str]) -> Callable[[Mapping[str, str]], bool]:
    if m["notkey"]:
        key = m["notkey"][1:].strip()
        return lambda labels: key not in labels
    if m["setkey"]:
        key, values = m["setkey"], frozenset(v.strip() for v in m["values"].split(",") if v.strip())
        if m["setop"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    key, op, value = m["key"], m["op"], m["value"] or ""
    if op is None:
        return lambda labels: key in labels
    if op == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: labels.get(key) == value


def parse_field_selector(text: str) -> dict[str, str]:
    """`spec.nodeName=node-1,spec.driver=gpu.nvidia.com` -> {column: value} (equality only)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        path, sep, value = part.partition("==") if "==" in part else part.partition("=")
        if not sep or path.strip() not in FIELD_PATHS:
            supported = ", ".join(sorted(FIELD_PATHS))
            raise ValueError(f"field selector {part!r} is not supported (supported: {supported})")
        out[FIELD_PATHS[path.strip()]] = value.strip()
    return out
