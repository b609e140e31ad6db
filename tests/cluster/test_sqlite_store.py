"""SqliteStore against a real SQLite file: CRUD, concurrency, finalizers, cascade, watch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from kubedra.api.codec import decode_object
from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.meta import ObjectMeta, OwnerReference
from kubedra.api.resource import ResourceClaim, ResourceClaimStatus, ResourceSlice
from kubedra.cluster import EventType, SqliteStore
from kubedra.errors import AlreadyExists, Conflict, NotFound
from tests.api.manifests import claim_doc, pod_doc, slice_doc


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def claim() -> ResourceClaim:
    obj = decode_object(claim_doc()).obj
    assert isinstance(obj, ResourceClaim)
    return obj


def with_meta(obj: ResourceClaim, **changes: object) -> ResourceClaim:
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, **changes))


def test_create_sets_identity_and_get_returns_it(store: SqliteStore) -> None:
    created = store.create(claim())
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.resource_version == str(store.resource_version())
    assert store.get(ResourceClaim, "train", "default") == created
    with pytest.raises(AlreadyExists):
        store.create(claim())
    with pytest.raises(NotFound):
        store.get(ResourceClaim, "nope")


def test_generate_name_and_default_namespace(store: SqliteStore) -> None:
    obj = with_meta(claim(), name=None, generate_name="trainer-gpus-", namespace=None)
    created = store.create(obj)
    assert created.name.startswith("trainer-gpus-") and len(created.name) == len("trainer-gpus-") + 5
    assert created.namespace == "default"


def test_stale_resource_version_is_a_conflict(store: SqliteStore) -> None:
    first = store.create(claim())
    second = store.update(with_meta(first, labels={"a": "1"}))
    assert int(second.metadata.resource_version or 0) > int(first.metadata.resource_version or 0)
    with pytest.raises(Conflict):
        store.update(with_meta(first, labels={"a": "2"}))
    assert store.get(ResourceClaim, "train").metadata.labels == {"a": "1"}


def test_update_keeps_status_and_update_status_keeps_spec(store: SqliteStore) -> None:
    created = store.create(claim())
    status = ResourceClaimStatus(reserved_for=())
    with_status = store.update_status(msgspec.structs.replace(created, status=status))
    assert with_status.status == status
    changed_spec = msgspec.structs.replace(with_status, status=None,
                                           metadata=msgspec.structs.replace(with_status.metadata,
                                                                            labels={"x": "y"}))
    updated = store.update(changed_spec)
    assert updated.status == status and updated.metadata.labels == {"x": "y"}
    assert updated.metadata.uid == created.metadata.uid


def test_finalizers_delay_deletion_until_removed(store: SqliteStore) -> None:
    created = store.create(with_meta(claim(), finalizers=("resource.kubernetes.io/delete-protection",)))
    marked = store.delete(ResourceClaim, "train")
    assert marked.metadata.deletion_timestamp
    assert store.get(ResourceClaim, "train").metadata.deletion_timestamp
    store.update(with_meta(store.get(ResourceClaim, "train"), finalizers=()))
    with pytest.raises(NotFound):
        store.get(ResourceClaim, "train")
    assert created.metadata.uid


def test_owner_reference_cascade(store: SqliteStore) -> None:
    pod = store.create(decode_object(pod_doc()).obj)
    owner = OwnerReference(api_version="v1", kind="Pod", name=pod.name, uid=pod.metadata.uid or "",
                           controller=True, block_owner_deletion=True)
    store.create(with_meta(claim(), name="trainer-gpus", owner_references=(owner,)))
    store.create(with_meta(claim(), name="unowned"))
    store.delete(Pod, pod.name)
    assert [c.name for c in store.list(ResourceClaim)] == ["unowned"]


def test_list_by_namespace_labels_and_fields(store: SqliteStore) -> None:
    store.create(with_meta(claim(), name="a", labels={"team": "ml", "tier": "gold"}))
    store.create(with_meta(claim(), name="b", labels={"team": "ml"}))
    store.create(Namespace(metadata=ObjectMeta(name="other")))
    store.create(with_meta(claim(), name="c", namespace="other", labels={"team": "web"}))
    assert [c.name for c in store.list(ResourceClaim)] == ["a", "b", "c"]
    assert [c.name for c in store.list(ResourceClaim, namespace="default")] == ["a", "b"]
    assert [c.name for c in store.list(ResourceClaim, label_selector="team=ml,!tier")] == ["b"]
    assert [c.name for c in store.list(ResourceClaim, label_selector="team in (web, x)")] == ["c"]
    assert [c.name for c in store.list(ResourceClaim, label_selector="team!=ml")] == ["c"]
    for n in (1, 2):
        doc = slice_doc()
        doc["metadata"]["name"] = f"s{n}"
        doc["spec"]["nodeName"] = f"node-{n}"
        store.create(decode_object(doc).obj)
    assert [s.name for s in store.list(ResourceSlice, field_selector="spec.nodeName=node-2")] == ["s2"]
    assert len(store.list(ResourceSlice, field_selector="spec.driver=gpu.nvidia.com")) == 2
    with pytest.raises(ValueError, match="not supported"):
        store.list(ResourceSlice, field_selector="spec.pool=x")


def test_changes_replay_added_modified_deleted(store: SqliteStore) -> None:
    start = store.resource_version()
    created = store.create(claim())
    store.update(with_meta(created, labels={"a": "b"}))
    store.delete(ResourceClaim, "train")
    store.create(Node(metadata=ObjectMeta(name="n1")))
    events = store.changes(start, kinds=[ResourceClaim])
    assert [e.type for e in events] == [EventType.ADDED, EventType.MODIFIED, EventType.DELETED]
    assert [e.resource_version for e in events] == sorted(e.resource_version for e in events)
    assert events[1].obj.metadata.labels == {"a": "b"}
    assert len(store.changes(start)) == 4


WRITER = textwrap.dedent("""
    import sys
    from kubedra.api.core import Node
    from kubedra.api.meta import ObjectMeta
    from kubedra.cluster import SqliteStore
    store = SqliteStore(sys.argv[1])
    for i in range(int(sys.argv[2])):
        store.create(Node(metadata=ObjectMeta(name=f"node-{i}", labels={"i": str(i)})))
