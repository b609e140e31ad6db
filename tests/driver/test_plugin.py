"""The kubelet plugin over real unix sockets, with a real gRPC client acting as the kubelet."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from kubedra.api.resource import ResourceSlice
from kubedra.driver import cleanup, run_driver
from kubedra.driver.grpc_api import dra_v1beta1, dra_v1beta1_grpc
from kubedra.driver.kubelet import KubeletClient, PluginPaths, RegistrationRejected, unix_target
from kubedra.driver.publisher import list_slices

from .conftest import GPU, NODE, checkpoint_claims, make_claim


@pytest.fixture
def setup(store, agent):
    kubelet = KubeletClient(agent.paths.registration_socket, timeout=10)
    yield store, agent, kubelet
    kubelet.close()


def test_socket_layout_and_registration(setup):
    _store, agent, kubelet = setup
    root = agent.root
    assert agent.paths.registration_socket == root / "plugins_registry" / "gpu.nvidia.com-reg.sock"
    assert agent.paths.dra_socket == root / "plugins" / "gpu.nvidia.com" / "dra.sock"
    assert agent.paths.registration_socket.is_socket() and agent.paths.dra_socket.is_socket()
    info = kubelet.register()
    assert (info.type, info.name, info.endpoint) == ("DRAPlugin", GPU, str(agent.paths.dra_socket))
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    assert kubelet.version == "v1.DRAPlugin"
    assert agent.server.registered.wait(5)


def test_registration_rejected_is_reported(setup):
    _, agent, kubelet = setup
    with pytest.raises(RegistrationRejected):
        kubelet.register(accept=False)
    assert not agent.server.registered.is_set()
    assert agent.server.registration_error == "rejected by test kubelet"


def test_prepare_repeat_restart_unprepare(setup):
    store, agent, kubelet = setup
    kubelet.register()
    claim = make_claim(store, "train", [("gpus", NODE, "gpu-1"), ("gpus", NODE, "gpu-3")])
    uid = claim.metadata.uid
    ref = [("default", uid, "train")]
    first = kubelet.prepare(ref)
    entry = first.claims[uid]
    assert entry.error == ""
    got = [
        (list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids))
        for d in entry.devices
    ]
    assert got == [
        (["gpus"], NODE, "gpu-1", [f"k8s.gpu.nvidia.com/claim={uid}-gpu-1"]),
        (["gpus"], NODE, "gpu-3", [f"k8s.gpu.nvidia.com/claim={uid}-gpu-3"]),
    ]
    spec_file = agent.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json"
    spec = json.loads(spec_file.read_text())
    assert spec["cdiVersion"] == "0.6.0" and spec["kind"] == "k8s.gpu.nvidia.com/claim"
    assert (
        f"NVIDIA_VISIBLE_DEVICES=GPU-{NODE}-0001,GPU-{NODE}-0003" in spec["containerEdits"]["env"]
    )
    assert {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255} in spec[
        "containerEdits"
    ]["deviceNodes"]
    assert [d["name"] for d in spec["devices"]] == [f"{uid}-gpu-1", f"{uid}-gpu-3"]
    assert spec["devices"][1]["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/nvidia3", "type": "c", "major": 195, "minor": 3}
    ]
    assert list(checkpoint_claims(agent.paths.plugin_dir)) == [uid]
    assert agent.metrics.value("kubedra_driver_prepared_claims") == 1

    # the kubelet retries: same answer, nothing rewritten
    mtime = spec_file.stat().st_mtime_ns
    assert kubelet.prepare(ref) == first
    assert spec_file.stat().st_mtime_ns == mtime

    # driver restart: a new process reads the checkpoint
    agent.stop()
    kubelet.close()
    agent.start()
    assert agent.metrics.value("kubedra_driver_prepared_claims") == 1
    kubelet2 = KubeletClient(agent.paths.registration_socket, timeout=10)
    kubelet2.register()
    assert kubelet2.prepare(ref) == first  # still the same answer after the restart
    store.delete(type(claim), "train")  # unprepare may come after the claim is gone
    gone = kubelet2.unprepare(ref)
    assert dict(gone.claims) == {uid: gone.claims[uid]} and gone.claims[uid].error == ""
    assert not spec_file.exists()
    assert checkpoint_claims(agent.paths.plugin_dir) == {}
    assert agent.metrics.value("kubedra_driver_prepared_claims") == 0
    # unpreparing again (not prepared) is fine
    assert kubelet2.unprepare(ref).claims[uid].error == ""
    kubelet2.close()


def test_per_claim_errors_do_not_fail_others(setup):
    store, agent, kubelet = setup
    kubelet.register()
    good = make_claim(store, "good", [("gpu", NODE, "gpu-0")])
    other_node = make_claim(store, "elsewhere", [("gpu", "node-2", "gpu-0")])
    unallocated = make_claim(store, "pending", None)
    bad_config = make_claim(
        store,
        "badcfg",
        [("gpu", NODE, "gpu-2")],
        config=[
            (
                (),
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {"strategy": "TimeSlicing", "bogus": 1},
                },
            )
        ],
    )
    bad_kind = make_claim(
        store,
        "badkind",
        [("gpu", NODE, "gpu-4")],
        config=[((), {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig"})],
    )
    unknown_device = make_claim(store, "ghost", [("gpu", NODE, "gpu-99")])
    refs = [
        ("default", good.metadata.uid, "good"),
        ("default", "00000000-dead-beef-0000-000000000000", "good"),  # uid does not match
        ("default", "11111111-0000-0000-0000-000000000000", "missing"),
        ("default", other_node.metadata.uid, "elsewhere"),
        ("default", unallocated.metadata.uid, "pending"),
        ("default", bad_config.metadata.uid, "badcfg"),
        ("default", bad_kind.metadata.uid, "badkind"),
        ("default", unknown_device.metadata.uid, "ghost"),
    ]
    response = kubelet.prepare(refs)
    assert set(response.claims) == {uid for _, uid, _ in refs}
    errors = {name: response.claims[uid].error for _, uid, name in refs[1:]}
    assert response.claims[good.metadata.uid].error == ""
    assert len(response.claims[good.metadata.uid].devices) == 1
    assert "got replaced" in response.claims[refs[1][1]].error
    assert errors["missing"] == "ResourceClaim default/missing not found"
    assert "not from this node's pool 'node-1'" in errors["elsewhere"]
    assert errors["pending"] == "ResourceClaim default/pending is not allocated"
    assert "unknown field `bogus`" in errors["badcfg"] and "GpuConfig" in errors["badcfg"]
    assert "unsupported config kind 'VfioDeviceConfig'" in errors["badkind"]
    assert "'gpu-99' is not published" in errors["ghost"]
    assert list(agent.cdi.glob("*.json")) == [
        agent.cdi / f"k8s.gpu.nvidia.com-claim_{good.metadata.uid}.json"
    ]
    assert list(checkpoint_claims(agent.paths.plugin_dir)) == [good.metadata.uid]
    assert agent.metrics.value("kubedra_driver_claim_errors_total", operation="prepare") == 7


def test_sharing_configs(setup):
    store, agent, kubelet = setup
    kubelet.register()
    ts = make_claim(
        store,
        "ts",
        [("a", NODE, "gpu-5"), ("b", NODE, "gpu-6")],
        config=[
            (
                ("a",),
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {
                        "strategy": "TimeSlicing",
                        "timeSlicingConfig": {"interval": "Long"},
                    },
                },
            ),
            (
                ("b",),
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {
                        "strategy": "MPS",
                        "mpsConfig": {
                            "defaultActiveThreadPercentage": 50,
                            "defaultPinnedDeviceMemoryLimit": "10Gi",
                        },
                    },
                },
            ),
        ],
    )
    bad_interval = make_claim(
        store,
        "tsbad",
        [("a", NODE, "gpu-7")],
        config=[
            (
                (),
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {
                        "strategy": "TimeSlicing",
                        "timeSlicingConfig": {"interval": "Forever"},
                    },
                },
            )
        ],
    )
    uid = ts.metadata.uid
    response = kubelet.prepare(
        [("default", uid, "ts"), ("default", bad_interval.metadata.uid, "tsbad")]
    )
    assert response.claims[uid].error == ""
    assert "unknown interval 'Forever'" in response.claims[bad_interval.metadata.uid].error
    spec = json.loads((agent.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json").read_text())
    sharing = [json.loads(d["annotations"]["gpu.nvidia.com/sharing"]) for d in spec["devices"]]
    assert sharing == [
        {"strategy": "TimeSlicing", "interval": "Long"},
        {"strategy": "MPS", "activeThreadPercentage": 50, "pinnedDeviceMemoryLimit": "10Gi"},
    ]
    env = spec["containerEdits"]["env"]
    assert (
        "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps" in env
        and "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" in env
    )
    pipe = Path(spec["containerEdits"]["mounts"][0]["hostPath"])
    assert pipe.is_dir()
    kubelet.unprepare([("default", uid, "ts")])
    assert not pipe.exists() and not pipe.parent.exists()


def test_v1beta1_service(setup):
    store, agent, _ = setup
    claim = make_claim(store, "old", [("gpu", NODE, "gpu-0")])
    with grpc.insecure_channel(unix_target(agent.paths.dra_socket)) as channel:
        stub = dra_v1beta1_grpc.DRAPluginStub(channel)
        request = dra_v1beta1.NodePrepareResourcesRequest(
            claims=[dra_v1beta1.Claim(namespace="default", uid=claim.metadata.uid, name="old")]
        )
        response = stub.NodePrepareResources(request, timeout=10)
    (device,) = response.claims[claim.metadata.uid].devices
    assert device.device_name == "gpu-0" and device.pool_name == NODE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_driver_simulated_end_to_end(store, short_dir):
    stop, ready = threading.Event(), threading.Event()
    port = _free_port()
    root, cdi = short_dir / "kubelet", short_dir / "cdi"
    thread = threading.Thread(
        target=run_driver,
        args=(store, GPU, "sim-1", "simulated", "h100x8", root, cdi, port, stop),
        kwargs={"ready": ready, "resync_seconds": 0.2, "sample_seconds": 0.2},
    )
    thread.start()
    try:
        assert ready.wait(20)
        (s,) = list_slices(store, GPU, "sim-1")
        assert len(s.spec.devices) == 8 and s.metadata.owner_references[0].kind == "Node"
        rv = store.resource_version()
        time.sleep(0.6)  # a few resyncs of an unchanged inventory: no writes
        assert store.resource_version() == rv
        store.delete(ResourceSlice, s.name)  # e.g. the kubelet wiped it: it comes back
        deadline = time.monotonic() + 10
        while not list_slices(store, GPU, "sim-1") and time.monotonic() < deadline:
            time.sleep(0.05)
        (back,) = list_slices(store, GPU, "sim-1")
        assert back.spec.pool.generation == 2
        claim = make_claim(store, "sim", [("gpu", "sim-1", "gpu-2")])
        with KubeletClient(
            PluginPaths.for_driver(GPU, root).registration_socket, timeout=10
        ) as kubelet:
            kubelet.register()
            answer = kubelet.prepare([("default", claim.metadata.uid, "sim")])
        assert answer.claims[claim.metadata.uid].error == ""
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'kubedra_driver_published_devices{driver="gpu.nvidia.com",node="sim-1"} 8.0' in body
        assert 'kubedra_driver_prepared_claims{driver="gpu.nvidia.com",node="sim-1"} 1.0' in body
        assert "kubedra_driver_claim_operation_duration_seconds_bucket" in body
        # The held device's figures follow its claim: busy, labelled with the claim.
        held = 'claim="sim",device="gpu-2"'
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            busy = [line for line in body.splitlines()
                    if line.startswith("kubedra_device_utilization_ratio{") and held in line]  # fmt: skip
            if busy and float(busy[0].rsplit(" ", 1)[1]) > 0.5:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"no busy series for gpu-2:\n{body}")
        series = [line for line in body.splitlines() if line.startswith("kubedra_device_utilization_ratio{")]
        assert len(series) == 8
    finally:
        stop.set()
        thread.join(20)
    assert not thread.is_alive()
    assert not PluginPaths.for_driver(GPU, root).dra_socket.exists()
    assert cleanup(store, GPU, "sim-1", root, cdi) == 1
    assert list_slices(store, GPU, "sim-1") == []
    assert not (root / "plugins" / GPU).exists() and list(cdi.glob("*.json")) == []


def test_run_driver_bad_inputs(store, short_dir):
    stop = threading.Event()
    with pytest.raises(ValueError, match=r"has no devices of driver 'tpu\.google\.com'"):
        run_driver(
            store, "tpu.google.com", "n", "simulated", "h100x8", short_dir, short_dir, None, stop
        )
    with pytest.raises(ValueError, match="unknown profile"):
        run_driver(store, GPU, "n", "simulated", "nope", short_dir, short_dir, None, stop)
    with pytest.raises(ValueError, match="unknown backend"):
        run_driver(store, GPU, "n", "cuda", None, short_dir, short_dir, None, stop)


def test_cleanup_removes_temporaries_but_not_other_producers_files(store, agent, short_dir):
    claim = make_claim(store, "c", [("gpu", NODE, "gpu-0")])
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()
        assert (
            kubelet.prepare([("default", claim.metadata.uid, "c")]).claims[claim.metadata.uid].error
            == ""
        )
    agent.stop()
    ours = agent.cdi / f".k8s.gpu.nvidia.com-claim_{claim.metadata.uid}.json.q1w2.tmp"
    ours.write_text("{")
    theirs = [agent.cdi / "spec.4711.tmp", agent.cdi / "k8s.other.example.com-claim_x.json"]
    for path in theirs:
        path.write_text("{}")
    (agent.paths.plugin_dir / ".checkpoint.json.a1b2.tmp").write_text("{")
    cleanup(store, GPU, NODE, agent.root, agent.cdi)
    assert sorted(agent.cdi.iterdir()) == sorted(theirs)
    assert not agent.paths.plugin_dir.exists()
