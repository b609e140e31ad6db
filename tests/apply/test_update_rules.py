"""The API server's update rules, on their own and enforced by the embedded store's update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod
from kubedra.api.meta import KubeObject
from kubedra.api.resource import ResourceClaimStatus
from kubedra.api.validation.update import UPDATABLE_POD_SPEC_FIELDS, validate_update
from kubedra.cluster import SqliteStore
from kubedra.errors import ValidationError
from tests.api.manifests import DELETE, claim_doc, mutate, pod_doc, slice_doc, template_doc

FORBIDDEN_POD_UPDATE = (
    "Forbidden: pod updates may not change fields other than " + ",".join(UPDATABLE_POD_SPEC_FIELDS)
)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def obj(doc: dict[str, Any]) -> KubeObject:
    return decode_object(doc).obj


def bound_pod() -> dict[str, Any]:
    return mutate(pod_doc(), "spec.nodeName", "node-1")


def problems(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in validate_update(obj(before), obj(after))]


def test_moving_a_bound_pod_is_refused_by_the_store_and_nothing_is_written(
    store: SqliteStore,
) -> None:
    created = store.create(obj(bound_pod()))
    moved = msgspec.structs.replace(created, spec=msgspec.structs.replace(created.spec, node_name="node-2"))
    with pytest.raises(ValidationError) as err:
        store.update(moved)
    assert str(err.value) == (
        f"Pod default/trainer: spec: {FORBIDDEN_POD_UPDATE}\n"
        '  spec.nodeName: "node-1" -> "node-2"'
    )
    assert err.value.path == "spec"
    assert store.get(type(created), "trainer") == created
    unbound = msgspec.structs.replace(created, spec=msgspec.structs.replace(created.spec, node_name=None))
    with pytest.raises(ValidationError, match=r'spec.nodeName: "node-1" -> \(unset\)'):
        store.update(unbound)


def test_binding_goes_through_bind_not_update(store: SqliteStore) -> None:
    """As on the API server: an update may not set nodeName; the binding subresource does."""
    created = store.create(obj(pod_doc()))
    bound = msgspec.structs.replace(created, spec=msgspec.structs.replace(created.spec, node_name="n"))
    with pytest.raises(ValidationError, match=r'spec.nodeName: \(unset\) -> "n"'):
        store.update(bound)
    assert store.get(Pod, created.name).spec.node_name is None
    assert store.bind(created, "n").spec.node_name == "n"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.containers.0.image", "pytorch:2"),
        ("spec.activeDeadlineSeconds", 60),
        ("spec.tolerations", [{"key": "gpu", "operator": "Exists"}]),
        ("metadata.labels", {"app": "x"}),
        ("metadata.finalizers", ["example.com/f"]),
    ],
)
def test_what_a_pod_update_may_change(path: str, value: Any) -> None:
    assert problems(bound_pod(), mutate(bound_pod(), path, value)) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("spec.priorityClassName", "high", 'spec.priorityClassName: (unset) -> "high"'),
        ("spec.containers.0.command", ["sh"],
         'spec.containers[0].command: ["python", "train.py"] -> ["sh"]'),
        ("spec.restartPolicy", "Never", 'spec.restartPolicy: (unset) -> "Never"'),
        ("spec.resourceClaims", DELETE, "spec.resourceClaims: "),
    ],
)
def test_any_other_pod_spec_change_is_forbidden_and_named(
    path: str, value: Any, expected: str
) -> None:
    """Modelled or not (command, restartPolicy are kept as unknown fields), the spec is fixed."""
    (problem,) = problems(bound_pod(), mutate(bound_pod(), path, value))
    head, *changes = problem.split("\n")
    assert head == f"spec: {FORBIDDEN_POD_UPDATE}"
    assert changes[0].strip().startswith(expected)


def test_containers_may_not_be_added_or_removed() -> None:
    doc = bound_pod()
    more = mutate(doc, "spec.containers", [*doc["spec"]["containers"], {"name": "b", "image": "i"}])
    assert problems(doc, more) == [
        "spec.containers: Forbidden: pod updates may not add or remove containers"
    ]


def test_tolerations_only_grow_and_deadlines_only_shrink() -> None:
    base = mutate(bound_pod(), "spec.tolerations", [{"key": "a", "operator": "Exists",
                                                     "tolerationSeconds": 5}])
    base = mutate(base, "spec.activeDeadlineSeconds", 100)
    seconds = mutate(base, "spec.tolerations.0.tolerationSeconds", 9)
    assert problems(base, seconds) == []
    assert problems(base, mutate(base, "spec.tolerations", [])) == [
        "spec.tolerations: Forbidden: existing toleration can not be modified except its "
        "tolerationSeconds"
    ]
    assert problems(base, mutate(base, "spec.activeDeadlineSeconds", 50)) == []
    assert problems(base, mutate(base, "spec.activeDeadlineSeconds", 200)) == [
        "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
    ]
    assert problems(base, mutate(base, "spec.activeDeadlineSeconds", DELETE)) == [
        "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive "
        "integer to nil value"
    ]


def test_scheduling_gates_can_only_be_removed() -> None:
    gated = mutate(pod_doc(), "spec.schedulingGates", [{"name": "a"}])
    assert problems(gated, mutate(gated, "spec.schedulingGates", DELETE)) == []
    assert problems(gated, mutate(gated, "spec.schedulingGates", [{"name": "a"}, {"name": "b"}])) == [
        "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new "
        "scheduling gate 'b'"
    ]


def test_a_negative_grace_period_may_become_one() -> None:
    doc = mutate(bound_pod(), "spec.terminationGracePeriodSeconds", -1)
    assert problems(doc, mutate(doc, "spec.terminationGracePeriodSeconds", 1)) == []
    assert len(problems(doc, mutate(doc, "spec.terminationGracePeriodSeconds", 2))) == 1


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        (claim_doc(), "spec.devices.requests.0.exactly.count"),
        (template_doc(), "spec.spec.devices.requests.0.exactly.count"),
    ],
)
def test_claim_and_template_specs_are_immutable(
    store: SqliteStore, doc: dict[str, Any], path: str
) -> None:
    created = store.create(obj(doc))
    changed = obj(mutate(doc, path, 3))
    changed = msgspec.structs.replace(changed, metadata=created.metadata)
    with pytest.raises(ValidationError) as err:
        store.update(changed)
    assert err.value.path == "spec"
    assert err.value.first.message.startswith("Invalid value: {")
    assert err.value.first.message.endswith("}: field is immutable")
    relabelled = obj(mutate(doc, "metadata.labels", {"team": "a"}))
    relabelled = msgspec.structs.replace(
        relabelled, metadata=msgspec.structs.replace(created.metadata, labels={"team": "a"})
    )
    assert store.update(relabelled).metadata.labels == {"team": "a"}


def test_claim_status_writes_are_not_update_checked(store: SqliteStore) -> None:
    created = store.create(obj(claim_doc()))
    status = ResourceClaimStatus()
    assert store.update_status(msgspec.structs.replace(created, status=status)).status == status


@pytest.mark.parametrize(
    ("path", "value"),
    [("spec.driver", "other.example.com"), ("spec.pool.name", "other"), ("spec.nodeName", "node-2")],
)
def test_a_slice_stays_in_its_pool_on_its_node(path: str, value: str) -> None:
    assert problems(slice_doc(), mutate(slice_doc(), path, value)) == [
        f'{path}: Invalid value: "{value}": field is immutable'
    ]
    more = mutate(slice_doc(), "spec.devices.0.name", "gpu-9")
    assert problems(slice_doc(), more) == []
