"""kubectl-style output: aligned tables, -o yaml|json|name, ages."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from kubedra.api.codec import dump_json, dump_yaml, json_text, kube_list, yaml_text
from kubedra.api.meta import KubeObject


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns separated by three spaces, as kubectl prints them."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    return "\n".join(lines) + "\n"


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """`5s`, `3m`, `2h`, `4d` since an RFC 3339 timestamp."""
    if not timestamp:
        return "<unknown>"
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "d" else 1):
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def render_list(objects: Sequence[KubeObject], fmt: str) -> str:
    """`kubectl get TYPE -o yaml|json`: a `List` whatever the number of objects."""
    if fmt not in ("yaml", "json"):
        return render_objects(objects, fmt)
    data = kube_list(objects)
    return yaml_text(data) if fmt == "yaml" else json_text(data)


def render_objects(objects: Sequence[KubeObject], fmt: str) -> str:
    """The objects one after another (`---` between YAML documents, a List for several
    JSON ones), as `kubectl get TYPE NAME` and `convert` print them."""
    if fmt == "yaml":
        return dump_yaml(objects)
    if fmt == "json":
        return dump_json(objects)
    if fmt == "name":
        return "".join(f"{resource_name(o)}/{o.name}\n" for o in objects)
    raise ValueError(f"unsupported output format {fmt!r}")


def resource_name(obj: KubeObject | type[KubeObject]) -> str:
    """`resourceclaim.resource.k8s.io`, `pod` (kubectl's -o name prefix)."""
    kind = obj.KIND.lower()
    return f"{kind}.{obj.API_GROUP}" if obj.API_GROUP else kind
