"""Properties of validation on generated objects (the differential's documents, without a
server): it never fails, and every problem it reports is placed on the line of its field."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from kubedra.api.codec import decode_object
from kubedra.api.field_lines import parse_path
from kubedra.api.loader import load_text
from kubedra.api.validation import validate
from tests.api.test_field_paths import NoAliases, lines_of
from tests.api.validation_docs import BASES, documents


@pytest.mark.parametrize("base", sorted(BASES))
def test_the_generators_bases_are_valid(base: str) -> None:
    assert [str(p) for p in validate(decode_object(BASES[base]()).obj) if p.is_error] == []


@settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(doc=documents())
def test_every_problem_is_placed_on_its_field(doc: dict[str, Any]) -> None:
    """Whatever the document, validation returns problems (it never raises), and each
    problem's path leads through the manifest to the line it is reported on (but for a
    missing field, or a key upstream shortens in paths)."""
    text = yaml.dump(doc, Dumper=NoAliases, sort_keys=False)
    result = load_text(text, "generated.yaml")
    found = [(p, loaded.source) for loaded in result.objects for p in validate(loaded.obj)]
    tree = yaml.compose(text)
    for problem in [*result.problems, *result.locate_all(found)]:
        segments = parse_path(problem.path)
        lines, missing = lines_of(tree, segments)
        shortened = any("..." in str(s) for s in segments)
        assert missing <= (2 if shortened else 1), problem
        assert problem.line in lines, problem
