"""Loading and dumping: files, directories, stdin, Lists, the seed manifests, round trips."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from kubedra.api.codec import decode_object, dump_json, dump_yaml, to_dict
from kubedra.api.loader import load, load_paths, load_text
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cli.lint import lint_problems
from kubedra.errors import ValidationError
from tests.api.manifests import claim_doc, pod_doc, slice_doc
from tests.conftest import REPO


def test_seed_examples_load_verbatim_with_the_flat_request_warning(shared_seed_dir: Path) -> None:
    result = load_paths([str(shared_seed_dir)])
    assert result.problems == []
    kinds = [o.obj.KIND for o in result.objects]
    assert kinds == ["DeviceClass", "ResourceClaim", "Pod"]
    claim = result.objects[1]
    assert isinstance(claim.obj, ResourceClaim)
    exactly = claim.obj.spec.devices.requests[0].exactly
    assert exactly is not None and exactly.device_class_name == "high-memory-gpu"
    assert exactly.count == 1
    warnings = [(w.path, w.line, w.message) for w in claim.warnings]
    assert warnings == [
        ("spec.devices.requests[0].deviceClassName", 9,
         "v1beta1-style request field moved to spec.devices.requests[0].exactly.deviceClassName "
         "(resource.k8s.io/v1 shape)"),
        ("spec.devices.requests[0].count", 10,
         "v1beta1-style request field moved to spec.devices.requests[0].exactly.count "
         "(resource.k8s.io/v1 shape)"),
    ]
    assert claim.warnings[0].file.endswith("02-resourceclaim-vllm.yaml")


def test_examples_seed_is_a_verbatim_copy(shared_seed_dir: Path, seed_dir: Path) -> None:
    for original in sorted(shared_seed_dir.glob("*.yaml")):
        assert (seed_dir / original.name).read_bytes() == original.read_bytes()


def _every_example_manifest() -> list[Path]:
    return sorted(p for p in (REPO / "examples").rglob("*") if p.suffix in (".yaml", ".yml", ".json"))


@pytest.mark.parametrize("path", _every_example_manifest(), ids=lambda p: str(p.relative_to(REPO)))
def test_examples_round_trip_byte_for_byte(path: Path) -> None:
    objects = [o.obj for o in load([str(path)])]
    assert objects
    first = dump_yaml(objects)
    again = [o.obj for o in load_text(first, "again.yaml").objects]
    assert again == objects
    assert dump_yaml(again) == first
    as_json = dump_json(again)
    assert dump_json([o.obj for o in load_text(as_json, "again.json").objects]) == as_json


def test_dump_is_kubectl_shaped() -> None:
    obj = decode_object(claim_doc()).obj
    data = to_dict(obj)
    assert list(data) == ["apiVersion", "kind", "metadata", "spec"]  # empty status omitted
    request = data["spec"]["devices"]["requests"][0]
    assert request == {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
    text = dump_yaml([obj])
    assert "deviceClassName: gpu.nvidia.com" in text and "device_class_name" not in text
    assert json.loads(dump_json([obj]))["kind"] == "ResourceClaim"


def test_quantities_dump_in_canonical_form() -> None:
    doc = slice_doc()
    doc["spec"]["devices"][0]["capacity"]["memory"]["value"] = "81920Mi"
    assert to_dict(decode_object(doc).obj)["spec"]["devices"][0]["capacity"] == {
        "memory": {"value": "80Gi"}
    }


def test_unknown_fields_survive_a_round_trip_and_are_kept_aside() -> None:
    doc = claim_doc()
    doc["spec"]["devices"]["requests"][0]["priority"] = {"tier": "gold"}
    doc["spec"]["color"] = "blue"
    doc["metadata"]["selfLink"] = "/x"
    obj = decode_object(doc).obj
    paths = sorted(str(f.path) for f in obj.unknown_fields)
    assert paths == sorted(
        [str(("metadata", "selfLink")), str(("spec", "color")),
         str(("spec", "devices", "requests", 0, "priority"))]
    )
    assert to_dict(obj) == doc
    again = load_text(dump_yaml([obj]), "x.yaml").objects[0].obj
    assert again == obj and to_dict(again) == doc


def test_unknown_field_inside_an_omitted_parent_is_restored() -> None:
    doc = pod_doc()
    doc["spec"]["securityContext"] = {"runAsUser": 1000}
    doc["status"] = {"podIP": "10.0.0.1"}
    assert to_dict(decode_object(doc).obj) == doc


def test_multi_document_yaml_lines_and_empty_documents() -> None:
    text = "---\n" + yaml.safe_dump(claim_doc()) + "---\n---\n" + yaml.safe_dump(slice_doc())
    result = load_text(text, "multi.yaml")
    assert [o.obj.KIND for o in result.objects] == ["ResourceClaim", "ResourceSlice"]
    assert result.objects[0].source.line == 2


def test_json_and_kubectl_list() -> None:
    listing = {"apiVersion": "v1", "kind": "List", "items": [claim_doc(), slice_doc()]}
    result = load_text(json.dumps(listing, indent=2), "list.json")
    assert [o.obj.KIND for o in result.objects] == ["ResourceClaim", "ResourceSlice"]
    assert [o.source.item for o in result.objects] == [0, 1]


def test_error_inside_a_list_item_has_the_line_of_the_field() -> None:
    bad = slice_doc()
    bad["spec"]["devices"][0]["attributes"]["index"] = {"int": "zero"}
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [claim_doc(), bad]},
                          sort_keys=False)
    result = load_text(text, "list.yaml")
    assert len(result.objects) == 1
    (problem,) = result.problems
    expected_line = next(i for i, line in enumerate(text.splitlines(), 1) if "zero" in line)
    assert (problem.file, problem.line, problem.path) == (
        "list.yaml", expected_line, "spec.devices[0].attributes.index.int")
    assert str(problem).startswith(f"list.yaml:{expected_line}: ResourceSlice node-1-gpu.nvidia.com: ")


def test_directory_is_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.yaml").write_text(yaml.safe_dump(slice_doc()))
    (tmp_path / "a.json").write_text(json.dumps(claim_doc()))
    (tmp_path / "notes.txt").write_text("not a manifest")
    objects = load([str(tmp_path)])
    assert [o.source.file for o in objects] == [str(tmp_path / "a.json"), str(tmp_path / "b" / "2.yaml")]


def test_stdin() -> None:
    objects = load(["-"], stdin=io.StringIO(yaml.safe_dump(slice_doc())))
    assert isinstance(objects[0].obj, ResourceSlice) and objects[0].source.file == "-"


def test_timestamps_stay_strings() -> None:
    doc = claim_doc()
    text = yaml.safe_dump(doc).replace("metadata:\n", "metadata:\n  creationTimestamp: 2026-01-02T03:04:05Z\n")
    obj = load_text(text, "t.yaml").objects[0].obj
    assert obj.metadata.creation_timestamp == "2026-01-02T03:04:05Z"


def test_syntax_error_names_file_and_line() -> None:
    result = load_text("kind: Pod\nmetadata: [unclosed\n", "broken.yaml")
    (problem,) = result.problems
    assert problem.file == "broken.yaml" and problem.line >= 2
    assert problem.message.startswith("cannot parse: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [("kind: Pod\nmetadata:\n  name: x\n bad: [\n",
      "cannot parse: while parsing a block mapping (line 1, column 1): "
      "did not find expected key (line 4, column 2)"),
     ('kind: "Pod\n',
      "cannot parse: while scanning a quoted scalar (line 1, column 7): "
      "found unexpected end of stream (line 2, column 1)"),
     ("a: b: c\n", "cannot parse: mapping values are not allowed in this context (line 1, column 5)")],
)
def test_syntax_error_keeps_pyyaml_whole_message_on_one_line(text: str, message: str) -> None:
    """Both halves of PyYAML's message (what it was parsing, what it found), each with its
    line and column: the first half alone does not say what is wrong."""
    (problem,) = load_text(text, "broken.yaml").problems
    assert problem.message == message and "\n" not in problem.message


def test_unsupported_kind_and_version() -> None:
    with pytest.raises(ValidationError) as info:
        decode_object({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}})
    assert info.value.path == "kind"
    with pytest.raises(ValidationError) as info:
        decode_object({**claim_doc(), "apiVersion": "resource.k8s.io/v2"})
    assert info.value.path == "apiVersion"
    assert "ResourceClaim is served as resource.k8s.io/v1" in info.value.first.message


def test_v1beta1_slice_is_upgraded_with_warnings() -> None:
    doc = slice_doc()
    doc["apiVersion"] = "resource.k8s.io/v1beta1"
    device = doc["spec"]["devices"][0]
    doc["spec"]["devices"][0] = {"name": device["name"], "basic": {"attributes": device["attributes"]}}
    decoded = decode_object(doc)
    assert decoded.obj.api_version == "resource.k8s.io/v1"
    assert isinstance(decoded.obj, ResourceSlice)
    assert "productName" in decoded.obj.spec.devices[0].attributes
    assert [w.path for w in decoded.warnings] == ["apiVersion", "spec.devices[0].basic"]


def test_loading_never_mutates_the_callers_data() -> None:
    doc = {**claim_doc()}
    doc["spec"] = {"devices": {"requests": [{"name": "g", "deviceClassName": "c", "count": 1}]}}
    before = json.dumps(doc, sort_keys=True)
    decode_object(doc)
    assert json.dumps(doc, sort_keys=True) == before


NODE_ALLOCATABLE_SLICE = """apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: cpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: core-0
    %s
