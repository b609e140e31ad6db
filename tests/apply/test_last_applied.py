"""kubectl's last-applied annotation and the object apply computes from it (no store)."""

from __future__ import annotations

import json

import msgspec
import pytest

from kubedra.api.apply import (
    LAST_APPLIED,
    applied_configuration,
    encode_last_applied,
    last_applied,
    merge_applied,
    with_last_applied,
)
from kubedra.api.core import Pod, PodStatus
from kubedra.api.loader import load_text
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaim
from kubedra.errors import ValidationError

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
  annotations: {note: "a<b && c>d \\u2028"}
spec:
  containers: [{name: app, image: "img:1"}]
"""


def load(text: str) -> KubeObject:
    (loaded,) = load_text(text).objects
    return loaded.obj


def annotated(obj: KubeObject, text: str) -> KubeObject:
    meta = msgspec.structs.replace(obj.metadata, annotations={LAST_APPLIED: text})
    return msgspec.structs.replace(obj, metadata=meta)


def test_annotation_is_written_as_kubectl_writes_it() -> None:
    """Compact JSON, keys sorted, Go's HTML-safe escapes, a newline; the annotation itself
    left out and `metadata.annotations` kept (empty or not)."""
    text = with_last_applied(load(POD)).metadata.annotations[LAST_APPLIED]
    assert text == (
        '{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"note":'
        '"a\\u003cb \\u0026\\u0026 c\\u003ed \\u2028"},"name":"p","namespace":"default"},'
        '"spec":{"containers":[{"image":"img:1","name":"app"}]}}\n'
    )
    assert json.loads(text)["metadata"]["annotations"] == {"note": "a<b && c>d \u2028"}
    bare = load(POD.replace("  annotations:", "  labels:"))
    assert json.loads(encode_last_applied(applied_configuration(bare)))["metadata"] == {
        "annotations": {}, "labels": {"note": "a<b && c>d \u2028"}, "name": "p",
        "namespace": "default"}


def test_reapplying_an_annotated_manifest_writes_nothing() -> None:
    created = with_last_applied(load(POD))
    again = with_last_applied(created)  # an old annotation in the manifest is not nested
    assert again == created
    assert merge_applied(load(POD), created) is None


def test_status_and_others_fields_survive_and_are_never_applied() -> None:
    live = with_last_applied(load(POD))
    assert isinstance(live, Pod)
    live = msgspec.structs.replace(
        live,
        spec=msgspec.structs.replace(live.spec, node_name="node-1"),
        status=PodStatus(phase="Running"),
    )
    assert merge_applied(load(POD), live) is None
    with_status = load(POD + "status: {phase: Failed}\n")
    merged = merge_applied(with_status, live)
    assert isinstance(merged, Pod) and merged.status == PodStatus(phase="Running")
    assert merged.spec.node_name == "node-1"


def test_a_changed_manifest_updates_the_annotation_and_the_field() -> None:
    live = with_last_applied(load(POD))
    changed = load(POD.replace("img:1", "img:2"))
    merged = merge_applied(changed, live)
    assert isinstance(merged, Pod)
    assert merged.spec.containers[0].image == "img:2"
    assert merged.metadata.annotations[LAST_APPLIED] == encode_last_applied(
        applied_configuration(changed)
    )


def test_a_kubectl_written_annotation_is_read_in_kubedras_shape() -> None:
    """kubectl records the manifest as written, e.g. in resource.k8s.io/v1beta1's flat
    request shape: it is read through the same decoding as a manifest."""
    claim = load("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
""")
    kubectl_text = json.dumps({
        "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
        "metadata": {"annotations": {}, "name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu"}]}},
    })
    original = last_applied(annotated(claim, kubectl_text))
    assert original is not None
    assert original["apiVersion"] == "resource.k8s.io/v1"
    assert original["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    ]
    assert last_applied(claim) is None


@pytest.mark.parametrize(
    "text",
    ["{not json", "[1, 2]", '"a string"', '{"a":' * 5000 + "1" + "}" * 5000, '{"a": 1, "a": 2}'],
    ids=["syntax", "list", "string", "deep", "duplicate-key"],
)
def test_a_broken_annotation_is_one_clear_error(text: str) -> None:
    claim = load("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
""")
    assert isinstance(claim, ResourceClaim)
    with pytest.raises(ValidationError) as err:
        merge_applied(claim, annotated(claim, text))
    assert str(err.value) == (
        "ResourceClaim default/c: metadata.annotations[kubectl.kubernetes.io/last-applied-"
        "configuration]: Invalid value: not a JSON object: fix the annotation or remove it"
    )