""")


def test_watch_sees_writes_of_another_process(store: SqliteStore, tmp_path: Path) -> None:
    start = store.resource_version()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store.path), "20"])
    seen = []
    for event in store.watch(start, kinds=[Node], timeout=20):
        seen.append(event.obj.name)
        if len(seen) == 20:
            break
    proc.wait(timeout=30)
    assert seen == [f"node-{i}" for i in range(20)]


def test_a_killed_writer_leaves_nothing_half_written(store: SqliteStore) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store.path), "100000"])
    deadline = time.monotonic() + 30
    first = store.resource_version()  # a new store holds the system namespaces
    while store.resource_version() < first + 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    again = SqliteStore(store.path)
    nodes = again.list(Node)
    assert len(nodes) >= 50
    # every object decodes, and the change log has exactly one ADDED per stored node
    added = [e for e in again.changes(0, kinds=[Node]) if e.type is EventType.ADDED]
    assert sorted(e.obj.name for e in added) == sorted(n.name for n in nodes)
    assert all(n.metadata.labels["i"] == n.name.removeprefix("node-") for n in nodes)
    again.create(Node(metadata=ObjectMeta(name="after-crash")))


FINALIZERS = ("example.com/a", "example.com/b")


def owner_ref(obj: Pod | ResourceClaim) -> OwnerReference:
    return OwnerReference(api_version="v1", kind=obj.KIND, name=obj.name, uid=obj.metadata.uid or "",
                          controller=True, block_owner_deletion=True)


def test_deleting_with_finalizers_marks_the_object_until_the_last_one_is_removed(store: SqliteStore) -> None:
    created = store.create(with_meta(claim(), finalizers=FINALIZERS))
    start = store.resource_version()
    marked = store.delete(ResourceClaim, "train")
    assert marked.metadata.deletion_timestamp and marked.metadata.deletion_grace_period_seconds == 0
    assert created.metadata.generation is None  # claims do not track one (upstream)
    assert marked.metadata.generation is None  # only a generation > 0 is bumped
    assert store.delete(ResourceClaim, "train") == marked  # deleting again changes nothing
    assert store.resource_version() == start + 1
    store.update(with_meta(store.get(ResourceClaim, "train"), finalizers=FINALIZERS[:1]))
    assert store.get(ResourceClaim, "train").metadata.deletion_timestamp == marked.metadata.deletion_timestamp
    store.update(with_meta(store.get(ResourceClaim, "train"), finalizers=()))
    with pytest.raises(NotFound):
        store.get(ResourceClaim, "train")
    events = store.changes(start)
    assert [e.type for e in events] == [EventType.MODIFIED, EventType.MODIFIED, EventType.DELETED]
    assert events[-1].obj.metadata.finalizers == () and events[-1].obj.metadata.deletion_timestamp


def test_cascade_deletes_dependents_like_any_delete_so_finalizers_hold_them(store: SqliteStore) -> None:
    pod = store.create(decode_object(pod_doc()).obj)
    held = store.create(with_meta(claim(), name="held", owner_references=(owner_ref(pod),),
                                  finalizers=FINALIZERS[:1]))
    store.create(with_meta(claim(), name="free", owner_references=(owner_ref(pod),)))
    store.create(with_meta(claim(), name="grandchild", owner_references=(owner_ref(held),)))
    store.delete(Pod, pod.name)
    left = {c.name: c for c in store.list(ResourceClaim)}
    assert sorted(left) == ["grandchild", "held"]  # "free" went with its owner
    assert left["held"].metadata.deletion_timestamp and left["held"].metadata.deletion_grace_period_seconds == 0
    assert left["grandchild"].metadata.deletion_timestamp is None  # its owner still exists
    store.update(with_meta(left["held"], finalizers=()))
    assert store.list(ResourceClaim) == []  # the last finalizer gone: held, then its dependent


def test_a_dependent_with_another_owner_only_loses_the_dangling_reference(store: SqliteStore) -> None:
    first = store.create(decode_object(pod_doc()).obj)
    doc = pod_doc()
    doc["metadata"]["name"] = "second"
    second = store.create(decode_object(doc).obj)
    shared = with_meta(claim(), owner_references=(owner_ref(first), owner_ref(second)))
    store.create(shared)
    store.delete(Pod, first.name)
    kept = store.get(ResourceClaim, "train")
    assert [ref.uid for ref in kept.metadata.owner_references] == [second.metadata.uid]
    assert kept.metadata.deletion_timestamp is None
    store.delete(Pod, "second")
    assert store.list(ResourceClaim) == []


def test_bind_sets_node_and_condition_with_the_pods_uid_as_precondition(store: SqliteStore) -> None:
    pod = store.create(decode_object(pod_doc()).obj)
    start = store.resource_version()
    bound = store.bind(pod, "node-1")
    assert bound.spec.node_name == "node-1" and store.get(Pod, pod.name) == bound
    (condition,) = [c for c in (bound.status.conditions if bound.status else ()) if c.type == "PodScheduled"]
    assert condition.status == "True" and condition.last_transition_time
    assert [e.type for e in store.changes(start)] == [EventType.MODIFIED]  # one write
    with pytest.raises(Conflict, match='is already assigned to node "node-1"'):
        store.bind(pod, "node-2")
    store.delete(Pod, pod.name)
    again = store.create(decode_object(pod_doc()).obj)  # same name, new uid
    with pytest.raises(Conflict, match=f"Precondition failed: UID in precondition: {pod.metadata.uid}, UID in object meta: {again.metadata.uid}"):
        store.bind(pod, "node-1")
    assert store.get(Pod, pod.name).spec.node_name is None
    store.update(msgspec.structs.replace(again, metadata=msgspec.structs.replace(again.metadata, finalizers=FINALIZERS)))
    store.delete(Pod, pod.name)
    with pytest.raises(Conflict, match="is being deleted, cannot be assigned to a host"):
        store.bind(again, "node-1")
    with pytest.raises(NotFound):
        store.bind(msgspec.structs.replace(again, metadata=msgspec.structs.replace(again.metadata, name="gone")), "n")


def test_indexed_columns_follow_updates_that_change_them_or_not(store: SqliteStore) -> None:
    """An update leaves the node name and driver columns out when they stay the same (fewer
    index pages to commit); a listing by either still finds exactly the current objects."""
    pod = store.create(decode_object(pod_doc()).obj)
    assert isinstance(pod, Pod)
    sl = store.create(decode_object(slice_doc()).obj)
    assert isinstance(sl, ResourceSlice)

    def on_node(node: str) -> list[str]:
        return [
            p.metadata.name or "" for p in store.list(Pod, field_selector=f"spec.nodeName={node}")
        ]

    def of_driver(driver: str) -> list[str]:
        found = store.list(ResourceSlice, field_selector=f"spec.driver={driver}")
        return [s.metadata.name or "" for s in found]

    assert on_node("node-1") == []
    bound = store.bind(pod, "node-1")  # the node name changes: its column too
    assert on_node("node-1") == ["trainer"]
    labelled = with_meta(bound, labels={"a": "b"})  # type: ignore[arg-type]
    store.update(labelled)  # the node name stays: its column is left as it is
    assert on_node("node-1") == ["trainer"]
    assert store.get(Pod, "trainer").metadata.labels == {"a": "b"}
    driver = sl.spec.driver
    store.update(with_meta(sl, labels={"a": "b"}))  # type: ignore[arg-type]
    assert of_driver(driver) == [sl.metadata.name]
    assert of_driver("other.example.com") == []