"""


def test_node_allocatable_resources_load_in_their_1_37_spelling() -> None:
    """KEP-5517: 1.36's `nodeAllocatableResourceMappings` became `nodeAllocatableResources`
    (a mapping and an overhead per resource) in 1.37; v1.37.2's API server refuses the old
    spelling as an unknown field (checked by hand with kubectl --dry-run=server), as kubedra."""
    current = NODE_ALLOCATABLE_SLICE % (
        "nodeAllocatableResources: {cpu: {mapping: {capacityKey: cores}}}")
    loaded = load_text(current, "s.yaml")
    assert [str(p) for p in lint_problems(loaded) if p.is_error] == []
    (doc,) = loaded.objects
    obj = doc.obj
    assert isinstance(obj, ResourceSlice)
    mapping = obj.spec.devices[0].node_allocatable_resources["cpu"].mapping
    assert mapping is not None and mapping.capacity_key == "cores"
    old = NODE_ALLOCATABLE_SLICE % "nodeAllocatableResourceMappings: {cpu: {capacityKey: cores}}"
    assert [str(p) for p in lint_problems(load_text(old, "s.yaml")) if p.is_error] == [
        's.yaml:10: ResourceSlice s1: spec.devices[0].nodeAllocatableResourceMappings: unknown '
        'field "spec.devices[0].nodeAllocatableResourceMappings"']
