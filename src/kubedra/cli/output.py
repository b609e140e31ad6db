"""kubectl-style output: aligned tables, -o yaml|json|name|jsonpath|custom-columns, ages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubedra.api.codec import dump_json, dump_yaml, json_text, kube_list, yaml_text
from kubedra.api.meta import KubeObject
from kubedra.cli import jsonpath
from kubedra.errors import KubedraError

# What `-o` accepts, as kubectl lists it in its refusal (templates: go-template aside).
FORMATS = (
    "custom-columns",
    "custom-columns-file",
    "json",
    "jsonpath",
    "jsonpath-file",
    "name",
    "wide",
    "yaml",
)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns separated by three spaces, as kubectl prints them."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    return "\n".join(lines) + "\n"


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """The time since an RFC 3339 timestamp as kubectl writes it (apimachinery's
    HumanDuration: `45s`, `5m17s`, `12m`, `3h20m`, `30h`, `4d2h`, `12d`, `1y30d`)."""
    if not timestamp:
        return "<unknown>"
    then = parse_time(timestamp)
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    return human_duration(seconds)


def parse_time(timestamp: str) -> datetime:
    """An RFC 3339 time, with or without fractional seconds (metav1.Time, MicroTime)."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)


def human_duration(seconds: int) -> str:
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours = seconds // 60, seconds // 3600
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years, days = hours // (24 * 365), (hours // 24) % 365
    if years < 8:
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{years}y"


def labels_text(labels: Mapping[str, str]) -> str:
    """`--show-labels`' cell: `a=b,c=d` sorted by key, `<none>` without labels."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


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


# --- -o: the format and its template -----------------------------------------------------


@dataclass(frozen=True)
class Output:
    """What `-o` asked for: `kind` (table, wide, yaml, json, name, jsonpath, custom-columns)
    and, for the last two, the compiled template or columns."""

    kind: str
    template: tuple[jsonpath.Node, ...] = ()
    columns: tuple[tuple[str, tuple[jsonpath.Node, ...]], ...] = ()

    @property
    def structured(self) -> bool:
        """Printed from the objects' data (not a table of kubedra's columns)."""
        return self.kind in ("yaml", "json", "name", "jsonpath")


def parse_output(value: str | None) -> Output:
    """`-o VALUE` as kubectl reads it; KubedraError for what kubectl refuses."""
    if value is None or value == "":
        return Output("table")
    name, _, arg = value.partition("=")
    if name not in FORMATS:
        allowed = ",".join(FORMATS)
        raise KubedraError(
            f'unable to match a printer suitable for the output format "{value}", '
            f"allowed formats are: {allowed}"
        )
    if name.endswith("-file"):
        name, arg = name.removesuffix("-file"), _read(arg)
    try:
        if name == "jsonpath":
            return Output("jsonpath", template=jsonpath.compile_template(_needs(arg, name)))
        if name == "custom-columns":
            return Output("custom-columns", columns=_columns(_needs(arg, name)))
    except jsonpath.JsonPathError as err:
        raise KubedraError(str(err)) from None
    return Output(name)


def _needs(arg: str, name: str) -> str:
    if not arg:
        raise KubedraError(f"{name} template format specified but no template given")
    return arg


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        raise KubedraError(f"error reading template {path}: {err.strerror}") from None


def _columns(spec: str) -> tuple[tuple[str, tuple[jsonpath.Node, ...]], ...]:
    """`NAME:.metadata.name,STATE:.status...` (or a file's header line and paths line)."""
    lines = [line for line in spec.splitlines() if line.strip()]
    if len(lines) == 2 and ":" not in lines[0]:  # custom-columns-file: headers, then paths
        pairs = list(zip(lines[0].split(), lines[1].split(), strict=False))
    else:
        pairs = [tuple(part.split(":", 1)) for part in spec.split(",")]  # type: ignore[misc]
    out = []
    for pair in pairs:
        if len(pair) != 2 or not pair[0]:
            raise KubedraError(
                f"unexpected custom-columns spec: {':'.join(pair)}, expected "
                "<header>:<json-path-expr>"
            )
        out.append((pair[0], jsonpath.compile_template(jsonpath.relaxed(pair[1]))))
    return tuple(out)


def render_jsonpath(output: Output, data: Any) -> str:
    """`-o jsonpath=`: the template over the object (or the List), no newline added."""
    return jsonpath.execute(output.template, data)


def render_columns(output: Output, items: Sequence[Any]) -> str:
    """`-o custom-columns=`: one row per object, several values joined by commas,
    `<none>` where the path finds nothing."""
    rows = []
    for item in items:
        cells = []
        for _, nodes in output.columns:
            found = jsonpath.values(nodes, item)
            cells.append(",".join(jsonpath.text_of(v) for v in found) if found else "<none>")
        rows.append(cells)
    return table([header for header, _ in output.columns], rows)
