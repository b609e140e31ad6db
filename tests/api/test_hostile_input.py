"""Hostile manifests: each ends in one clear problem naming file and line, bounded in time and
memory, never a traceback (issue 25). The rows reproduce the reported inputs; the tests
after them guard each class of bug (every decoder, every kind of key, every bound)."""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import yaml

from kubedra.api import loader
from kubedra.api.bounds import MAX_DEPTH, MAX_NUMBER_CHARS, MAX_OBJECT_BYTES
from kubedra.api.loader import load_text
from kubedra.api.yaml_reader import yaml_documents
from kubedra.cli.lint import lint_problems
from tests.api.manifests import claim_doc, pod_doc, slice_doc
from tests.fuzz.inputs import Deep, Stats, run_input

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
CLASS_HEAD = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu\n"


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    """Hang and bomb guard on every test here (the figures come from the fuzzer's report)."""
    start = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    assert time.perf_counter() - start < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 1 << 20  # KiB: 1 GiB


def errors(data: str | bytes, file: str = "x.yaml") -> list[str]:
    """Every error of loading and checking `data`, as lint prints them."""
    return [str(p) for p in lint_problems(load_text(data, file)) if p.is_error]


def nested_yaml(levels: int) -> str:
    return CLASS_HEAD + "extra: " + "[" * levels + "]" * levels + "\n"


def alias_bomb(levels: int, indent: str = "") -> str:
    lines = [f"{indent}a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


# (id, text, file name, the one error expected). Each was a traceback, a hang or gigabytes.
REPORTED: list[tuple[str, str | bytes, str, str]] = [
    ("invalid-utf8", CLASS_HEAD.encode() + b"  labels: {a: \xff\xfe}\n", "x.yaml",
     "x.yaml:5: cannot parse: invalid UTF-8 (byte 0xff at offset 85, column 15): manifests must be UTF-8"),
    ("yaml-600-deep-unknown-field", nested_yaml(600), "x.yaml",
     "x.yaml:5: nested too deeply: more than 100 levels of mappings and lists"),
    ("yaml-5000-digit-int", CLASS_HEAD + "  generation: " + "9" * 5000 + "\n", "x.yaml",
     "x.yaml:5: number too long: 5,000 characters, may not be more than 100"),
    ("null-key-after-unknown-field", CLASS_HEAD + "zzz: 1\n~: 2\n", "x.yaml",
     "x.yaml:6: DeviceClass gpu: unsupported map key '~': JSON keys are strings"),
    ("duplicate-key", CLASS_HEAD + "spec:\n  selectors: []\nspec: {}\n", "x.yaml",
     'x.yaml:7: DeviceClass gpu: spec: key "spec" already set in map'),
    ("duplicate-json-field", '{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",\n'
     ' "metadata": {"name": "a", "name": "b"}}', "x.json",
     'x.json:2: DeviceClass b: metadata.name: duplicate field "name"'),
    ("list-of-non-objects", "apiVersion: v1\nkind: List\nitems:\n- 1\n", "x.yaml",
     "x.yaml:4: expected an object (mapping), got number"),
    ("alias-bomb-in-parameters", CLASS_HEAD + "spec:\n  config:\n  - opaque:\n"
     "      driver: gpu.example.com\n      parameters:\n" + alias_bomb(9, " " * 8), "x.yaml",
     "x.yaml:13: document contains excessive aliasing"),
    ("alias-bomb-in-pod", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
     + alias_bomb(7), "x.yaml", "x.yaml:8: document contains excessive aliasing"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "file", "expected"), [r[1:] for r in REPORTED],
                         ids=[r[0] for r in REPORTED])  # fmt: skip
def test_reported_input_gives_one_clear_error(data: str | bytes, file: str, expected: str) -> None:
    assert errors(data, file) == [expected]


# -- duplicate keys: every place a mapping can be ------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "path"),
    [
        (CLASS_HEAD + "  name: again\n", 5, "metadata.name"),
        (CLASS_HEAD + "spec:\n  selectors:\n  - cel: {expression: a, expression: b}\n", 7,
         "spec.selectors[0].cel.expression"),
        ("apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  kind: Node\n", 5, "items[0].kind"),
        (CLASS_HEAD + "metadata: {}\n", 5, "metadata"),
        (CLASS_HEAD + "  labels:\n    1: a\n    '1': b\n", 7, "metadata.labels[1]"),
    ],
    ids=["nested", "flow-mapping", "list-item", "top-level", "int-and-string"],
)  # fmt: skip
def test_duplicate_keys_are_refused_with_line_and_path(text: str, line: int, path: str) -> None:
    (problem,) = [p for p in load_text(text, "x.yaml").problems]
    assert (problem.line, problem.path) == (line, path)
    assert "already set in map" in problem.message


