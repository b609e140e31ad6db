"""The embedded store's create as the API server's: system namespaces exist from the start,
objects go into existing namespaces only, and what the server sets is never taken from the
manifest (a resourceVersion is refused, a uid or timestamps are replaced)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from kubedra.api.codec import decode_object
from kubedra.api.core import Namespace
from kubedra.api.kinds import BY_KIND
from kubedra.api.meta import KubeObject, ObjectMeta
from kubedra.api.resource import ResourceClaim
from kubedra.cluster import SqliteStore
from kubedra.cluster.sqlite import SYSTEM_NAMESPACES
from kubedra.errors import NotFound, StoreError, ValidationError
from tests.api.manifests import claim_doc
from tests.cli.test_lint import kubedra

NAMESPACED = sorted(k for k, cls in BY_KIND.items() if cls.NAMESPACED)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def claim(**meta: object) -> ResourceClaim:
    obj = decode_object(claim_doc()).obj
    assert isinstance(obj, ResourceClaim)
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, **meta))


def namespaces(store: SqliteStore) -> list[str]:
    return [n.name for n in store.list(Namespace)]


def test_a_new_store_has_the_namespaces_the_api_server_starts_with(store: SqliteStore) -> None:
    assert namespaces(store) == sorted(SYSTEM_NAMESPACES)
    for ns in SYSTEM_NAMESPACES:
        assert store.create(claim(namespace=ns)).namespace == ns


def test_opening_again_writes_nothing_and_an_older_store_gets_them(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rv = SqliteStore(path).resource_version()
    assert SqliteStore(path).resource_version() == rv  # all there: not created again
    db = sqlite3.connect(path)
    db.execute("DELETE FROM objects WHERE kind='Namespace' AND name IN ('default', 'kube-public')")
    db.commit()
    db.close()
    assert namespaces(SqliteStore(path)) == sorted(SYSTEM_NAMESPACES)


def test_the_system_namespaces_do_not_go_through_a_subclass(tmp_path: Path) -> None:
    """Opening a store must not call its public writes: a subclass that wraps them (a test
    double, a store behind a flaky network) is not set up yet while the base opens."""

    class Counting(SqliteStore):
        def __init__(self, path: Path) -> None:
            super().__init__(path)
            self.creates = 0

        def create(self, obj: Any) -> Any:
            self.creates += 1
            return super().create(obj)

    store = Counting(tmp_path / "state.db")
    assert (store.creates, namespaces(store)) == (0, sorted(SYSTEM_NAMESPACES))


@pytest.mark.parametrize("kind", NAMESPACED)
def test_no_kind_goes_into_a_namespace_that_does_not_exist(store: SqliteStore, kind: str) -> None:
    obj: KubeObject = BY_KIND[kind](metadata=ObjectMeta(name="x", namespace="team-a"))
    rv = store.resource_version()
    with pytest.raises(NotFound, match=r'^namespaces "team-a" not found$'):
        store.create(obj)
    assert store.resource_version() == rv  # nothing written
    store.create(Namespace(metadata=ObjectMeta(name="team-a")))
    assert store.create(obj).namespace == "team-a"


def test_nothing_goes_into_a_namespace_being_deleted(store: SqliteStore) -> None:
    store.create(Namespace(metadata=ObjectMeta(name="old", finalizers=("example.com/hold",))))
    store.delete(Namespace, "old", "")  # marked: it waits for its finalizer
    with pytest.raises(StoreError, match="namespace old because it is being terminated"):
        store.create(claim(namespace="old"))


@pytest.mark.parametrize("kind", ["ResourceClaim", "ResourceClaimTemplate"])
def test_admin_access_only_in_a_namespace_labelled_for_it(store: SqliteStore, kind: str) -> None:
    doc = claim_doc()
    doc["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    if kind == "ResourceClaimTemplate":
        doc = {**doc, "kind": kind, "spec": {"spec": doc["spec"]}}
    with pytest.raises(ValidationError) as refused:
        store.create(decode_object(doc).obj)
    assert refused.value.path == "spec.devices.requests[0].adminAccess"  # upstream's, for both
    assert "requires the `resource.kubernetes.io/admin-access: true` label" in str(refused.value)
    labels = {"resource.kubernetes.io/admin-access": "true"}
    store.create(Namespace(metadata=ObjectMeta(name="monitoring", labels=labels)))
    doc["metadata"]["namespace"] = "monitoring"
    assert store.create(decode_object(doc).obj).namespace == "monitoring"


def test_a_pasted_resource_version_is_refused(store: SqliteStore) -> None:
    rv = store.resource_version()
    with pytest.raises(
        StoreError, match="resourceVersion should not be set on objects to be created"
    ):
        store.create(claim(resource_version="42"))
    assert store.resource_version() == rv
    with pytest.raises(NotFound):
        store.get(ResourceClaim, "train")


def test_a_pasted_uid_and_times_are_replaced(store: SqliteStore) -> None:
    pasted = claim(
        uid="11111111-1111-1111-1111-111111111111",
        creation_timestamp="2020-01-01T00:00:00Z",
        deletion_timestamp="2020-01-01T00:00:00Z",
        deletion_grace_period_seconds=3,
    )
    meta = store.create(pasted).metadata
    assert meta.uid and meta.uid != pasted.metadata.uid
    assert meta.creation_timestamp != "2020-01-01T00:00:00Z"
    assert meta.deletion_timestamp is None and meta.deletion_grace_period_seconds is None


def test_apply_into_a_missing_namespace_fails_cleanly(tmp_path: Path) -> None:
    doc = claim_doc()
    doc["metadata"]["namespace"] = "team-a"
    manifest = tmp_path / "claim.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    run = kubedra("--store", str(tmp_path / "state.db"), "apply", "-f", str(manifest))
    assert run.returncode == 1
    assert run.stderr == 'error: namespaces "team-a" not found\n'
