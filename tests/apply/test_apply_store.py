"""`apply_object` on the embedded store: created / unchanged / configured, nothing of other
writers lost, and a writer racing between apply's read and its write keeps its change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.apply import LAST_APPLIED
from kubedra.api.codec import decode_object
from kubedra.api.core import Pod, PodCondition, PodStatus
from kubedra.api.loader import load
from kubedra.api.meta import KubeObject
from kubedra.cluster import SqliteStore
from kubedra.cluster.apply import ATTEMPTS, Verb, apply_object
from kubedra.errors import Conflict, NotFound
from tests.api.manifests import claim_doc, mutate, pod_doc
from tests.conftest import REPO


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def obj(doc: dict[str, Any]) -> KubeObject:
    return decode_object(doc).obj


def unnamespaced(doc: dict[str, Any]) -> dict[str, Any]:
    doc = dict(doc, metadata=dict(doc["metadata"]))
    doc["metadata"].pop("namespace")
    return doc


def relabel(o: KubeObject, **labels: str) -> KubeObject:
    meta = msgspec.structs.replace(o.metadata, labels={**o.metadata.labels, **labels})
    return msgspec.structs.replace(o, metadata=meta)


def test_created_then_unchanged_writes_nothing(store: SqliteStore) -> None:
    manifest = obj(unnamespaced(claim_doc()))
    assert apply_object(store, manifest).verb is Verb.CREATED
    created = store.get(type(manifest), "train", "default")
    assert created.metadata.annotations[LAST_APPLIED].startswith('{"apiVersion":"resource.k8s.io/v1"')
    assert '"namespace":"default"' in created.metadata.annotations[LAST_APPLIED]
    rv = store.resource_version()
    assert apply_object(store, manifest).verb is Verb.UNCHANGED
    assert store.resource_version() == rv  # no write, not even an empty one
    assert store.get(type(manifest), "train", "default") == created


def test_others_fields_are_kept_and_dropped_fields_removed(store: SqliteStore) -> None:
    first = mutate(pod_doc(), "metadata.labels", {"app": "train", "tier": "gold"})
    apply_object(store, obj(first))
    live = store.get(Pod, "trainer")
    # Other writers: a controller's label and finalizer, the scheduler's bind and status.
    others = msgspec.structs.replace(
        live,
        metadata=msgspec.structs.replace(
            live.metadata, labels={**live.metadata.labels, "ctl": "x"}, finalizers=("ctl/f",)
        ),
    )
    store.bind(store.update(others), "node-1")
    status = PodStatus(phase="Pending", conditions=(PodCondition(type="PodScheduled", status="True"),))
    store.update_status(msgspec.structs.replace(store.get(Pod, "trainer"), status=status))
    second = mutate(first, "metadata.labels", {"app": "serve"})  # tier dropped, app changed
    assert apply_object(store, obj(second)).verb is Verb.CONFIGURED
    after = store.get(Pod, "trainer")
    assert after.metadata.labels == {"app": "serve", "ctl": "x"}
    assert after.metadata.finalizers == ("ctl/f",)
    assert after.spec.node_name == "node-1"
    assert after.status == status
    assert apply_object(store, obj(second)).verb is Verb.UNCHANGED


def test_an_object_not_created_by_apply_is_adopted(store: SqliteStore) -> None:
    store.create(obj(mutate(pod_doc(), "spec.priorityClassName", "high")))
    applied = apply_object(store, obj(mutate(pod_doc(), "metadata.labels", {"a": "b"})))
    assert applied.adopted and applied.verb is Verb.CONFIGURED
    after = store.get(Pod, "trainer")
    assert after.spec.priority_class_name == "high"  # never applied: not apply's to remove
    assert after.metadata.labels == {"a": "b"} and LAST_APPLIED in after.metadata.annotations
    assert not apply_object(store, obj(mutate(pod_doc(), "metadata.labels", {"a": "b"}))).adopted


class RacingStore:
    """The real store, with another writer that gets in between apply's read and its
    update (`races` times): what the API server sees when two clients write one object."""

    def __init__(self, inner: SqliteStore, races: int) -> None:
        self.inner, self.races, self.updates = inner, races, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def update(self, o: KubeObject) -> KubeObject:
        self.updates += 1
        if self.races:
            self.races -= 1
            fresh = self.inner.get(type(o), o.name, o.namespace)
            self.inner.update(relabel(fresh, **{f"racer-{self.races}": "x"}))
        return self.inner.update(o)


def test_a_racing_writer_keeps_its_change(store: SqliteStore) -> None:
    apply_object(store, obj(pod_doc()))
    racing = RacingStore(store, races=2)
    wanted = obj(mutate(pod_doc(), "metadata.labels", {"mine": "y"}))
    assert apply_object(racing, wanted).verb is Verb.CONFIGURED  # type: ignore[arg-type]
    assert racing.updates == 3  # two conflicts, re-read and re-merged each time
    assert store.get(Pod, "trainer").metadata.labels == {"mine": "y", "racer-1": "x", "racer-0": "x"}


def test_a_writer_racing_every_time_ends_in_conflict_not_in_a_lost_write(store: SqliteStore) -> None:
    apply_object(store, obj(pod_doc()))
    racing = RacingStore(store, races=ATTEMPTS)
    with pytest.raises(Conflict, match="still changing after 5 attempts"):
        apply_object(racing, obj(mutate(pod_doc(), "metadata.labels", {"mine": "y"})))  # type: ignore[arg-type]
    assert "mine" not in store.get(Pod, "trainer").metadata.labels


class CreatingRacer:
    """Another client creates the object between apply's read (NotFound) and its create."""

    def __init__(self, inner: SqliteStore, other: KubeObject) -> None:
        self.inner, self.other = inner, other

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get(self, cls: type[KubeObject], name: str, namespace: str) -> KubeObject:
        if self.other is not None:
            self.inner.create(self.other)
            self.other = None
            raise NotFound(name)
        return self.inner.get(cls, name, namespace)