def test_merge_keys_are_not_duplicates_and_explicit_keys_win() -> None:
    text = (
        "base: &base {driver: a, extra: 1}\n"
        "apiVersion: v1\nkind: List\nitems:\n- <<: [*base, {extra: 2, kind: Node}]\n"
        "  extra: 3\n  apiVersion: v1\n  metadata: {name: n}\n"
    )
    raw = next(yaml_documents(text)).data
    assert raw["items"][0] == {"driver": "a", "extra": 3, "kind": "Node", "apiVersion": "v1",
                               "metadata": {"name": "n"}}  # fmt: skip


def test_json_duplicates_anywhere_are_refused() -> None:
    doc = claim_doc()
    text = json.dumps(doc).replace('"name": "gpu"', '"name": "gpu", "name": "gpu2"')
    (problem,) = load_text(text, "x.json").problems
    assert problem.path == "spec.devices.requests[0].name"
    assert problem.message == 'duplicate field "name"'


# -- keys: what JSON (and so Kubernetes) can hold ------------------------------------------


def test_int_and_bool_keys_become_strings_as_in_sigs_k8s_yaml() -> None:
    result = load_text(CLASS_HEAD + "  labels: {1: a, true: b}\n", "x.yaml")
    assert result.problems == []
    assert result.objects[0].obj.metadata.labels == {"1": "a", "true": "b"}


@pytest.mark.parametrize("key", ["~", "null", "1.5"])
def test_keys_json_cannot_hold_are_refused(key: str) -> None:
    (problem,) = load_text(CLASS_HEAD + f"  labels: {{{key}: a}}\n", "x.yaml").problems
    assert problem.line == 5 and "JSON keys are strings" in problem.message


def test_a_mapping_as_key_is_refused() -> None:
    (problem,) = load_text(CLASS_HEAD + "? {a: 1}\n: b\n", "x.yaml").problems
    assert problem.line == 5 and "cannot be a map key" in problem.message


# -- nesting: the bound holds on every path, and below it everything works ----------------


def test_nesting_at_the_bound_loads_and_one_more_level_does_not() -> None:
    # The document itself is level 1: the field adds the remaining levels.
    assert errors(nested_yaml(MAX_DEPTH - 1)) == ['x.yaml:5: DeviceClass gpu: extra: unknown field "extra"']
    assert "nested too deeply" in errors(nested_yaml(MAX_DEPTH))[0]


def test_aliases_count_towards_depth() -> None:
    deep = "[" * 60 + "]" * 60
    text = CLASS_HEAD + f"a: &a {deep}\nb: " + "[" * 50 + "*a" + "]" * 50 + "\n"
    assert errors(text) == ["x.yaml:6: nested too deeply: more than 100 levels of mappings and lists"]


@pytest.mark.parametrize("levels", [150, 2000, 10_000])
def test_deep_json_is_refused_whatever_pythons_recursion_limit(levels: int) -> None:
    """msgspec and the json scanner refuse what would exhaust the stack (their own guard,
    at Python's recursion limit: cel-python raises it to 2,500 in this test process), the
    codec what is deeper than kubedra's bound: one clear error either way."""
    text = '{"apiVersion": "v1", "kind": "Node", "x": ' + "[" * levels + "]" * levels + "}"
    (message,) = errors(text, "x.json")
    assert message.startswith("x.json")
    assert message.endswith(": nested too deeply: more than 100 levels of mappings and lists")


@pytest.mark.parametrize("where", ["parameters", "unknown field"])
def test_json_nesting_below_pythons_stack_but_over_the_bound(where: str) -> None:
    deep: Any = {}
    for _ in range(300):
        deep = {"a": deep}
    doc: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                           "metadata": {"name": "gpu"}}  # fmt: skip
    if where == "parameters":
        doc["spec"] = {"config": [{"opaque": {"driver": "gpu.example.com", "parameters": deep}}]}
    else:
        doc["extra"] = deep
    encoded = json.dumps(doc)
    assert errors(encoded, "x.json") == [
        "x.json:1: DeviceClass gpu: nested too deeply: more than 100 levels of mappings and lists"
    ]


# -- aliases -------------------------------------------------------------------------------


