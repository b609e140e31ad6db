"""The pieces of kubectl's output kubedra reimplements: ages (apimachinery's HumanDuration),
JSONPath (client-go's), describe's labels (kubectl's smartLabelFor)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubedra.cli.describe import smart_label
from kubedra.cli.jsonpath import JsonPathError, compile_template, execute
from kubedra.cli.output import age, human_duration


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (317, "5m17s"),
    (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"), (3 * 3600 + 20 * 60, "3h20m"),
    (30 * 3600, "30h"), (4 * 86400 + 2 * 3600, "4d2h"), (12 * 86400, "12d"),
    (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration_as_kubectl(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_age_reads_times_with_and_without_fractions() -> None:
    now = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    assert age("2026-01-01T00:05:00Z", now) == "5m"
    assert age("2026-01-01T00:09:58.123456Z", now) == "1s"
    assert age(None, now) == "<unknown>"


DATA: dict[str, Any] = {"items": [
    {"metadata": {"name": "a", "labels": {"app": "x"}}, "spec": {"n": 2, "ok": True}},
    {"metadata": {"name": "b"}, "spec": {"n": 5, "ok": False}},
]}


@pytest.mark.parametrize(("template", "text"), [
    ("{.items[*].metadata.name}", "a b"),
    ("{.items[0].metadata.labels}", '{"app":"x"}'),
    ("{.items[?(@.spec.n > 3)].metadata.name}", "b"),
    ("{.items[?(@.spec.ok == true)].metadata.name}", "a"),
    ("{.items[-1].metadata.name}", "b"),
    ("{.items[0:1].metadata.name}", "a"),
    ("{.items[1,0].metadata.name}", "b a"),
    ("{..name}", "a b"),
    ("{.items[0].spec.ok}", "true"),
    ("names: {range .items[*]}[{.metadata.name}]{end}.", "names: [a][b]."),
    ('{.items[0].metadata["name"]}', "a"),
    ("{.nosuch[0].x}", ""),
])
def test_jsonpath_as_client_go(template: str, text: str) -> None:
    assert execute(compile_template(template), DATA) == text


@pytest.mark.parametrize("template", ["{.a", "{range .items[*]}{.x}", "{end}", "{.items[x]}"])
def test_jsonpath_refuses_what_kubectl_refuses(template: str) -> None:
    with pytest.raises(JsonPathError, match="error parsing jsonpath"):
        compile_template(template)


@pytest.mark.parametrize(("key", "label"), [
    ("nodeName", "Node Name"), ("apiVersion", "API Version"), ("uid", "UID"),
    ("shareID", "Share ID"), ("allocationTimestamp", "Allocation Timestamp"),
    ("nvidia.com/gpu", "nvidia.com/gpu"), ("gpu.nvidia.com/memory", "gpu.nvidia.com/memory"),
])
def test_describe_labels_fields_as_kubectl(key: str, label: str) -> None:
    assert smart_label(key) == label
