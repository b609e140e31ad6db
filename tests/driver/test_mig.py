"""Prepare-time MIG on a simulated H100 x8 node in MIG mode (`h100x8-mig`): the driver's own
MIG code (`kubedra.driver.mig`) runs against `SimulatedNvml`, whose instances persist in the
plugin directory as real ones outlive the driver. The kubelet is a real gRPC client on the
plugin's unix sockets; the store is the embedded SQLite one."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.resource import ResourceClaim, ResourceSlice
from kubedra.catalog import PROFILES, profile
from kubedra.cluster.sqlite import SqliteStore
from kubedra.driver import run_driver
from kubedra.driver.backends import inventory_for
from kubedra.driver.backends.nvml import (
    NvmlBackend,
    NvmlCallError,
    gpu_inventory,
    mig_capability_minor,
    nvidia_caps_major,
)
from kubedra.driver.backends.simnvml import STATE_FILE, SimulatedNvml
from kubedra.driver.backends.simulated import SimulatedBackend
from kubedra.driver.cdi import STAND_IN_CAPS_MAJOR
from kubedra.driver.checkpoint import Checkpoint
from kubedra.driver.kubelet import KubeletClient, PluginPaths
from kubedra.driver.mig import MigError, MigManager
from kubedra.driver.prepare import ClaimRef, DeviceState
from kubedra.driver.publisher import list_slices, publish
from kubedra.driver.server import PluginServer

from .conftest import GPU, NODE, checkpoint_claims, make_claim, make_node
from .fakenvml import FakeNvml

PROFILE = "h100x8-mig"
MIG_3G = "gpu-6-mig-3g40gb-9-4"  # profile ID 9 (3g.40gb) at memory slices 4-7 of gpu-6


class Killed(BaseException):
    """The driver process dying at this very point (nothing after it runs)."""


class MigNode:
    """A driver on a simulated MIG node: DeviceState + PluginServer over one plugin directory
    and CDI directory, restartable (a new DeviceState, as after a kill -9); `hardware` is
    the node's GPUs as another process (an operator) sees them."""

    def __init__(self, store: SqliteStore, root: Path) -> None:
        self.store, self.root, self.cdi = store, root, root / "cdi"
        self.paths = PluginPaths.for_driver(GPU, root / "kubelet")
        self.backend = SimulatedBackend(PROFILE, NODE)
        self.inventory = inventory_for(self.backend, GPU)
        self.state_file = self.paths.plugin_dir / STATE_FILE
        self.hardware = SimulatedNvml(profile(PROFILE), NODE, self.state_file)
        self.state: DeviceState | None = None
        self.server: PluginServer | None = None
        self.kubelet: KubeletClient | None = None
        make_node(store, NODE)
        publish(store, self.inventory, NODE)

    def start(self, crashing: SimulatedNvml | None = None) -> DeviceState:
        """A new driver process (its NVML the simulated backend's, or `crashing`)."""
        nvml = crashing or self.backend.mig_nvml(GPU, self.paths.plugin_dir)
        self.state = DeviceState(
            self.store, GPU, NODE, self.paths.plugin_dir, self.cdi, lock_timeout=5, nvml=nvml
        )
        self.state.set_devices(self.state.publishable(self.inventory).devices)
        self.server = PluginServer(self.state, self.paths)
        self.server.start()
        self.kubelet = KubeletClient(self.paths.registration_socket, timeout=10)
        self.kubelet.register()
        return self.state

    def stop(self) -> None:
        """The process ends (a kill -9 as far as the disk and the GPUs are concerned)."""
        if self.kubelet is not None:
            self.kubelet.close()
            self.kubelet = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.state is not None:
            self.state.close()
            self.state = None

    def restart(self) -> DeviceState:
        self.stop()
        return self.start()

    def claim(self, name: str, *devices: str) -> tuple[str, str, str]:
        claim = make_claim(self.store, name, [("gpu", NODE, d) for d in devices])
        return ("default", claim.metadata.uid or "", name)

    def prepare(self, ref: tuple[str, str, str]) -> Any:
        assert self.kubelet is not None
        return self.kubelet.prepare([ref]).claims[ref[1]]

    def unprepare(self, ref: tuple[str, str, str]) -> str:
        assert self.kubelet is not None
        return str(self.kubelet.unprepare([ref]).claims[ref[1]].error)

    def instances(self) -> list[tuple[int, int, int, int, list[str]]]:
        """(GPU, profile ID, start, size, MIG UUIDs) of every instance on the hardware."""
        return sorted(
            (gpu, gi["profileId"], gi["start"], gi["size"],
             [ci["uuid"] for ci in gi["computeInstances"]])
            for gpu, found in self.hardware.instances().items() for gi in found
        )  # fmt: skip

    def spec(self, uid: str) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(
            (self.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json").read_text()
        )
        return result

    def pending(self) -> list[dict[str, Any]]:
        """The checkpoint's pending MIG instances (none without a checkpoint)."""
        path = self.paths.plugin_dir / "checkpoint.json"
        if not path.exists():
            return []
        return list(json.loads(path.read_text())["data"]["migPending"])


@pytest.fixture
def mig(store: SqliteStore, short_dir: Path) -> Iterator[MigNode]:
    node = MigNode(store, short_dir)
    node.start()
    yield node
    node.stop()


def _visible(spec: dict[str, Any]) -> str:
    (line,) = [e for e in spec["containerEdits"]["env"] if e.startswith("NVIDIA_VISIBLE_DEVICES=")]
    return line.split("=", 1)[1]


def test_prepare_makes_exactly_the_allocated_instance_and_unprepare_destroys_it(
    mig: MigNode,
) -> None:
    ref = mig.claim("infer", MIG_3G)
    uid = ref[1]
    answer = mig.prepare(ref)
    assert answer.error == ""
    assert [d.device_name for d in answer.devices] == [MIG_3G]
    ((gpu, profile_id, start, size, uuids),) = mig.instances()
    assert (gpu, profile_id, start, size) == (6, 9, 4, 4) and len(uuids) == 1
    (mig_uuid,) = uuids
    assert mig_uuid.startswith("MIG-")
    # The CDI spec names the instance and maps its parent's node and its two capabilities.
    spec = mig.spec(uid)
    assert _visible(spec) == mig_uuid
    (device,) = spec["devices"]
    gi = mig.hardware.instances()[6][0]
    gi_minor = mig.hardware.mig_capability_minor(6, gi["id"], None)
    ci_minor = mig.hardware.mig_capability_minor(6, gi["id"], gi["computeInstances"][0]["id"])
    assert device["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/nvidia6", "type": "c", "major": 195, "minor": 6},
        {"path": f"/dev/nvidia-caps/nvidia-cap{gi_minor}", "type": "c",
         "major": STAND_IN_CAPS_MAJOR, "minor": gi_minor},
        {"path": f"/dev/nvidia-caps/nvidia-cap{ci_minor}", "type": "c",
         "major": STAND_IN_CAPS_MAJOR, "minor": ci_minor},
    ]  # fmt: skip
    assert gi_minor != ci_minor
    # The checkpoint records the instance; nothing is left pending.
    (record,) = checkpoint_claims(mig.paths.plugin_dir)[uid]["mig"]
    assert record["deviceName"] == MIG_3G and record["migUuid"] == mig_uuid
    assert (record["profileId"], record["start"], record["size"]) == (9, 4, 4)
    assert record["gpuInstanceId"] == gi["id"] and mig.pending() == []
    assert mig.state is not None and mig.state.prepared[uid].device_data[MIG_3G]["uuid"] == mig_uuid
    # Prepared again (the kubelet retries): answered from the checkpoint, no second instance.
    assert mig.prepare(ref).devices[0].cdi_device_ids == answer.devices[0].cdi_device_ids
    assert len(mig.instances()) == 1
    # Unprepare destroys it; a second unprepare is no error.
    assert mig.unprepare(ref) == ""
    assert mig.instances() == [] and mig.pending() == []
    assert not (mig.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json").exists()
    assert mig.unprepare(ref) == ""


def test_restart_keeps_the_instances_of_prepared_claims(mig: MigNode) -> None:
    a = mig.claim("a", MIG_3G)
    b = mig.claim("b", "gpu-1-mig-1g10gb-19-3", "gpu-1-mig-2g20gb-14-4")
    assert mig.prepare(a).error == "" and mig.prepare(b).error == ""
    before, specs = mig.instances(), {r[1]: mig.spec(r[1]) for r in (a, b)}
    assert len(before) == 3
    mig.restart()
    assert mig.instances() == before  # the same instances (same MIG UUIDs) are kept
    assert {r[1]: mig.spec(r[1]) for r in (a, b)} == specs
    assert mig.prepare(b).error == "" and mig.instances() == before
    assert mig.unprepare(a) == "" and mig.unprepare(b) == ""
    assert mig.instances() == []


class CrashingNvml(SimulatedNvml):
    """The node's GPUs, with the driver dying in the middle of making a compute instance:
    `after` True dies once the instance exists, False before NVML is asked."""

    def __init__(self, node: MigNode, after: bool) -> None:
        super().__init__(profile(PROFILE), NODE, node.state_file)
        self.after = after

    def nvmlGpuInstanceCreateComputeInstance(
        self, index: int, gpu_instance_id: int, profile_id: int
    ) -> dict[str, Any]:
        if self.after:
            super().nvmlGpuInstanceCreateComputeInstance(index, gpu_instance_id, profile_id)
        raise Killed


@pytest.mark.parametrize("after", [True, False], ids=["instance-made", "gpu-instance-only"])
def test_a_kill_between_making_the_instance_and_the_commit_leaves_an_orphan_that_goes(
    mig: MigNode, after: bool
) -> None:
    ref = mig.claim("cut", MIG_3G)
    mig.stop()
    state = mig.start(CrashingNvml(mig, after))
    with pytest.raises(Killed):
        state.prepare([ClaimRef(*ref)])
    # What the dead process left: an instance nobody holds, its pending record, no entry.
    ((gpu, _, start, _, uuids),) = mig.instances()
    assert (gpu, start, len(uuids)) == (6, 4, int(after))
    (record,) = mig.pending()
    assert record["deviceName"] == MIG_3G and record["gpuInstanceId"] is None
    assert checkpoint_claims(mig.paths.plugin_dir) == {}
    mig.restart()  # the orphan is destroyed at start
    assert mig.instances() == [] and mig.pending() == []
    assert mig.prepare(ref).error == ""  # the kubelet's retry makes it afresh
    ((_, _, _, _, fresh),) = mig.instances()
    assert fresh != uuids and _visible(mig.spec(ref[1])) == fresh[0]


def test_a_kill_between_the_commit_and_the_cdi_spec_keeps_the_instance(mig: MigNode) -> None:
    """Committed, spec not yet written (what a kill right after the commit leaves): the
    start writes the spec from the entry, the instance is the claim's and stays."""
    ref = mig.claim("half", MIG_3G)
    assert mig.prepare(ref).error == ""
    spec_file = mig.cdi / f"k8s.gpu.nvidia.com-claim_{ref[1]}.json"
    written, before = spec_file.read_bytes(), mig.instances()
    mig.stop()
    spec_file.unlink()
    mig.start()
    assert spec_file.read_bytes() == written and mig.instances() == before


def test_a_kill_after_the_unprepare_commit_destroys_the_instance_at_start(mig: MigNode) -> None:
    ref = mig.claim("leaving", MIG_3G)
    assert mig.prepare(ref).error == ""
    assert mig.state is not None
    mig.state.checkpoint.save({}, 99, mig.state.prepared[ref[1]].mig)  # the commit, then death
    mig.stop()
    mig.start()
    assert mig.instances() == [] and mig.pending() == []


def test_an_instance_gone_while_the_driver_was_down_is_made_again(mig: MigNode) -> None:
    """A reboot or GPU reset loses every instance; the prepared claim keeps its placement."""
    ref = mig.claim("survivor", MIG_3G)
    assert mig.prepare(ref).error == ""
    ((_, _, _, _, old),) = mig.instances()
    mig.stop()
    mig.state_file.unlink()  # the GPUs come back without instances
    mig.start()
    ((gpu, pid, start, size, new),) = mig.instances()
    assert (gpu, pid, start, size) == (6, 9, 4, 4) and new != old
    spec = mig.spec(ref[1])
    assert _visible(spec) == new[0]  # the spec follows the new instance
    (record,) = checkpoint_claims(mig.paths.plugin_dir)[ref[1]]["mig"]
    assert record["migUuid"] == new[0]
    caps = [n["minor"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"][1:]]
    gi = mig.hardware.instances()[6][0]
    assert caps == [
        mig.hardware.mig_capability_minor(6, gi["id"], None),
        mig.hardware.mig_capability_minor(6, gi["id"], gi["computeInstances"][0]["id"]),
    ]
    assert mig.unprepare(ref) == "" and mig.instances() == []


def test_a_whole_gpu_claim_and_a_mig_claim_exclude_each_other(mig: MigNode) -> None:
    whole = mig.claim("whole", "gpu-6")
    part = mig.claim("part", "gpu-6-mig-3g40gb-9-0")
    assert mig.prepare(whole).error == ""
    error = mig.prepare(part).error
    assert "gpu-6 is in use as a whole GPU by claim default/whole" in error, error
    assert mig.instances() == [] and mig.pending() == []
    assert mig.unprepare(whole) == ""
    assert mig.prepare(part).error == ""
    again = mig.claim("whole-again", "gpu-6")
    error = mig.prepare(again).error
    assert "device gpu-6: the GPU is partitioned (1 MIG instance(s)" in error, error
    assert "of claim default/part" in error
    # One claim holding both: refused as well, nothing made.
    assert mig.unprepare(part) == ""
    both = mig.claim("both", "gpu-5", "gpu-5-mig-1g10gb-19-0")
    assert "a GPU held whole is never partitioned" in mig.prepare(both).error
    assert mig.instances() == [] and mig.pending() == []
    assert mig.prepare(mig.claim("other-gpu", "gpu-5")).error == ""  # unrelated GPUs are fine


def test_overlapping_placements_get_a_clear_error(mig: MigNode) -> None:
    first = mig.claim("first", "gpu-3-mig-4g40gb-5-0")
    second = mig.claim("second", "gpu-3-mig-3g40gb-9-0")
    assert mig.prepare(first).error == ""
    error = mig.prepare(second).error
    assert error.startswith("device gpu-3-mig-3g40gb-9-0: its memory slices 0-3 are taken by "
                            "GPU instance 1 (profile ID 5, memory slices 0-3) on gpu-3 of "
                            "claim default/first"), error  # fmt: skip
    assert len(mig.instances()) == 1 and mig.pending() == []


def test_nvml_rules_of_the_simulated_gpus(tmp_path: Path) -> None:
    """Illegal and overlapping placements fail as NVML fails them, and the driver says why."""
    nvml = SimulatedNvml(profile(PROFILE), NODE, tmp_path / STATE_FILE)

    def code(call: Callable[[], object]) -> str:
        with pytest.raises(NvmlCallError) as err:
            call()
        return err.value.code

    create = nvml.nvmlDeviceCreateGpuInstanceWithPlacement
    assert code(lambda: create(0, 9, 2, 4)) == "NVML_ERROR_INVALID_ARGUMENT"  # 3g at slice 2
    assert code(lambda: create(0, 9, 4, 2)) == "NVML_ERROR_INVALID_ARGUMENT"  # wrong size
    assert code(lambda: create(0, 42, 0, 1)) == "NVML_ERROR_INVALID_ARGUMENT"  # no profile 42
    gi = create(0, 9, 4, 4)
    assert gi == {"id": 1, "profileId": 9, "placement": {"start": 4, "size": 4}}
    assert code(lambda: create(0, 19, 5, 1)) == "NVML_ERROR_INSUFFICIENT_RESOURCES"  # overlap
    assert create(0, 20, 0, 1)["id"] == 2  # 1g.10gb+me holds the GPU's one OFA engine...
    assert code(lambda: create(0, 20, 1, 1)) == "NVML_ERROR_INSUFFICIENT_RESOURCES"  # ...once
    full = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(0, 1, 2, 0)  # 3 slices
    assert (full["sliceCount"], full["multiprocessorCount"]) == (3, 60)
    assert code(lambda: nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(0, 1, 4, 0)) == (
        "NVML_ERROR_NOT_SUPPORTED"  # a 7-slice compute instance on a 3-slice GPU instance
    )
    ci = nvml.nvmlGpuInstanceCreateComputeInstance(0, 1, full["id"])
    assert code(lambda: nvml.nvmlGpuInstanceCreateComputeInstance(0, 1, 0)) == (
        "NVML_ERROR_INSUFFICIENT_RESOURCES"  # its slices are all taken
    )
    assert code(lambda: nvml.nvmlGpuInstanceDestroy(0, 1)) == "NVML_ERROR_IN_USE"
    assert code(lambda: nvml.nvmlGpuInstanceDestroy(0, 7)) == "NVML_ERROR_NOT_FOUND"
    # Another process (a restarted driver) sees the same instances.
    again = SimulatedNvml(profile(PROFILE), NODE, tmp_path / STATE_FILE)
    assert again.nvmlDeviceGetGpuInstances(0, 9) == [gi]
    mig_uuid = again.nvmlDeviceGetMigDeviceHandleByIndex(0, 0)["uuid"]
    assert mig_uuid.startswith("MIG-")
    nvml.nvmlComputeInstanceDestroy(0, 1, ci["id"])
    nvml.nvmlGpuInstanceDestroy(0, 1)
    nvml.nvmlGpuInstanceDestroy(0, 2)
    assert again.instances() == {}
    # Through the driver's MIG code: the reason is in the message.
    manager = MigManager(nvml)
    (device,) = [d for d in inventory_for(SimulatedBackend(PROFILE, NODE), GPU).devices
                 if d.name == "gpu-0-mig-3g40gb-9-0"]  # fmt: skip
    placement = manager.placement(device)
    assert placement is not None
    illegal = msgspec.structs.replace(placement.record("uid"), start=2)
    with pytest.raises(MigError, match=r"INVALID_ARGUMENT \(not a legal placement"):
        manager.create(illegal)
    manager.create(placement.record("uid"))
    with pytest.raises(MigError, match=r"INSUFFICIENT_RESOURCES \(its memory slices"):
        manager.create(placement.record("uid"))


@pytest.mark.parametrize("name", [n for n, p in PROFILES.items() if p.mig])
def test_the_simulated_nvml_publishes_what_the_catalog_does(name: str, tmp_path: Path) -> None:
    """The inventory code of the NVML backend over `SimulatedNvml` gives the catalog's devices
    and counter sets (the catalog alone adds its simulated NVLink domain)."""
    nvml = SimulatedNvml(profile(name), NODE, tmp_path / STATE_FILE)
    read = gpu_inventory(nvml)
    (catalog,) = [i for i in profile(name).inventories(NODE) if i.driver == GPU]
    assert read.shared_counters == catalog.shared_counters
    wanted = {d.name: d for d in catalog.devices}  # NVML lists profiles in its own order
    assert sorted(d.name for d in read.devices) == sorted(wanted)
    for got in read.devices:
        want = wanted[got.name]
        attributes = {k: v for k, v in want.attributes.items() if k != "nvlinkDomain"}
        assert (got.attributes, got.capacity, got.consumes_counters) == (
            attributes, want.capacity, want.consumes_counters
        )  # fmt: skip


def _slice_counters(store: SqliteStore, node: str) -> tuple[set[str], dict[str, dict[str, str]]]:
    slices = list_slices(store, GPU, node)
    devices = {d.name for s in slices for d in s.spec.devices}
    counters = {
        c.name: {k: str(v.value) for k, v in c.counters.items()}
        for s in slices for c in s.spec.shared_counters
    }  # fmt: skip
    return devices, counters


def _wait(check: Callable[[], object], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)


def test_an_instance_made_by_hand_is_left_alone_and_published_around(
    store: SqliteStore, short_dir: Path
) -> None:
    node, root, cdi = "sim-1", short_dir / "kubelet", short_dir / "cdi"
    plugin_dir = PluginPaths.for_driver(GPU, root).plugin_dir
    hand = SimulatedNvml(profile(PROFILE), node, plugin_dir / STATE_FILE)

    def run() -> tuple[threading.Thread, threading.Event]:
        stop, ready = threading.Event(), threading.Event()
        thread = threading.Thread(
            target=run_driver,
            args=(store, GPU, node, "simulated", PROFILE, root, cdi, None, stop),
            kwargs={"ready": ready, "resync_seconds": 0.1},
        )
        thread.start()
        assert ready.wait(30)
        return thread, stop

    thread, stop = run()
    try:
        devices, counters = _slice_counters(store, node)
        assert "gpu-2" in devices and counters["gpu-2-counter-set"]["memory-slice-0"] == "1"
        full = dict(counters["gpu-2-counter-set"])
        # An operator makes a 3g.40gb at slices 0-3 of gpu-2 with nvidia-smi, say.
        gi = hand.nvmlDeviceCreateGpuInstanceWithPlacement(2, 9, 0, 4)
        hand.nvmlGpuInstanceCreateComputeInstance(2, gi["id"], 2)
        _wait(lambda: "gpu-2" not in _slice_counters(store, node)[0], "published around it")
        devices, counters = _slice_counters(store, node)
        left = counters["gpu-2-counter-set"]
        assert [left[f"memory-slice-{k}"] for k in range(8)] == ["0"] * 4 + ["1"] * 4
        assert (full["multiprocessors"], left["multiprocessors"]) == ("132", "72")  # 132 - 60
        gpu2 = sorted(d for d in devices if d.startswith("gpu-2"))
        assert gpu2 == ["gpu-2-mig-1g10gb-19-4", "gpu-2-mig-1g10gb-19-5", "gpu-2-mig-1g10gb-19-6",
                        "gpu-2-mig-1g10gb-me-20-4", "gpu-2-mig-1g10gb-me-20-5",
                        "gpu-2-mig-1g10gb-me-20-6", "gpu-2-mig-1g20gb-15-4",
                        "gpu-2-mig-1g20gb-15-6", "gpu-2-mig-2g20gb-14-4",
                        "gpu-2-mig-3g40gb-9-4"], gpu2  # fmt: skip
        assert counters["gpu-3-counter-set"] == full  # other GPUs as they were
        # A claim on an overlapping placement (allocated before the slice changed) is told.
        claim = make_claim(store, "late", [("gpu", node, "gpu-2-mig-4g40gb-5-0")])
        state_ref = ("default", claim.metadata.uid or "", "late")
        with KubeletClient(PluginPaths.for_driver(GPU, root).registration_socket, 10) as kubelet:
            kubelet.register()
            error = kubelet.prepare([state_ref]).claims[state_ref[1]].error
        assert "not published on node sim-1" in error, error  # withdrawn from prepare too
    finally:
        stop.set()
        thread.join(30)
    # The driver never destroys it, restarts included.
    thread, stop = run()
    try:
        assert [g["id"] for g in hand.instances()[2]] == [gi["id"]]
        hand.nvmlComputeInstanceDestroy(2, gi["id"], 0)
        hand.nvmlGpuInstanceDestroy(2, gi["id"])
        _wait(lambda: _slice_counters(store, node)[1]["gpu-2-counter-set"] == full, "restored")
        assert "gpu-2" in _slice_counters(store, node)[0]
    finally:
        stop.set()
        thread.join(30)


def test_a_hand_made_instance_on_the_placement_of_a_claim_is_named_in_its_error(
    mig: MigNode,
) -> None:
    gi = mig.hardware.nvmlDeviceCreateGpuInstanceWithPlacement(4, 15, 2, 2)  # 1g.20gb, 2-3
    ref = mig.claim("blocked", "gpu-4-mig-2g20gb-14-2")  # allocated before republication
    error = mig.prepare(ref).error
    assert error == (
        "device gpu-4-mig-2g20gb-14-2: its memory slices 2-3 are taken by GPU instance "
        f"{gi['id']} (profile ID 15, memory slices 2-3) on gpu-4, made outside kubedra "
        "(never destroyed by it)"
    )
    assert mig.pending() == [] and len(mig.instances()) == 1


def test_recorded_nvml_cannot_make_instances_and_says_so(store: SqliteStore, short_dir: Path) -> None:
    """The NVML backend runs the same MIG code; a recorded snapshot is read-only."""
    fake = FakeNvml()  # the recorded H100 host: GPUs 6 and 7 in MIG mode
    backend = NvmlBackend(fake)
    (inventory,) = backend.inventories()
    make_node(store, NODE)
    paths = PluginPaths.for_driver(GPU, short_dir / "kubelet")
    state = DeviceState(store, GPU, NODE, paths.plugin_dir, short_dir / "cdi", lock_timeout=5,
                        nvml=backend.mig_nvml(GPU, paths.plugin_dir))  # fmt: skip
    try:
        state.set_devices(inventory.devices)
        claim = make_claim(store, "c", [("gpu", NODE, MIG_3G)])
        ref = ClaimRef("default", claim.metadata.uid or "", "c")
        error = state.prepare([ref])[ref.uid].error
        assert error.startswith("cannot create the MIG 3g.40gb instance at memory slices 4-7 of "
                                "gpu-6: nvmlDeviceCreateGpuInstanceWithPlacement: "
                                "NVML_ERROR_NOT_SUPPORTED"), error  # fmt: skip
        assert state.pending == () and state.prepared == {}
        # A MIG device the snapshot records (made outside the driver) is published around.
        fake.create_mig(7, profile_id=9, start=0, size=4, memory_mib=40_448)
        names = {d.name for d in state.publishable(inventory).devices}
        assert "gpu-7" not in names and "gpu-7-mig-3g40gb-9-0" not in names
        assert "gpu-7-mig-3g40gb-9-4" in names and "gpu-6" in names
    finally:
        state.close()


def test_capability_minors_and_major_from_proc(tmp_path: Path) -> None:
    caps = tmp_path / "driver" / "nvidia" / "capabilities" / "gpu3" / "mig" / "gi2"
    (caps / "ci0").mkdir(parents=True)
    (caps / "access").write_text("DeviceFileMinor: 57\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    (caps / "ci0" / "access").write_text("DeviceFileMinor: 58\nDeviceFileMode: 292\n")
    (tmp_path / "devices").write_text("Character devices:\n195 nvidia\n237 nvidia-caps\n")
    assert mig_capability_minor(3, 2, None, tmp_path) == 57
    assert mig_capability_minor(3, 2, 0, tmp_path) == 58
    assert mig_capability_minor(3, 5, None, tmp_path) is None
    assert nvidia_caps_major(tmp_path) == 237
    assert nvidia_caps_major(tmp_path / "none") is None


def test_a_stale_claim_found_by_recovery_gives_up_its_instance(mig: MigNode) -> None:
    """The checkpoint is lost; the CDI spec rebuilds the entry, the API says the claim is
    gone: its instance is destroyed, as the claim's entry is dropped."""
    ref = mig.claim("vanishing", MIG_3G)
    assert mig.prepare(ref).error == ""
    mig.stop()
    (mig.paths.plugin_dir / "checkpoint.json").unlink()
    (mig.paths.plugin_dir / "checkpoint.last-good.json").unlink(missing_ok=True)
    mig.store.delete(ResourceClaim, "vanishing")
    mig.start()
    assert mig.instances() == [] and mig.pending() == []
    assert Checkpoint(mig.paths.plugin_dir, GPU, NODE).read() is not None
    assert list_slices(mig.store, GPU, NODE)  # still published
    assert mig.store.list(ResourceSlice)
