"""The embedded store's shortcuts on its hot path (issue 39): what it wrote is not decoded
again, stored bytes are the same without the detour through dicts, rows are updated in
place, timestamps are formatted once a second. Each must be invisible but for speed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest

from kubedra.api.codec import decode_object, to_dict, to_json
from kubedra.api.core import Node, Pod
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.cluster import SqliteStore
from kubedra.cluster.sqlite import now_rfc3339
from tests.api.manifests import claim_doc, pod_doc, slice_doc


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def node(name: str) -> Node:
    return Node(metadata=ObjectMeta(name=name, labels={"zone": "a"}))


def test_to_json_is_the_json_of_to_dict() -> None:
    """Quantities, nested models and kept unknown fields: byte for byte the old encoding."""
    with_unknown = claim_doc()
    with_unknown["spec"]["devices"]["someFutureField"] = {"a": [1, 2.5, "x"]}
    docs = [claim_doc(), pod_doc(), slice_doc(), with_unknown]
    objects = [decode_object(d).obj for d in docs]
    assert objects[-1].unknown_fields  # the case the shortcut leaves to to_dict
    for obj in objects:
        assert to_json(obj) == msgspec.json.encode(to_dict(obj))


def test_what_the_store_wrote_comes_back_without_decoding(store: SqliteStore) -> None:
    created = store.create(node("n1"))
    (event,) = [e for e in store.changes(0, [Node]) if e.obj.name == "n1"]
    assert event.obj is created  # remembered, not decoded again
    assert store.get(Node, "n1") is created
    # and a decoding of the row is the same object
    other = SqliteStore(store.path)
    assert other.get(Node, "n1") == created and other.get(Node, "n1") is not created


def test_a_rolled_back_write_is_forgotten(store: SqliteStore) -> None:
    """A transaction that rolls back gives its resourceVersions back: another writer takes
    them, and the store must read that writer's objects, not its own lost ones."""
    since = store.resource_version()
    with pytest.raises(RuntimeError), store.transaction():
        lost = store.create(node("lost"))
        raise RuntimeError("abandon")
    other = SqliteStore(store.path)
    kept = other.create(node("kept"))
    assert kept.metadata.resource_version == lost.metadata.resource_version  # the same number
    (event,) = store.changes(since, [Node])
    assert event.obj.name == "kept"
    assert store.get(Node, "kept") == kept
    assert [n.name for n in store.list(Node)] == ["kept"]


def test_updates_keep_the_row_in_place(store: SqliteStore) -> None:
    """An update rewrites the object's row where it is (its index entries stay unless
    their columns change); the object reads back as written, bound pods by node."""
    pod = decode_object(pod_doc()).obj
    assert isinstance(pod, Pod)
    created = store.create(pod)
    store.create(node("n1"))

    def rowid() -> int:
        (row,) = store._db.execute("SELECT rowid FROM objects WHERE kind='Pod'").fetchall()
        return int(row[0])

    before = rowid()
    bound = store.bind(created, "n1")
    assert rowid() == before
    assert store.get(Pod, created.name).spec.node_name == "n1"
    assert store.list(Pod, field_selector="spec.nodeName=n1") == [bound]


def test_claims_and_slices_read_back_as_written(store: SqliteStore) -> None:
    claim = store.create(decode_object(claim_doc()).obj)
    assert isinstance(claim, ResourceClaim)
    updated = store.update(
        msgspec.structs.replace(
            claim, metadata=msgspec.structs.replace(claim.metadata, labels={"x": "y"})
        )
    )
    fresh = SqliteStore(store.path)
    assert fresh.get(ResourceClaim, claim.name) == updated
    slice_ = store.create(decode_object(slice_doc()).obj)
    assert isinstance(slice_, ResourceSlice)
    assert fresh.get(ResourceSlice, slice_.name) == slice_


def test_timestamps_are_the_same_text_as_strftime() -> None:
    start = datetime(2026, 12, 6, 23, 59, 58, 900_000, tzinfo=UTC)
    for step in range(0, 3_000_000, 150_000):  # across seconds, a minute, a day
        now = start + timedelta(microseconds=step)
        assert now_rfc3339(now) == now.strftime("%Y-%m-%dT%H:%M:%SZ")
    elsewhere = datetime(2026, 12, 6, 10, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert now_rfc3339(elsewhere) == "2026-12-06T10:00:00Z"  # as before: its own fields
    assert now_rfc3339(datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)) == "2026-12-06T10:00:00Z"
