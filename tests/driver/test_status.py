"""`status.devices` of prepared claims, written in the background on the embedded store."""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
import pytest

from kubedra.api.meta import ObjectMeta
from kubedra.api.resource import (
    AllocatedDeviceStatus,
    Condition,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimStatus,
)
from kubedra.cluster.sqlite import SqliteStore
from kubedra.driver.checkpoint import PreparedClaim, PreparedDevice
from kubedra.driver.kubelet import KubeletClient
from kubedra.driver.retry import Backoff, Transitions
from kubedra.driver.status import StatusWriter, entries, with_entries

from .conftest import GPU, NODE, FlakyStore, gpu_devices, make_claim

NIC = "dra.net"


def _prepare(agent, store, name: str, devices: list[str]) -> ResourceClaim:
    claim = make_claim(store, name, [("gpu", NODE, d) for d in devices])
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()
        answer = kubelet.prepare([("default", claim.metadata.uid, name)])
    assert answer.claims[claim.metadata.uid].error == ""
    assert agent.statuses.idle(10)
    return store.get(ResourceClaim, name)


def _mine(claim: ResourceClaim, driver: str = GPU) -> list[AllocatedDeviceStatus]:
    devices = claim.status.devices if claim.status else ()
    return [d for d in devices if d.driver == driver]


def test_prepare_reports_each_device_ready_with_its_identity(store, agent):
    claim = _prepare(agent, store, "train", ["gpu-1", "gpu-3"])
    statuses = _mine(claim)
    assert [(s.driver, s.pool, s.device, s.share_id) for s in statuses] == [
        (GPU, NODE, "gpu-1", None),
        (GPU, NODE, "gpu-3", None),
    ]
    uuids = {d.name: d.attributes["uuid"].value for d in gpu_devices(8)}
    for status in statuses:
        (ready,) = status.conditions
        assert (ready.type, ready.status, ready.reason) == ("Ready", "True", "Prepared")
        assert ready.last_transition_time  # the API server requires it
        assert status.data == {"uuid": uuids[status.device]}


def test_other_drivers_entries_are_kept_and_a_repeat_writes_nothing(store, agent):
    claim = make_claim(store, "mixed", [("gpu", NODE, "gpu-0")])
    assert claim.status is not None and claim.status.allocation is not None
    nic = DeviceRequestAllocationResult(request="gpu", driver=NIC, pool=NODE, device="eth1")
    allocation = claim.status.allocation
    devices = msgspec.structs.replace(
        allocation.devices, results=(*allocation.devices.results, nic)
    )
    theirs = AllocatedDeviceStatus(
        driver=NIC,
        pool=NODE,
        device="eth1",
        conditions=(
            Condition(
                type="Ready",
                status="False",
                last_transition_time="2026-12-05T07:00:00Z",
                reason="Wiring",
            ),
        ),
    )
    store.update_status(
        msgspec.structs.replace(
            claim,
            status=ResourceClaimStatus(
                allocation=msgspec.structs.replace(allocation, devices=devices),
                devices=(theirs,),
            ),
        )
    )
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()
        ref = [("default", claim.metadata.uid, "mixed")]
        assert kubelet.prepare(ref).claims[claim.metadata.uid].error == ""
        assert agent.statuses.idle(10)
        written = store.get(ResourceClaim, "mixed")
        assert written.status is not None
        assert written.status.devices[0] == theirs
        assert [d.device for d in _mine(written)] == ["gpu-0"]
        kubelet.prepare(ref)  # the kubelet retries: the status is already right
        assert agent.statuses.idle(10)
    again = store.get(ResourceClaim, "mixed")
    assert again.metadata.resource_version == written.metadata.resource_version


def _entry(claim: ResourceClaim, device: str = "gpu-0", uid: str | None = None) -> PreparedClaim:
    return PreparedClaim(
        uid=uid or claim.metadata.uid or "",
        namespace=claim.namespace,
        name=claim.name,
        devices=[
            PreparedDevice(
                request_names=["gpu"], pool_name=NODE, device_name=device, cdi_device_ids=[]
            )
        ],
        prepared_at="2026-12-05T07:00:00Z",
    )


