"""A damaged checkpoint never stops the driver: it starts, says so once (log line + metric),
keeps the file for inspection and rebuilds the prepared claims from the CDI directory; a
normal start repairs what a crash left (temporaries, a spec without entry, an entry without
spec). Everything goes through the real agent: DeviceState + gRPC over unix sockets."""

from __future__ import annotations

import json
import random

import pytest

from kubedra.api.resource import ResourceClaim
from kubedra.driver.checkpoint import Checkpoint, checksum
from kubedra.driver.claimfiles import PREPARED_ANNOTATION
from kubedra.driver.kubelet import KubeletClient

from .conftest import GPU, NODE, make_claim
from .driverproc import disk_problems

MPS = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
}
UNUSABLE = "checkpoint unusable: prepared claims rebuilt from the CDI directory"
RECONCILED = "checkpoint and CDI directory reconciled"


def _devices(answer, refs):
    return {
        uid: [(d.device_name, list(d.cdi_device_ids)) for d in answer.claims[uid].devices]
        for _, uid, _ in refs
    }


def _prepare(agent, refs):
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()
        answer = kubelet.prepare(refs)
    assert all(answer.claims[uid].error == "" for _, uid, _ in refs), answer
    return _devices(answer, refs)


def _unprepare(agent, refs):
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()
        answer = kubelet.unprepare(refs)
    assert all(answer.claims[uid].error == "" for _, uid, _ in refs), answer


@pytest.fixture
def prepared(store, agent):
    """Claims a (one GPU) and b (MPS, with host dirs) prepared, the agent stopped."""
    claims = [
        make_claim(store, "a", [("gpu", NODE, "gpu-0")]),
        make_claim(store, "b", [("gpu", NODE, "gpu-1")], config=[((), MPS)]),
    ]
    refs = [("default", c.metadata.uid, c.metadata.name) for c in claims]
    devices = _prepare(agent, refs)
    agent.stop()
    return refs, devices


def _paths(agent):
    plugin = agent.paths.plugin_dir
    return plugin / "checkpoint.json", plugin / "checkpoint.damaged.json"


def _records(driver_log, message):
    return [r for r in driver_log if r.getMessage() == message]


def _fields(record):
    return record.kubedra_fields


def _resealed(data: bytes, edit) -> bytes:
    """A checkpoint whose payload `edit` changed, with a checksum that matches again."""
    envelope = json.loads(data)
    payload = edit(envelope["data"])
    raw = json.dumps(payload).encode()
    return b'{"kind":"KubedraDriverCheckpoint","version":2,"checksum":"%s","data":%s}' % (
        checksum(raw).encode(),
        raw,
    )


def _foreign(data: bytes) -> bytes:
    return _resealed(data, lambda p: {**p, "driver": "tpu.google.com"})


def _hostile_entry(data: bytes) -> bytes:
    def edit(payload):
        (_, entry), *_ = payload["preparedClaims"].items()
        payload["preparedClaims"]["../../victim"] = {**entry, "uid": "../../victim"}
        return payload

    return _resealed(data, edit)


