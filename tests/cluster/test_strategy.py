"""The embedded store does to created and updated objects what the API server's per-kind
strategies do: generation where upstream tracks one, the status a create starts with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Pod, PodStatus
from kubedra.api.meta import KubeObject
from kubedra.api.resource import DeviceClass, ResourceClaim, ResourceClaimStatus, ResourceSlice
from kubedra.cluster import SqliteStore
from tests.api.manifests import claim_doc, class_doc, pod_doc, slice_doc


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def load(doc: dict[str, Any]) -> KubeObject:
    return decode_object(doc).obj


def with_generation(obj: KubeObject, generation: int | None) -> KubeObject:
    meta = msgspec.structs.replace(obj.metadata, generation=generation)
    return msgspec.structs.replace(obj, metadata=meta)


@pytest.mark.parametrize(("doc", "tracked"), [
    (class_doc, True), (slice_doc, True), (pod_doc, True), (claim_doc, False),
])  # fmt: skip
def test_generation_starts_at_one_where_the_kind_tracks_it(
    store: SqliteStore, doc: Any, tracked: bool
) -> None:
    created = store.create(with_generation(load(doc()), 7))  # a client's value is ignored...
    assert created.metadata.generation == (1 if tracked else 7)  # ...by tracking kinds


def test_a_spec_change_bumps_the_generation_a_label_change_does_not(store: SqliteStore) -> None:
    created = store.create(load(class_doc()))
    assert isinstance(created, DeviceClass)
    labelled = store.update(msgspec.structs.replace(
        created, metadata=msgspec.structs.replace(created.metadata, labels={"tier": "a"})))
    assert labelled.metadata.generation == 1
    spec = msgspec.structs.replace(created.spec, selectors=())
    changed = store.update(with_generation(msgspec.structs.replace(labelled, spec=spec), 1000))
    assert changed.metadata.generation == 2  # the client's 1000 is not taken


def test_a_claims_status_starts_empty_whatever_the_manifest_says(store: SqliteStore) -> None:
    doc = claim_doc() | {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
    created = store.create(load(doc))
    assert isinstance(created, ResourceClaim)
    assert created.status == ResourceClaimStatus()


def test_a_pod_starts_pending(store: SqliteStore) -> None:
    created = store.create(load(pod_doc() | {"status": {"phase": "Running"}}))
    assert isinstance(created, Pod)
    assert created.status == PodStatus(phase="Pending")


def test_a_slice_generation_counts_spec_changes_only(store: SqliteStore) -> None:
    created = store.create(load(slice_doc()))
    assert isinstance(created, ResourceSlice)
    same = store.update(created)
    assert same.metadata.generation == 1
    assert created.spec.devices
    fewer = msgspec.structs.replace(created.spec, devices=())
    assert store.update(msgspec.structs.replace(created, spec=fewer)).metadata.generation == 2
