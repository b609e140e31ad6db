"""`kubedra explain KIND[.FIELD]`: field documentation in kubectl explain's layout, from the
models' own docstrings (kubedra's words, not upstream's); `explain pod|claim NAME` keeps its
meaning."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec.inspect as mi
import pytest

from kubedra.api.core import Pod
from kubedra.api.kinds import ALL_KINDS, CONTROL_KINDS, WORKLOAD_KINDS
from kubedra.api.meta import KubeObject
from kubedra.api.resource import GROUP, DeviceClaim, DeviceClass, ResourceClaimSpec
from kubedra.cli.fields import _joined, _struct, attribute_docs, fields_of, type_doc, wrap
from tests.cli.test_lint import kubedra

RESOURCE_KINDS = [k for k in ALL_KINDS if k.API_GROUP == GROUP]
DOCUMENTED_KINDS = [*RESOURCE_KINDS, Pod, *(k for k in ALL_KINDS + CONTROL_KINDS
                                            if k not in RESOURCE_KINDS and k is not Pod),
                    *WORKLOAD_KINDS]
# How upstream's doc comments go on after the Go field name ("Devices defines ...").
UPSTREAM_VERBS = (r"(is|are|defines|specifies|contains|describes|indicates|represents|"
                  r"identifies|references|lists|tracks|provides|holds|stores|records|can|must|may)")


def _unwrapped(lines: list[str]) -> str:
    """Wrapped, indented description lines back as one paragraph."""
    return " ".join(line.strip() for line in lines if line.strip())


def _sections(text: str) -> tuple[list[str], list[str], list[str]]:
    """(header lines, DESCRIPTION lines, FIELDS lines) of an explain answer."""
    lines = text.split("\n")
    start = lines.index("DESCRIPTION:")
    end = lines.index("FIELDS:") if "FIELDS:" in lines else len(lines)
    return lines[:start], lines[start + 1:end], lines[end + 1:]


def _entries(fields: list[str]) -> dict[str, tuple[str, list[str]]]:
    """The FIELDS section as {name: (`<type>[ -required-]`, description lines)}."""
    out: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for line in fields:
        if line.startswith("  ") and not line.startswith("   ") and "\t" in line:
            name, hint = line.strip().split("\t")
            out[name] = (hint, [])
        elif line:
            assert line.startswith("    "), line  # descriptions are indented by 4
            out[name][1].append(line)
    return out


@pytest.mark.parametrize("path", ["resourceclaim.spec.devices", "rc.spec.devices",
                                  "resourceclaims.spec.devices", "claim.spec.devices"])
def test_explain_a_field_in_kubectls_layout(tmp_path: Path, path: str) -> None:
    run = kubedra("--store", str(tmp_path / "s.db"), "explain", path)
    assert (run.returncode, run.stderr) == (0, "")
    assert not (tmp_path / "s.db").exists()  # documentation needs no store
    header, description, fields = _sections(run.stdout)
    assert header == ["GROUP:      resource.k8s.io", "KIND:       ResourceClaim", "VERSION:    v1", "",
                      "FIELD: devices <DeviceClaim>", "", ""]
    # the field's text, then its type's, each ending its line, then kubectl's indented blank
    field_doc = _joined(attribute_docs(ResourceClaimSpec)["devices"])
    assert description[-1] == "    " and all(line.startswith("    ") for line in description)
    assert _unwrapped(description) == f"{field_doc} {type_doc(mi.type_info(DeviceClaim))}"
    assert description[0] == "    The device requests, constraints and configuration of the claim."
    entries = _entries(fields)
    assert list(entries) == ["config", "constraints", "requests"]  # sorted, as kubectl
    assert [hint for hint, _ in entries.values()] == [
        "<[]DeviceClaimConfiguration>", "<[]DeviceConstraint>", "<[]DeviceRequest>"]
    docs = attribute_docs(DeviceClaim)
    for name, (_, text) in entries.items():
        assert _unwrapped(text) == _joined(docs[name])
    assert "does not influence which devices are chosen" in _unwrapped(entries["config"][1])
    assert run.stdout.endswith(".\n\n\n")  # each entry closed by a blank line, then one more
    assert max(len(line) for line in run.stdout.splitlines()) <= 80


def test_explain_a_leaf_a_core_kind_and_a_kind(tmp_path: Path) -> None:
    leaf = kubedra("explain", "po.spec.nodeName").stdout
    assert leaf.startswith("KIND:       Pod\nVERSION:    v1\n\nFIELD: nodeName <string>\n\n\nDESCRIPTION:\n"
                           "    The node the pod is bound to.")  # core kinds have no GROUP line
    assert leaf.endswith("\n    \n\n") and "FIELDS:" not in leaf
    kind = kubedra("explain", "deviceclass").stdout
    header, description, fields = _sections(kind)
    assert header == ["GROUP:      resource.k8s.io", "KIND:       DeviceClass", "VERSION:    v1", ""]
    assert _unwrapped(description) == type_doc(mi.type_info(DeviceClass))
    entries = _entries(fields)
    assert list(entries) == ["apiVersion", "kind", "metadata", "spec"]
    assert entries["spec"][0] == "<DeviceClassSpec>" and entries["metadata"][0] == "<ObjectMeta>"
    assert all(text and "<no description>" not in text[0] for _, text in entries.values())
    required = kubedra("explain", "rs.spec.devices.capacity").stdout
    assert "FIELD: capacity <map[string]DeviceCapacity>\n" in required
    assert "  value\t<Quantity> -required-\n" in required
    assert "  requestPolicy\t<CapacityRequestPolicy>\n" in required


def test_explain_a_scheduling_kind(tmp_path: Path) -> None:
    header, _, fields = _sections(kubedra("explain", "podgroup.spec").stdout)
    assert header == ["GROUP:      scheduling.k8s.io", "KIND:       PodGroup", "VERSION:    v1beta1", "",
                      "FIELD: spec <PodGroupSpec>", "", ""]
    entries = _entries(fields)
    assert entries["schedulingPolicy"][0] == "<PodGroupSchedulingPolicy> -required-"
    assert entries["resourceClaims"][0] == "<[]PodGroupResourceClaim>"
    assert "reservedFor" in _unwrapped(entries["resourceClaims"][1])
    pod = kubedra("explain", "pod.spec.schedulingGroup").stdout
    assert "FIELD: schedulingGroup <PodSchedulingGroup>" in pod and "podGroupName\t<string>" in pod
    # a template that contains itself: --recursive walks it once
    tree = kubedra("explain", "workload.spec", "--recursive").stdout.splitlines()
    assert "  compositePodGroupTemplates\t<[]CompositePodGroupTemplate>" in tree
    assert tree.count("    compositePodGroupTemplates\t<[]CompositePodGroupTemplate>") == 1


def test_explain_recursive_lists_the_tree(tmp_path: Path) -> None:
    lines = kubedra("explain", "dc.spec", "--recursive").stdout.splitlines()
    assert lines[lines.index("FIELDS:") + 1:] == [
        "  config\t<[]DeviceClassConfiguration>",
        "    opaque\t<OpaqueDeviceConfiguration>",
        "      driver\t<string> -required-",
        "      parameters\t<RawExtension> -required-",
        "  extendedResourceName\t<string>",
        "  selectors\t<[]DeviceSelector>",
        "    cel\t<CELDeviceSelector>",
        "      expression\t<string> -required-",
        "",
    ]


def test_explain_errors(tmp_path: Path) -> None:
    missing = kubedra("explain", "rc.spec.nosuch")
    assert (missing.returncode, missing.stderr) == (1, 'error: field "nosuch" does not exist\n')
    kind = kubedra("explain", "widgets")
    assert kind.returncode == 1 and 'doesn\'t have a resource type "widgets"' in kind.stderr
    wrong = kubedra("--store", str(tmp_path / "s.db"), "explain", "dc", "gpu")
    assert wrong.returncode == 2 and "without a name documents its fields" in wrong.stderr


def test_explain_name_still_says_why(tmp_path: Path, seed_dir: Path) -> None:
    store = str(tmp_path / "s.db")
    kubedra("--store", store, "cluster", "create", "--node-profile", "l4x4=1")
    kubedra("--store", store, "apply", "-f", str(seed_dir))
    run = kubedra("--store", store, "explain", "resourceclaim", "vllm-gpu-claim")
    assert run.returncode == 0 and run.stdout.startswith("claim default/vllm-gpu-claim: not allocated\n")


def test_descriptions_are_joined_and_wrapped_as_kubectl() -> None:
    doc = "One line\nand its continuation.\n\n- A list item\n  continued, indented.\nLast."
    assert _joined(doc) == "One line and its continuation.\n\n- A list item\n  continued, indented.\nLast."
    assert wrap("aaa bbb ccc", 7) == "aaa bbb\nccc"
    assert wrap("x " + "y" * 20, 10) == "x\n" + "y" * 20  # a word longer than the line stays whole
    assert wrap("keep\n  indent", 80) == "keep\n  indent"


def _walk(kind: type[KubeObject]) -> list[tuple[str, str, str | None]]:
    """(path, field's text, its model type's text or None for a non-model type) for every
    field under a kind, each model type walked once."""
    out: list[tuple[str, str, str | None]] = []
    seen: set[type] = set()

    def walk(tp: Any, path: str) -> None:
        struct = _struct(tp)
        if struct is None or struct.cls in seen:
            return
        seen.add(struct.cls)
        for field in fields_of(tp):
            model = _struct(field.type) is not None
            out.append((f"{path}.{field.name}", field.doc, type_doc(field.type) if model else None))
            walk(field.type, f"{path}.{field.name}")

    walk(mi.type_info(kind), kind.KIND)
    return out


@pytest.mark.parametrize("kind", DOCUMENTED_KINDS, ids=lambda k: k.KIND)
def test_every_field_and_type_is_documented(kind: type[KubeObject]) -> None:
    """A field added without a docstring under it (or a model without one) fails here."""
    assert type_doc(mi.type_info(kind)), f"{kind.KIND} has no class docstring"
    fields = _walk(kind)
    assert len(fields) >= 3
    undocumented = [path for path, doc, _ in fields if not doc.strip()]
    assert not undocumented, f"fields without a description: {undocumented}"
    untyped = [path for path, _, tdoc in fields if tdoc is not None and not tdoc.strip()]
    assert not untyped, f"fields whose model type has no class docstring: {untyped}"
    explained = kubedra("explain", kind.KIND.lower()).stdout
    assert "<no description>" not in explained and "<empty>" not in explained


@pytest.mark.parametrize("kind", DOCUMENTED_KINDS, ids=lambda k: k.KIND)
def test_descriptions_are_kubedras_own_words(kind: type[KubeObject]) -> None:
    """Upstream's Go doc comments open with the Go field name ("Devices defines how to
    request devices."); kubedra writes its own text, so none of its descriptions does."""
    for path, doc, _ in _walk(kind):
        name = path.rsplit(".", 1)[1]
        go_name = name[0].upper() + name[1:]
        assert not re.match(rf"(?i){go_name} {UPSTREAM_VERBS}\b", doc), (path, doc)