def test_moderate_aliasing_is_fine() -> None:
    text = CLASS_HEAD + "spec:\n  selectors:\n  - &s {cel: {expression: device.driver == 'a'}}\n  - *s\n"
    result = load_text(text, "x.yaml")
    assert result.problems == [] and len(result.objects[0].obj.spec.selectors) == 2


def test_alias_expansion_counts_towards_object_size() -> None:
    big = "x" * (MAX_OBJECT_BYTES // 4)
    text = CLASS_HEAD + f"a: &a {big}\nb: [*a, *a, *a, *a]\n"
    (problem,) = load_text(text, "x.yaml").problems
    assert problem.message.startswith("Request entity too large: ")
    assert problem.line == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [("a: &a [*a]\n", "anchor 'a' value contains itself"),
     ("a: *nowhere\n", "unknown anchor 'nowhere' referenced")],
)  # fmt: skip
def test_alias_errors(text: str, message: str) -> None:
    (problem,) = load_text(text, "x.yaml").problems
    assert problem.message == message


# -- sizes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["s", "List"], ids=["before-parsing", "while-parsing"])
def test_object_over_the_request_limit_is_never_built(name: str) -> None:
    """~5.6 MB of devices: refused from the text alone, or (when the text could be a kubectl
    List) as soon as the parser has read past the bound."""
    devices = "".join(f"  - name: d{i:0100}\n" for i in range(50_000))
    text = f"---\napiVersion: v1\nkind: ResourceSlice\nmetadata:\n  name: {name}\nspec:\n" + devices
    (problem,) = load_text(text, "x.yaml").problems
    assert problem.message.startswith("Request entity too large") and problem.line in (1, 2)


def test_a_list_is_measured_item_by_item() -> None:
    """A List over the bound loads when each item is within it; an item over it is refused
    at the item's line."""
    pad = "x" * (MAX_OBJECT_BYTES // 2)
    items = [claim_doc() for _ in range(3)]
    for i, item in enumerate(items):
        item["metadata"] = {"name": f"c{i}", "namespace": "default", "annotations": {"pad": pad}}
    listing = {"apiVersion": "v1", "kind": "List", "items": items}
    result = load_text(yaml.dump(listing, Dumper=DUMPER, width=1 << 30), "x.yaml")
    assert (result.problems, len(result.objects)) == ([], 3)
    items[1]["metadata"]["annotations"]["more"] = pad
    text = yaml.dump(listing, Dumper=DUMPER, width=1 << 30)
    (problem,) = load_text(text, "x.yaml").problems
    item_lines = [i for i, line in enumerate(text.splitlines(), 1) if line.startswith("- ")]
    assert problem.message.startswith("Request entity too large")
    assert problem.line == item_lines[1]


def test_json_item_over_the_limit() -> None:
    big = {"apiVersion": "v1", "kind": "List", "items": [claim_doc(), {"pad": "y" * MAX_OBJECT_BYTES}]}
    result = load_text(json.dumps(big), "x.json")
    assert [o.obj.KIND for o in result.objects] == ["ResourceClaim"]
    (problem,) = result.problems
    assert problem.message.startswith("Request entity too large")


def test_input_over_the_file_bound_is_not_read(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Any) -> None:  # fmt: skip
    monkeypatch.setattr(loader, "MAX_INPUT_BYTES", 1000)
    path = tmp_path / "big.yaml"
    path.write_text(CLASS_HEAD + "#" * 2000 + "\n")
    (problem,) = loader.load_paths([str(path)]).problems
    assert problem.message == "too large: more than 1,000 bytes" and problem.file == str(path)


# -- numbers, values and tags JSON cannot carry --------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [("9" * (MAX_NUMBER_CHARS + 1), "number too long"),
     ("1:" * 60 + "1", "number too long"),  # YAML 1.1 base 60: quadratic to convert
     ("1" * 60 + "." + "1" * 60, "number too long"),
     (".inf", "unsupported value: .inf"), (".nan", "unsupported value: .nan"),
     ("!!binary aGk=", "unsupported YAML tag 'tag:yaml.org,2002:binary'"),
     ("!!set {a}", "unsupported YAML tag 'tag:yaml.org,2002:set'"),
     ("!!python/name:os.system ''", "unsupported YAML tag"),
     ("!!int abc", "cannot read 'abc' as int")],
)  # fmt: skip
def test_values_json_cannot_carry(value: str, message: str) -> None:
    (problem,) = load_text(CLASS_HEAD + f"extra: {value}\n", "x.yaml").problems
    assert message in problem.message and problem.line == 5


def test_numbers_at_the_bound_load() -> None:
    result = load_text(CLASS_HEAD + "extra: " + "9" * MAX_NUMBER_CHARS + "\n", "x.yaml")
    assert result.problems == []