DAMAGE = {
    "truncated": ("unreadable", lambda d: d[: len(d) // 2]),
    "empty": ("unreadable", lambda d: b""),
    "garbage": ("unreadable", lambda d: random.Random(7).randbytes(4096)),
    "not-json-object": ("unreadable", lambda d: b"[1, 2, 3]\n"),
    "wrong-checksum": ("checksum", lambda d: d.replace(b'"gpu-0"', b'"gpu-7"', 1)),
    "wrong-version": ("version", lambda d: d.replace(b'"version":2', b'"version":99', 1)),
    "version-not-a-number": ("version", lambda d: d.replace(b'"version":2', b'"version":"2"', 1)),
    "other-driver": ("foreign", _foreign),
    "hostile-entry-valid-checksum": ("invalid", _hostile_entry),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_checkpoint_is_reported_kept_and_rebuilt_from_cdi_specs(
    case, store, agent, prepared, driver_log, short_dir
):
    refs, devices = prepared
    victim = short_dir / "victim.json"
    victim.write_text("{}")
    path, damaged = _paths(agent)
    reason, damage = DAMAGE[case]
    bad = damage(path.read_bytes())
    assert b'"gpu-0"' in path.read_bytes() and bad != path.read_bytes()
    path.write_bytes(bad)

    agent.start()  # does not raise

    (record,) = _records(driver_log, UNUSABLE)
    fields = _fields(record)
    assert record.levelname == "ERROR" and fields["checkpoint"] == str(path)
    assert fields["problem"].startswith("checkpoint.json ") and fields["kept_as"] == str(damaged)
    assert fields["recovered"] == 2 and fields["entries_from_last_good"] == 0
    assert agent.metrics.value("kubedra_driver_checkpoint_recoveries_total", reason=reason) == 1
    assert damaged.read_bytes() == bad
    assert victim.exists()
    assert sorted(agent.state.prepared) == sorted(uid for _, uid, _ in refs)
    assert _prepare(agent, refs) == devices  # a repeated prepare returns the same devices
    _, problems = disk_problems(agent.paths.plugin_dir, agent.cdi, NODE)
    assert problems == []
    agent.stop()
    agent.start()  # the rebuilt checkpoint is a good one: the next start is a normal start
    assert len(_records(driver_log, UNUSABLE)) == 1


def test_problem_lines_name_what_is_wrong(store, agent, prepared, driver_log):
    path, _ = _paths(agent)
    original = path.read_bytes()
    expected = {
        "truncated": "is truncated or not JSON",
        "wrong-checksum": "fails its checksum (recorded 'sha256:",
        "wrong-version": "has version 99; this driver reads versions 1 and 2",
        "other-driver": "belongs to driver 'tpu.google.com' on node 'node-1', not "
        "'gpu.nvidia.com' on 'node-1'",
        "hostile-entry-valid-checksum": "has an invalid entry: claim uid '../../victim': must be "
        "a lower-case RFC 4122 UUID",
    }
    for case, text in expected.items():
        path.write_bytes(DAMAGE[case][1](original))
        agent.start()
        assert text in _fields(_records(driver_log, UNUSABLE)[-1])["problem"], case
        agent.stop()
        original = path.read_bytes()


def test_stale_checkpoint_yields_to_newer_cdi_specs(store, agent, prepared, driver_log):
    """A valid checkpoint older than the CDI directory (an old copy put back): the claims
    prepared since are kept, the ones unprepared since are not resurrected."""
    (a, b), devices = prepared
    path, _ = _paths(agent)
    old = path.read_bytes()
    agent.start()
    c = make_claim(store, "c", [("gpu", NODE, "gpu-2")])
    c_ref = ("default", c.metadata.uid, "c")
    devices_c = _prepare(agent, [c_ref])
    _unprepare(agent, [a])
    agent.stop()
    path.write_bytes(old)  # generation 2, while c's spec is generation 3

    agent.start()

    (record,) = _records(driver_log, UNUSABLE)
    assert "older than a CDI spec on disk" in _fields(record)["problem"]
    assert _fields(record)["not_prepared"] == [a[1]]
    assert agent.metrics.value("kubedra_driver_checkpoint_recoveries_total", reason="stale") == 1
    assert sorted(agent.state.prepared) == sorted([b[1], c_ref[1]])
    assert _prepare(agent, [b, c_ref]) == {b[1]: devices[b[1]], **devices_c}
    assert disk_problems(agent.paths.plugin_dir, agent.cdi, NODE)[1] == []


def test_missing_checkpoint_with_specs_on_disk_is_rebuilt(store, agent, prepared, driver_log):
    refs, devices = prepared
    path, _ = _paths(agent)
    path.unlink()
    (path.parent / "checkpoint.last-good.json").unlink()
    agent.start()
    (record,) = _records(driver_log, UNUSABLE)
    assert _fields(record)["problem"] == (
        "checkpoint.json is missing while 2 CDI spec(s) of this driver exist"
    )
    assert _fields(record)["kept_as"] is None
    assert _prepare(agent, refs) == devices


def test_spec_without_embedded_entry_is_filled_from_the_last_good_copy(
    store, agent, prepared, driver_log
):
    """A spec written by kubedra 0.1 (no embedded entry): the last-good copy has the claim."""
    (a, b), devices = prepared
    spec_a = agent.cdi / f"k8s.gpu.nvidia.com-claim_{a[1]}.json"
    spec = json.loads(spec_a.read_text())
    del spec["annotations"][PREPARED_ANNOTATION]
    spec_a.write_text(json.dumps(spec))
    last_good = Checkpoint(agent.paths.plugin_dir, GPU, NODE).read_last_good()
    assert last_good is not None and a[1] in last_good.claims and b[1] not in last_good.claims
    _paths(agent)[0].write_bytes(b"\0" * 100)

    agent.start()

    fields = _fields(_records(driver_log, UNUSABLE)[0])
    assert fields["recovered"] == 2 and fields["entries_from_last_good"] == 1
    assert _prepare(agent, [a, b]) == devices
    assert disk_problems(agent.paths.plugin_dir, agent.cdi, NODE)[1] == []


def test_unrecoverable_spec_and_claims_gone_from_the_api_are_dropped(
    store, agent, prepared, driver_log
):
    (a, b), _ = prepared
    for name in ("checkpoint.json", "checkpoint.last-good.json"):
        (agent.paths.plugin_dir / name).write_bytes(b"garbage")
    spec_a = agent.cdi / f"k8s.gpu.nvidia.com-claim_{a[1]}.json"
    spec_a.write_text('{"cdiVersion": "0.6.0"}')  # nothing says which devices a held
    store.delete(ResourceClaim, "b")  # b's spec is fine, but the claim no longer exists

    agent.start()

    fields = _fields(_records(driver_log, UNUSABLE)[0])
    assert fields["unrecoverable_specs"] == [a[1]] and fields["stale"] == [b[1]]
    assert fields["recovered"] == 0 and agent.state.prepared == {}
    assert not spec_a.exists() and list(agent.cdi.iterdir()) == []
    assert not (agent.paths.plugin_dir / "mps" / b[1]).exists()
    assert disk_problems(agent.paths.plugin_dir, agent.cdi, NODE)[1] == []


def test_legacy_checkpoint_is_read_and_upgraded(store, agent, prepared, driver_log):
    """kubedra 0.1 wrote version 1 (no checksum, no generation) and specs without entries."""
    refs, devices = prepared
    path, _ = _paths(agent)
    claims = json.loads(path.read_bytes())["data"]["preparedClaims"]
    for entry in claims.values():
        del entry["cdiSpec"]["annotations"][PREPARED_ANNOTATION]
        spec = agent.cdi / f"k8s.gpu.nvidia.com-claim_{entry['uid']}.json"
        spec.write_text(json.dumps(entry["cdiSpec"], indent=2) + "\n")
    legacy = {"kind": "KubedraDriverCheckpoint", "version": 1, "driver": GPU, "node": NODE}
    path.write_text(json.dumps({**legacy, "preparedClaims": claims}, indent=2))

    agent.start()

    assert _records(driver_log, UNUSABLE) == [] and _records(driver_log, RECONCILED) == []
    assert _prepare(agent, refs) == devices
    c = make_claim(store, "c", [("gpu", NODE, "gpu-2")])
    _prepare(agent, [("default", c.metadata.uid, "c")])
    assert json.loads(path.read_bytes())["version"] == 2


def test_normal_start_repairs_what_a_crash_left(store, agent, prepared, driver_log):
    """The moments a kill -9 can hit, made by hand: temporaries of a write cut short, an entry
    committed whose spec was not yet written, a spec whose entry was already removed, a spec
    cut short. Another producer's files in the shared CDI directory are left alone."""
    (a, b), devices = prepared
    plugin, cdi = agent.paths.plugin_dir, agent.cdi
    spec_a, spec_b = (cdi / f"k8s.gpu.nvidia.com-claim_{r[1]}.json" for r in (a, b))
    orphan_spec, host_b = spec_b.read_bytes(), plugin / "mps" / b[1]
    agent.start()
    _unprepare(agent, [b])
    agent.stop()
    spec_b.write_bytes(orphan_spec)  # unprepare killed after its commit
    (host_b / "pipe").mkdir(parents=True)
    spec_a.unlink()  # prepare killed after its commit
    temporaries = [
        plugin / ".checkpoint.json.k3j4.tmp",
        plugin / ".checkpoint.last-good.json.link.tmp",
        cdi / f".k8s.gpu.nvidia.com-claim_{a[1]}.json.x81.tmp",
    ]
    for tmp in temporaries:
        tmp.write_text("{")
    others = [cdi / "spec.1234.tmp", cdi / "nvidia.yaml"]  # the NVIDIA toolkit's, say
    for other in others:
        other.write_text("x")

    agent.start()

    (record,) = _records(driver_log, RECONCILED)
    assert _fields(record) == {
        "temporaries_removed": 3,
        "orphan_specs_removed": 1,
        "specs_written": 1,
        "host_dirs_removed": 0,
        "failed": None,
    }
    assert _records(driver_log, UNUSABLE) == []
    assert (
        agent.metrics.value("kubedra_driver_reconcile_actions_total", action="specs_written") == 1
    )
    assert not any(t.exists() for t in temporaries) and all(o.exists() for o in others)
    assert not spec_b.exists() and not host_b.exists()
    assert _prepare(agent, [a]) == {a[1]: devices[a[1]]}
    assert disk_problems(plugin, cdi, NODE)[1] == []


def test_damaged_spec_is_rewritten_from_its_entry(store, agent, prepared, driver_log):
    (a, _), _ = prepared
    spec_a = agent.cdi / f"k8s.gpu.nvidia.com-claim_{a[1]}.json"
    good = spec_a.read_bytes()
    spec_a.write_bytes(good[:40])
    agent.start()
    assert spec_a.read_bytes() == good
    assert _fields(_records(driver_log, RECONCILED)[0])["specs_written"] == 1


def test_reboot_with_cdi_on_tmpfs_rewrites_every_spec(store, agent, prepared, driver_log):
    refs, devices = prepared
    for spec in agent.cdi.iterdir():
        spec.unlink()
    agent.start()
    assert _fields(_records(driver_log, RECONCILED)[0])["specs_written"] == 2
    assert _prepare(agent, refs) == devices
    assert disk_problems(agent.paths.plugin_dir, agent.cdi, NODE)[1] == []


def test_second_instance_waits_for_the_lock(store, agent, short_dir):
    from kubedra.driver.files import Busy
    from kubedra.driver.prepare import DeviceState

    with pytest.raises(Busy, match="locked by another instance"):
        DeviceState(store, GPU, NODE, agent.paths.plugin_dir, agent.cdi, lock_timeout=0.2)
    agent.stop()
    DeviceState(store, GPU, NODE, agent.paths.plugin_dir, agent.cdi, lock_timeout=0.2).close()
