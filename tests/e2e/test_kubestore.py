"""KubeStore against upstream's kube-apiserver: the Store contract, errors, watch."""

from __future__ import annotations

import threading
import time

import msgspec
import pytest

from kubedra.api.core import Namespace, Node, Pod
from kubedra.api.loader import load_text
from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.reflector import Reflector
from kubedra.cluster.rest import Expired
from kubedra.cluster.store import EventType
from kubedra.devcluster.harness import DevCluster, plain_nodes
from kubedra.errors import AlreadyExists, Conflict, NotFound, ValidationError

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %s, namespace: default, labels: {team: %s}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu, count: 1}
"""


def claim(name: str, team: str = "a") -> ResourceClaim:
    obj = load_text(CLAIM % (name, team)).objects[0].obj
    assert isinstance(obj, ResourceClaim)
    return obj


def test_create_get_update_delete_round_trip(kube: KubeStore) -> None:
    created = kube.create(claim("rt-1"))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp
    # The server filled the v1 defaults; kubedra's model holds them.
    assert created.spec.devices.requests[0].exactly is not None
    assert created.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    got = kube.get(ResourceClaim, "rt-1")
    assert got == created
    labelled = msgspec.structs.replace(
        got, metadata=msgspec.structs.replace(got.metadata, labels={"team": "b"})
    )
    updated = kube.update(labelled)
    assert updated.metadata.labels == {"team": "b"}
    assert int(updated.metadata.resource_version or 0) > int(got.metadata.resource_version or 0)
    deleted = kube.delete(ResourceClaim, "rt-1")
    assert deleted.metadata.uid == created.metadata.uid
    with pytest.raises(NotFound, match=r'resourceclaims\.resource\.k8s\.io "rt-1" not found'):
        kube.get(ResourceClaim, "rt-1")


def test_errors_are_kubedras_with_the_servers_words(kube: KubeStore) -> None:
    first = kube.create(claim("err-1"))
    with pytest.raises(AlreadyExists, match="already exists"):
        kube.create(claim("err-1"))
    relabelled = msgspec.structs.replace(
        first, metadata=msgspec.structs.replace(first.metadata, labels={"team": "z"})
    )
    kube.update(relabelled)  # moves the resourceVersion on (a no-op update would not)
    with pytest.raises(Conflict, match="the object has been modified"):
        kube.update(relabelled)  # stale resourceVersion
    bad = load_text(CLAIM % ("err-2", "a")).objects[0].obj
    assert isinstance(bad, ResourceClaim)
    request = msgspec.structs.replace(bad.spec.devices.requests[0], name="Not_A_DNS_Label")
    bad = msgspec.structs.replace(
        bad,
        spec=msgspec.structs.replace(
            bad.spec, devices=msgspec.structs.replace(bad.spec.devices, requests=(request,))
        ),
    )
    with pytest.raises(ValidationError) as err:
        kube.create(bad)
    assert err.value.path == "spec.devices.requests[0].name"
    assert err.value.kind == "ResourceClaim" and err.value.name == "err-2"


def test_list_with_label_and_field_selectors(kube: KubeStore, cluster: DevCluster) -> None:
    for i, team in enumerate(["x", "y", "x"]):
        kube.create(claim(f"sel-{i}", team))
    names = [c.name for c in kube.list(ResourceClaim, "default", label_selector="team=x")]
    assert names == ["sel-0", "sel-2"]
    plain_nodes(kube, 2, prefix="sel-node")
    nodes = kube.list(Node, field_selector="metadata.name=sel-node-1")
    assert [n.name for n in nodes] == ["sel-node-1"]


def test_generate_name_status_and_finalizers(kube: KubeStore) -> None:
    template = claim("")
    meta = msgspec.structs.replace(
        template.metadata, name=None, generate_name="gen-", finalizers=("example.com/keep",)
    )
    created = kube.create(msgspec.structs.replace(template, metadata=meta))
    assert created.name.startswith("gen-") and len(created.name) == len("gen-") + 5
    # delete with a finalizer only marks the object
    marked = kube.delete(ResourceClaim, created.name)
    assert marked.metadata.deletion_timestamp
    assert kube.get(ResourceClaim, created.name).metadata.deletion_timestamp
    current = kube.get(ResourceClaim, created.name)
    cleared = msgspec.structs.replace(
        current, metadata=msgspec.structs.replace(current.metadata, finalizers=())
    )
    kube.update(cleared)
    with pytest.raises(NotFound):
        kube.get(ResourceClaim, created.name)


def test_pod_bind_goes_through_the_binding_subresource(kube: KubeStore) -> None:
    plain_nodes(kube, 1, prefix="bind-node")
    pod = (
        load_text(
            """
apiVersion: v1
kind: Pod
metadata: {name: bind-me, namespace: default}
spec:
  schedulerName: nobody
  containers: [{name: c, image: busybox}]