@pytest.mark.parametrize(
    ("text", "message"),
    [('{"kind": "List", "x": ' + "9" * 5000 + "}", "number too long"),
     ('{"kind": "List", "x": NaN}', "cannot parse: JSON is malformed: invalid character"),
     ('{"kind": "List", "x": -Infinity}', "cannot parse: JSON is malformed")],
)  # fmt: skip
def test_json_numbers(text: str, message: str) -> None:
    (problem,) = load_text(text, "x.json").problems
    assert message in problem.message


def test_timestamps_and_quoted_scalars_stay_strings() -> None:
    text = CLASS_HEAD + "  annotations: {a: 2024-01-01, b: '1', c: \"true\"}\n"
    assert load_text(text, "x.yaml").objects[0].obj.metadata.annotations == {
        "a": "2024-01-01", "b": "1", "c": "true"}  # fmt: skip


# -- int64 fields: upstream's bound, upstream's message -----------------------------------


def test_count_at_int64_max_passes_validation_and_beyond_is_refused() -> None:
    doc = claim_doc()
    doc["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2**63 - 1
    assert errors(yaml.safe_dump(doc)) == []
    doc["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2**63
    (message,) = errors(yaml.safe_dump(doc))
    assert message.endswith(
        "spec.devices.requests[0].exactly.count: json: cannot unmarshal number "
        "9223372036854775808 into Go struct field "
        "ExactDeviceRequest.spec.devices.requests.exactly.count of type int64"
    )


@pytest.mark.parametrize(
    ("path", "struct"),
    [(("spec", "pool", "generation"), "ResourcePool.spec.pool.generation"),
     (("spec", "devices", 0, "attributes", "index", "int"),
      "DeviceAttribute.spec.devices.attributes.index.int")],
)  # fmt: skip
def test_slice_int64_fields(path: tuple[str | int, ...], struct: str) -> None:
    doc = slice_doc()
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = -(2**63) - 1
    (message,) = errors(yaml.safe_dump(doc))
    assert f"into Go struct field {struct} of type int64" in message


# -- opaque parameters: upstream's raw JSON bytes ------------------------------------------


def _params_class(size: int) -> str:
    """A class whose parameters are exactly `size` bytes as compact JSON."""
    filler = "x" * (size - len('{"k":""}'))
    doc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
                    "config": [{"opaque": {"driver": "gpu.example.com",
                                           "parameters": {"k": filler}}}]}}  # fmt: skip
    return yaml.safe_dump(doc, width=1 << 20)


def test_opaque_parameters_are_measured_compact() -> None:
    assert errors(_params_class(10 * 1024)) == []
    (message,) = errors(_params_class(10 * 1024 + 1))
    assert message.endswith("spec.config[0].opaque.parameters: Too long: may not be more than 10240 bytes")


# -- problem location: linear, one pass per file -------------------------------------------


def _flat_claim(requests: int) -> str:
    body = "".join(f"  - name: r{i}\n    deviceClassName: gpu\n" for i in range(requests))
    return ("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata:\n  name: c\n"
            "spec:\n devices:\n  requests:\n" + body)  # fmt: skip


def test_thousand_flat_requests_are_located_each_on_its_line() -> None:
    start = time.perf_counter()
    problems = lint_problems(load_text(_flat_claim(1000), "x.yaml"))
    assert time.perf_counter() - start < 5  # was 47 s: one parse per problem
    moved = [p for p in problems if "moved to" in p.message]
    assert len(moved) == 1000
    assert [p.line for p in moved] == [9 + 2 * i for i in range(1000)]
    (too_many,) = [p for p in problems if p.is_error]
    assert too_many.line == 8 and "Too many: 1000: must have at most 32 items" in too_many.message


@pytest.mark.parametrize("size", [10**5])
def test_oversized_slice_reports_too_many_quickly(size: int) -> None:
    devices = "".join(f"  - name: d{i}\n" for i in range(size))
    text = ("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: s\n"
            "spec:\n  driver: gpu.example.com\n  nodeName: n\n  pool: {name: p, resourceSliceCount: 1}\n"
            "  devices:\n" + devices)  # fmt: skip
    start = time.perf_counter()
    assert errors(text) == [
        f"x.yaml:10: ResourceSlice s: spec.devices: Too many: {size}: must have at most 128 items"
    ]
    assert time.perf_counter() - start < 8  # was 10 s (6.7 s measured by lint)