def test_an_object_created_between_read_and_create_is_merged_into(store: SqliteStore) -> None:
    theirs = obj(mutate(pod_doc(), "metadata.labels", {"theirs": "x"}))
    racing = CreatingRacer(store, theirs)
    applied = apply_object(racing, obj(mutate(pod_doc(), "metadata.annotations", {"mine": "y"})))  # type: ignore[arg-type]
    assert applied.verb is Verb.CONFIGURED and applied.adopted
    after = store.get(Pod, "trainer")
    assert after.metadata.labels == {"theirs": "x"}
    assert after.metadata.annotations["mine"] == "y"


def test_a_manifest_pinning_a_stale_resource_version_is_a_conflict(store: SqliteStore) -> None:
    apply_object(store, obj(pod_doc()))
    exported = store.get(Pod, "trainer")  # as `get -o yaml` would write it
    store.update(relabel(exported, ctl="x"))
    with pytest.raises(Conflict, match="the object has been modified"):
        apply_object(store, relabel(exported, mine="y"))
    fresh = store.get(Pod, "trainer")
    assert apply_object(store, relabel(fresh, mine="y")).verb is Verb.CONFIGURED


@pytest.mark.parametrize("example", sorted(p.name for p in (REPO / "examples").iterdir() if p.is_dir()))
def test_reapplying_any_example_keeps_every_other_writers_field(store: SqliteStore, example: str) -> None:
    """The class of the seed bug: for every example, fields written after apply by others
    (labels, annotations, finalizers, status, a pod's node) survive a re-apply, which then
    reports `unchanged` and writes nothing."""
    manifests = [loaded.obj for loaded in load([str(REPO / "examples" / example)])]
    for manifest in manifests:
        assert apply_object(store, manifest).verb is Verb.CREATED
    for manifest in manifests:
        live = store.get(type(manifest), manifest.name, manifest.namespace or "default")
        meta = msgspec.structs.replace(
            live.metadata,
            labels={**live.metadata.labels, "other/label": "x"},
            annotations={**live.metadata.annotations, "other/note": "y"},
            finalizers=(*live.metadata.finalizers, "other/finalizer"),
        )
        written = store.update(msgspec.structs.replace(live, metadata=meta))
        if isinstance(written, Pod):
            written = store.bind(written, "n")
        if hasattr(written, "status"):
            store.update_status(msgspec.structs.replace(written, status=_some_status(written)))
    before = {(m.KIND, m.name): store.get(type(m), m.name, m.namespace or "default") for m in manifests}
    rv = store.resource_version()
    for manifest in manifests:
        assert apply_object(store, manifest).verb is Verb.UNCHANGED, manifest.name
    assert store.resource_version() == rv
    after = {(m.KIND, m.name): store.get(type(m), m.name, m.namespace or "default") for m in manifests}
    assert after == before


STATUS_BY_KIND = {
    "Pod": {"phase": "Running"},
    "ResourceClaim": {"reservedFor": [{"resource": "pods", "name": "other", "uid": "u-1"}]},
    "PodGroup": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True",
                                 "reason": "Scheduled", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
}


def _some_status(o: KubeObject) -> Any:
    """A non-empty status of the object's kind, as its controller would write it."""
    status_type = {f.name: f.type for f in msgspec.structs.fields(type(o))}["status"]
    model = next(t for t in status_type.__args__ if t is not type(None))
    status = msgspec.convert(STATUS_BY_KIND[o.KIND], model)
    assert status != model()
    return status



PASTED = sorted((REPO / "tests" / "apply" / "pasted").glob("*.yaml"))


@pytest.mark.parametrize("path", PASTED, ids=[p.name for p in PASTED])
def test_objects_pasted_from_kubectl_get_are_created_on_their_first_apply(
    store: SqliteStore, path: Path
) -> None:
    """kubectl's create path clears a pasted resourceVersion (the server refuses one on
    create); uid, timestamps and status are the store's own, as the API server makes them."""
    manifests = [loaded.obj for loaded in load([str(path)])]
    assert all(m.metadata.resource_version and m.metadata.uid for m in manifests)
    for manifest in manifests:
        applied = apply_object(store, manifest)
        assert applied.verb is Verb.CREATED and applied.obj is not None
        meta = applied.obj.metadata
        assert meta.resource_version not in (None, manifest.metadata.resource_version)
        assert meta.uid != manifest.metadata.uid
        assert meta.creation_timestamp != manifest.metadata.creation_timestamp
        assert getattr(applied.obj, "status", None) in (None, type(getattr(applied.obj, "status", None))())
        # The annotation records the manifest as given, as kubectl's does.
        assert f'"resourceVersion":"{manifest.metadata.resource_version}"' in meta.annotations[LAST_APPLIED]


def test_a_pasted_resource_version_pins_an_update_as_kubectl_sends_it(store: SqliteStore) -> None:
    """Once the object exists, the pasted resourceVersion is a precondition: kubectl's patch
    carries it and the server answers Conflict; apply does not retry a pinned write."""
    manifest = load([str(REPO / "tests/apply/pasted/intel-gpu.yaml")])[0].obj
    apply_object(store, manifest)
    with pytest.raises(Conflict, match=r"names resourceVersion 5521 .* remove metadata\.resourceVersion"):
        apply_object(store, relabel(manifest, tier="gold"))
    assert "tier" not in store.get(type(manifest), manifest.name).metadata.labels