"""
        )
        .objects[0]
        .obj
    )
    assert isinstance(pod, Pod)
    created = kube.create(pod)
    kube.bind(created, "bind-node-0")
    assert kube.get(Pod, "bind-me").spec.node_name == "bind-node-0"
    # the uid precondition: a pod re-created under the same name is not bound by a stale bind
    kube.delete(Pod, "bind-me", grace_period_seconds=0)  # no kubelet to confirm it
    _wait_gone(kube, Pod, "bind-me")
    again = kube.create(pod)
    with pytest.raises((Conflict, NotFound, ValidationError)):
        kube.bind(created, "bind-node-0")
    assert not kube.get(Pod, again.name).spec.node_name


def test_cluster_scoped_kinds_and_taint_rules_at_v1(kube: KubeStore) -> None:
    rule = (
        load_text(
            """
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: drain-gpu-0}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: p, device: gpu-0}
  taint: {key: example.com/maintenance, effect: NoSchedule}
"""
        )
        .objects[0]
        .obj
    )
    assert isinstance(rule, DeviceTaintRule)
    created = kube.create(rule)
    assert created.api_version == "resource.k8s.io/v1"
    assert [r.name for r in kube.list(DeviceTaintRule)] == ["drain-gpu-0"]
    assert kube.get(Namespace, "default").name == "default"


def test_a_kubectl_change_reaches_a_kubedra_watcher(kube: KubeStore, cluster: DevCluster) -> None:
    since = kube.resource_version()
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        for event in kube.watch(since, [DeviceClass], timeout=20):
            seen.append((event.type.value, event.obj.name))
            if event.type is EventType.DELETED:
                done.set()
                return

    thread = threading.Thread(target=watch)
    thread.start()
    time.sleep(0.5)
    cluster.kubectl("create", "-f", "-", input=_class("watched"))
    cluster.kubectl("label", "deviceclass", "watched", "tier=gold")
    cluster.kubectl("delete", "deviceclass", "watched")
    assert done.wait(30), seen
    thread.join()
    assert seen == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")]


def test_changes_sees_its_own_writes(kube: KubeStore) -> None:
    since = kube.resource_version()
    made = kube.create(claim("mine-1"))
    events = kube.changes(since, [ResourceClaim])
    assert [(e.type, e.obj.name) for e in events] == [(EventType.ADDED, "mine-1")]
    assert events[0].resource_version == int(made.metadata.resource_version or 0)


def _class(name: str) -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: {name}}}
spec:
  selectors: [{{cel: {{expression: 'device.driver == "gpu.nvidia.com"'}}}}]
"""


def _wait_gone(kube: KubeStore, cls: type[Pod], name: str) -> None:
    for _ in range(100):
        try:
            kube.get(cls, name)
        except NotFound:
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} still there")


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory, control_plane: object) -> DevCluster:
    """A cluster whose API server serves ResourceSlice watches from etcd (watch cache off
    for that one resource), so compacting etcd makes an old watch fail with 410 at once."""
    cluster = DevCluster(
        tmp_path_factory.mktemp("uncached"),
        apiserver_flags=["--watch-cache-sizes=resourceslices.resource.k8s.io#0"],
    )
    cluster.up()
    yield cluster  # type: ignore[misc]
    cluster.down()


def test_a_watcher_behind_compaction_relists_and_loses_nothing(uncached: DevCluster) -> None:
    kube = uncached.store()
    for i in range(3):
        kube.create(_slice(f"keep-{i}"))
    reflector = Reflector(kube, ResourceSlice)
    first = [(e.type, e.obj.name) for e in reflector.sync()]
    assert first == [(EventType.ADDED, f"keep-{i}") for i in range(3)]
    behind = reflector.resource_version
    # While the reflector is not watching: a change, a deletion, a new slice...
    old = kube.get(ResourceSlice, "keep-0")
    kube.update(
        msgspec.structs.replace(
            old, metadata=msgspec.structs.replace(old.metadata, labels={"changed": "yes"})
        )
    )
    kube.delete(ResourceSlice, "keep-1")
    kube.create(_slice("new-0"))
    uncached.compact_etcd()
    with pytest.raises(Expired):
        next(iter(kube.watch(behind, [ResourceSlice], timeout=5)))
    # ... all of which the reflector reports after its watch expires.
    stop = threading.Event()
    got = []
    for event in reflector.events(stop, idle=0.5):
        got.append((event.type, event.obj.name))
        if len(got) == 3:
            stop.set()
    assert reflector.relists == 1
    assert sorted(got) == sorted(
        [(EventType.MODIFIED, "keep-0"), (EventType.DELETED, "keep-1"), (EventType.ADDED, "new-0")]
    )
    assert sorted(reflector.items) == [("", "keep-0"), ("", "keep-2"), ("", "new-0")]
    assert reflector.items[("", "keep-0")].metadata.labels == {"changed": "yes"}


def _slice(name: str) -> ResourceSlice:
    obj = (
        load_text(
            f"""
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {name}}}
spec:
  driver: gpu.example.com
  pool: {{name: {name}, generation: 1, resourceSliceCount: 1}}
  allNodes: true
  devices: [{{name: d0}}]
"""
        )
        .objects[0]
        .obj
    )
    assert isinstance(obj, ResourceSlice)
    return msgspec.structs.replace(obj, metadata=ObjectMeta(name=name))
