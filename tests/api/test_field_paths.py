"""Field paths in upstream's style (`attributes[model]`), and the lines they lead back to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from kubedra.api.codec import Key, format_path
from kubedra.api.field_lines import field_lines, parse_path
from kubedra.api.loader import load_text
from kubedra.api.validation import validate
from tests.api.manifests import mutate
from tests.api.test_validation import ACCEPTED, CASES


@pytest.mark.parametrize(
    ("segments", "text"),
    [
        (
            ("spec", "devices", 0, "attributes", Key("model"), "string"),
            "spec.devices[0].attributes[model].string",
        ),
        (
            ("spec", "capacity", Key("gpu.nvidia.com/memory")),
            "spec.capacity[gpu.nvidia.com/memory]",
        ),
        (("metadata", "labels", Key("app")), "metadata.labels[app]"),
        (("spec", "requests", Key("7")), "spec.requests[7]"),
        # a plain string that is no identifier is bracketed too (its kind is unknown)
        (("metadata", "annotations", "example.com/x"), "metadata.annotations[example.com/x]"),
        (("spec", "containers", 0, "name"), "spec.containers[0].name"),
    ],
)
def test_map_keys_are_bracketed_and_read_back(segments: tuple[Any, ...], text: str) -> None:
    assert format_path(segments) == text
    assert [str(s) for s in parse_path(text)] == [str(s) for s in segments]


def test_a_digit_key_finds_its_line_in_a_mapping() -> None:
    text = "spec:\n  requests:\n    '7': 1Gi\n    other: 2Gi\n"
    assert field_lines(text, [(0, parse_path("spec.requests[7]"))]) == [3]


_TABLE = [(c[0], c[1], c[2], c[3]) for c in CASES] + [(c[0], c[1], c[2], c[3]) for c in ACCEPTED]


class NoAliases(yaml.SafeDumper):
    """Repeated items written out in full, each on its own lines."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def lines_of(node: yaml.Node, path: list[str | int]) -> tuple[set[int], int]:
    """The lines where the field at `path` is written (its key's, its value's first), found
    by walking PyYAML's own node tree, and how many segments of the path the text lacks
    (the lines are then those of the deepest field it has)."""
    lines = {node.start_mark.line + 1}
    for depth, segment in enumerate(path):
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if str(k.value) == str(segment)]
            if not found:
                return lines, len(path) - depth
            key, node = found[0]
            lines = {key.start_mark.line + 1, node.start_mark.line + 1}
        elif isinstance(node, yaml.SequenceNode) and isinstance(segment, int):
            if segment >= len(node.value):
                return lines, len(path) - depth
            node = node.value[segment]
            lines = {node.start_mark.line + 1}
        else:
            return lines, len(path) - depth
    return lines, 0


@pytest.mark.parametrize(
    ("base", "path", "value"), [c[1:] for c in _TABLE], ids=[c[0] for c in _TABLE]
)
def test_every_problem_is_placed_on_the_line_of_its_field(
    base: Callable[[], dict[str, Any]], path: str, value: Any
) -> None:
    """The class of bug: a path that does not lead through the document (a map key written
    as fields), or one field_lines cannot follow, puts the problem on the line of some
    parent. Each problem's path must exist in the text, but for a missing last field, and
    the problem lands where its field (map, entry or item) is written."""
    text = yaml.dump(mutate(base(), path, value), Dumper=NoAliases, sort_keys=False)
    result = load_text(text, "case.yaml")
    (loaded,) = result.objects
    tree = yaml.compose(text)
    for problem in result.locate_all((p, loaded.source) for p in validate(loaded.obj)):
        lines, missing = lines_of(tree, parse_path(problem.path))
        assert missing <= 1, problem  # only a missing field itself (`Required value`)
        assert problem.line in lines, problem