def test_documents_keep_their_ordinals_and_lines() -> None:
    text = "---\n---\n" + CLASS_HEAD + "bad: 1\n---\n" + CLASS_HEAD.replace("gpu", "b") + "worse: 2\n"
    problems = errors(text)
    assert problems == ['x.yaml:7: DeviceClass gpu: bad: unknown field "bad"',
                        'x.yaml:13: DeviceClass b: worse: unknown field "worse"']  # fmt: skip


# -- streams: stdin and encodings ----------------------------------------------------------


def test_bom_is_accepted_and_stdin_bytes_are_checked() -> None:
    import io

    assert load_text("\ufeff" + CLASS_HEAD, "x.yaml").problems == []

    class Stdin(io.StringIO):
        buffer = io.BytesIO(CLASS_HEAD.encode() + b"x: \xc3\x28\n")

    (problem,) = loader.load_paths(["-"], Stdin()).problems
    assert problem.file == "-" and problem.line == 5 and "invalid UTF-8" in problem.message



@pytest.mark.parametrize(
    "text",
    ['{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": [1], "kind": "Node"}]}',
     '{"apiVersion": "v1", "kind": {"0": 0}, "metadata": {"name": "n"}}',
     '{"apiVersion": "v1", "kind": "List", "items": {"not": "a list"}}'],
    ids=["item-apiVersion", "object-kind", "items-not-a-list"],
)  # fmt: skip
def test_json_kind_and_version_that_are_no_strings(text: str) -> None:
    """Found by the fuzzer: the JSON router read them as strings and raised msgspec's error."""
    (message,) = errors(text, "x.json")
    assert "Required value: every object needs" in message or "Unsupported value" in message


def test_selectors_over_the_limit_are_not_compiled() -> None:
    """20,000 distinct expressions took 20 s to compile before validation said too many."""
    selectors = "".join(f"  - cel:\n      expression: device.driver == 'd{i}.example.com'\n"
                        for i in range(20_000))  # fmt: skip
    start = time.perf_counter()
    problems = errors(CLASS_HEAD + "spec:\n  selectors:\n" + selectors)
    assert problems == ["x.yaml:7: DeviceClass gpu: spec.selectors: Too many: 20000: must have at most 32 items"]
    assert time.perf_counter() - start < 8


def test_one_problem_is_located_like_many() -> None:
    result = load_text(_flat_claim(3), "x.yaml")
    (loaded,) = result.objects
    problem = loaded.warnings[2]
    bare = replace(problem, file="", line=0)
    assert result.locate(bare, loaded.source) == problem


# -- nesting anywhere: the guard covers every field, not only unknown ones -----------------

_MARK = "__kubedra_deep__"


def _field_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield (*prefix, key)
        yield from _field_paths(child, (*prefix, key))


def deep_at(doc: dict[str, Any], path: tuple[Any, ...], levels: int, fmt: str) -> str:
    """`doc` with the value at `path` replaced by `levels` nested lists (or mappings)."""
    doc = json.loads(json.dumps(doc))
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = _MARK
    text = json.dumps(doc) if fmt == "json" else yaml.dump(doc, Dumper=DUMPER, width=1 << 20)
    return text.replace(f'"{_MARK}"' if fmt == "json" else _MARK, Deep(levels).text)


DOCS = {"claim": claim_doc, "slice": slice_doc, "pod": pod_doc}
DEEP_CASES = [(name, path) for name, make in DOCS.items() for path in _field_paths(make())]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("levels", [3000, 10_000])
def test_nesting_in_any_field_is_one_clear_error(fmt: str, levels: int) -> None:
    """Nesting past Python's stack at each field of real manifests (apiVersion, kind, name
    included), through load, lint, apply and allocate: one 'nested too deeply' error, never
    a RecursionError (each decoder's skip of a field recursed on its own). Past any stack:
    cel-python, imported by other tests, raises this process's recursion limit to 2,500."""
    stats = Stats()
    for name, path in DEEP_CASES[:: 7 if levels == 10_000 else 1]:
        text = deep_at(DOCS[name](), path, levels, fmt)
        problems = errors(text, f"x.{fmt}")
        # libyaml refuses flow nesting past its own bound (1,000) before kubedra's check runs.
        clear = ("nested too deeply", "exceeded maximum nesting depth")
        assert problems and all(any(c in p for c in clear) for p in problems), (name, path, problems)
        if path[0] in ("apiVersion", "kind", "metadata") and len(path) <= 2:
            run_input("deep field", f"x.{fmt}", text, stats)
    assert stats.runs.crashes == [], stats.runs.crashes