@pytest.mark.parametrize("change", ["replaced", "deleted", "deallocated"])
def test_a_claim_that_changed_is_dropped_with_one_error_line(store, driver_log, change):
    claim = make_claim(store, "gone", [("gpu", NODE, "gpu-0")])
    entry = _entry(claim)
    if change == "replaced":
        store.delete(ResourceClaim, "gone")
        make_claim(store, "gone", [("gpu", NODE, "gpu-0")])
    elif change == "deleted":
        store.delete(ResourceClaim, "gone")
    else:
        store.update_status(msgspec.structs.replace(claim, status=None))
    writer = StatusWriter(store, GPU, initial=0.01, cap=0.05)
    writer.enqueue(entry)
    writer.start()
    try:
        assert writer.idle(10)
    finally:
        writer.stop()
    lines = [r for r in driver_log if r.getMessage() == "claim status not written"]
    assert len(lines) == 1 and lines[0].levelno == logging.ERROR
    if change != "deleted":
        assert not _mine(store.get(ResourceClaim, "gone"))


def test_unprepare_cancels_a_pending_write(store):
    claim = make_claim(store, "brief", [("gpu", NODE, "gpu-0")])
    writer = StatusWriter(store, GPU)
    writer.enqueue(_entry(claim))
    writer.cancel(claim.metadata.uid or "")
    writer.start()
    try:
        assert writer.idle(5)
    finally:
        writer.stop()
    assert not _mine(store.get(ResourceClaim, "brief"))


class RacingStore(SqliteStore):
    """Another writer changes the claim between the status writer's read and its write."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.races = 1

    def get(self, cls, name, namespace="default"):
        obj = super().get(cls, name, namespace)
        if cls is ResourceClaim and self.races:
            self.races -= 1
            labels = {**obj.metadata.labels, "raced": "yes"}
            meta = msgspec.structs.replace(obj.metadata, labels=labels)
            self.update(msgspec.structs.replace(obj, metadata=meta))
        return obj


def test_a_conflict_reads_the_claim_again_and_keeps_the_other_write(tmp_path):
    store = RacingStore(tmp_path / "state.db")
    claim = make_claim(store, "raced", [("gpu", NODE, "gpu-0")])
    writer = StatusWriter(store, GPU, initial=5.0)  # a backoff would outlast the test
    writer.enqueue(_entry(claim))
    writer.start()
    try:
        assert writer.idle(3)
    finally:
        writer.stop()
    written = store.get(ResourceClaim, "raced")
    assert written.metadata.labels["raced"] == "yes"
    assert [d.device for d in _mine(written)] == ["gpu-0"]
    store.close()


def test_an_unreachable_api_is_retried_and_logged_once_per_state(tmp_path, driver_log):
    store = FlakyStore(tmp_path / "state.db")
    claim = make_claim(store, "patient", [("gpu", NODE, "gpu-0")])
    writer = StatusWriter(store, GPU, initial=0.01, cap=0.02)
    store.down.set()
    writer.enqueue(_entry(claim))
    writer.start()
    try:
        while store.refused < 5:
            assert not writer.idle(0.05)
        store.down.clear()
        assert writer.idle(5)
    finally:
        writer.stop()
    messages = [r.getMessage() for r in driver_log if r.name.endswith(".status")]
    assert messages == [
        "writing claim status failing, retrying with backoff",
        "writing claim status working again",
        "claim status written",
    ]
    assert [d.device for d in _mine(store.get(ResourceClaim, "patient"))] == ["gpu-0"]
    store.close()


def test_with_entries_replaces_only_this_drivers_entries():
    claim = ResourceClaim(metadata=ObjectMeta(name="c", uid="u"))
    mine = entries(GPU, _entry(claim, "gpu-2"))
    first = with_entries(claim, GPU, mine)
    assert first is not None and first.status is not None
    assert first.status.devices == mine
    assert with_entries(first, GPU, mine) is None
    cleared = with_entries(first, GPU, ())
    assert cleared is not None and cleared.status is not None and cleared.status.devices == ()


def test_backoff_doubles_to_its_cap_and_resets():
    backoff = Backoff(0.5, 3.0)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_transitions_log_states_not_attempts(driver_log):
    from kubedra.cluster.rest import Forbidden, Unreachable
    from kubedra.driver.logs import get_logger

    states = Transitions(get_logger("test"), "publishing")
    down = [Unreachable(f"cannot reach the API server (request {i}): refused") for i in range(3)]
    assert [states.failed(e) for e in down] == [True, False, False]
    assert states.failed(Forbidden("list resourceslices: forbidden"))
    assert states.failed(Forbidden("list resourceslices: forbidden")) is False
    assert states.succeeded() and not states.succeeded()
    assert [r.getMessage() for r in driver_log] == [
        "publishing failing, retrying with backoff",
        "publishing failing, retrying with backoff",
        "publishing working again",
    ]
