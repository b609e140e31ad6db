"""The plugin's sockets under hostile or careless traffic: random gRPC bodies, connections that
do not speak HTTP/2, many kubelet threads at once. The driver must answer or refuse each,
never raise from its own code, never touch files outside its directories, and keep serving."""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from pathlib import Path

import grpc
import pytest

from kubedra.driver.grpc_api import dra_v1
from kubedra.driver.kubelet import KubeletClient, unix_target

from .conftest import NODE, make_claim
from .driverproc import disk_problems

FUZZ_BODIES = 2000
RAW_CONNECTIONS = 300
THREADS = 12
DRA = "/k8s.io.kubelet.pkg.apis.dra.{}.DRAPlugin/{}"
NASTY = [
    "",
    "..",
    "../../victim",
    "x/../../victim",
    "/etc/passwd",
    "\x00",
    "é" * 40,
    "\U0001f4a5",
    "a" * 70_000,
    "default",
    "0b7a3c52-8f1e-4c6b-9d2a-6e5f4a3b2c1d",
    "0B7A3C52-8F1E-4C6B-9D2A-6E5F4A3B2C1D",
]


def _nasty_string(rng: random.Random, uids: list[str]) -> str:
    choice = rng.random()
    if choice < 0.4:
        return rng.choice(NASTY)
    if choice < 0.7:
        return rng.choice(uids)
    alphabet = "abcdef0123456789-./\\\x00\n é"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))


def _body(rng: random.Random, valid: bytes, uids: list[str]) -> bytes:
    """Random bytes, a mutated valid request, or a well-formed request of hostile strings."""
    kind = rng.random()
    if kind < 0.3:
        return rng.randbytes(rng.randint(0, 600))
    if kind < 0.6:
        data = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            op, at = rng.random(), rng.randrange(len(data) + 1)
            if op < 0.4 and data:
                data[at % len(data)] ^= 1 << rng.randrange(8)
            elif op < 0.7:
                data[at:at] = rng.randbytes(rng.randint(1, 16))
            else:
                del data[at : at + rng.randint(1, 16)]
        return bytes(data)
    claims = [
        dra_v1.Claim(
            namespace=_nasty_string(rng, uids),
            uid=_nasty_string(rng, uids),
            name=_nasty_string(rng, uids),
        )
        for _ in range(rng.randint(0, 6))
    ]
    return bytes(dra_v1.NodePrepareResourcesRequest(claims=claims).SerializeToString())


@pytest.fixture
def served(store, agent, short_dir):
    """An agent with three prepared-able claims and a canary file beside its directories."""
    claims = [make_claim(store, f"c{i}", [("gpu", NODE, f"gpu-{i}")]) for i in range(3)]
    canary = short_dir / "victim.json"
    canary.write_text("{}")
    (agent.cdi / "k8s.gpu.nvidia.com-claim_x").mkdir(parents=True)  # helps `x/../..` escape
    return agent, claims, canary


def _unexpected(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.exc_info or r.levelno >= logging.ERROR]


def _outside(root: Path, agent) -> list[str]:
    """Every path below `root` that is not in the driver's plugin or CDI directory."""
    mine = (agent.paths.plugin_dir, agent.cdi)
    return sorted(
        str(p) for p in root.rglob("*") if not any(p == d or d in p.parents for d in mine)
    )


def test_random_grpc_bodies(served, driver_log, short_dir):
    agent, claims, canary = served
    outside = _outside(short_dir, agent)
    rng = random.Random(2000)
    uids = [c.metadata.uid for c in claims]
    valid = dra_v1.NodePrepareResourcesRequest(
        claims=[dra_v1.Claim(namespace="default", uid=uids[0], name="c0")]
    ).SerializeToString()
    methods = [
        (agent.paths.dra_socket, DRA.format(v, m))
        for v in ("v1", "v1beta1")
        for m in ("NodePrepareResources", "NodeUnprepareResources")
    ] + [
        (agent.paths.registration_socket, "/pluginregistration.Registration/GetInfo"),
        (
            agent.paths.registration_socket,
            "/pluginregistration.Registration/NotifyRegistrationStatus",
        ),
    ]
    codes: dict[str, int] = {}
    channels = {path: grpc.insecure_channel(unix_target(path)) for path, _ in methods}
    try:
        for _ in range(FUZZ_BODIES):
            path, method = rng.choice(methods)
            call = channels[path].unary_unary(method)  # raw bytes both ways
            try:
                call(_body(rng, valid, uids), timeout=10)
                code = "OK"
            except grpc.RpcError as err:
                code = err.code().name
            codes[code] = codes.get(code, 0) + 1
    finally:
        for channel in channels.values():
            channel.close()
    # OK, or INTERNAL when the body does not decode: never a hang, never UNAVAILABLE
    assert set(codes) <= {"OK", "INTERNAL"} and codes["OK"] > FUZZ_BODIES / 3, codes
    assert _unexpected(driver_log) == []
    assert canary.read_text() == "{}" and _outside(short_dir, agent) == outside
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()
        answer = kubelet.prepare([("default", u, f"c{i}") for i, u in enumerate(uids)])
    assert all(answer.claims[u].error == "" for u in uids)
    assert disk_problems(agent.paths.plugin_dir, agent.cdi, NODE)[1] == []


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_raw_connections_that_do_not_speak_http2(served, driver_log):
    agent, claims, _ = served
    rng = random.Random(300)
    payloads = [
        b"",
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(32),  # a TLS ClientHello
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 64,  # the preface, then junk frames
        b"PRI * HTTP/2.0\r\n",  # half a preface, then silence
    ]
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()  # the client side's own descriptors are part of the baseline
    baseline = _open_fds()
    held: list[socket.socket] = []
    for i in range(RAW_CONNECTIONS):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(2)
        conn.connect(str(agent.paths.dra_socket if i % 2 else agent.paths.registration_socket))
        payload = payloads[i % len(payloads)] if i % 3 else rng.randbytes(rng.randint(1, 300))
        try:
            conn.sendall(payload)
            if i % 10 == 0:
                held.append(conn)  # some stay open while the others come and go
                continue
            conn.recv(1024)
        except (TimeoutError, OSError):
            pass
        conn.close()
    with KubeletClient(agent.paths.registration_socket, timeout=10) as kubelet:
        kubelet.register()  # served while 30 broken connections are still open
        uid = claims[0].metadata.uid
        assert kubelet.prepare([("default", uid, "c0")]).claims[uid].error == ""
    for conn in held:
        conn.close()
    deadline = time.monotonic() + 10
    while _open_fds() > baseline + 5 and time.monotonic() < deadline:
        time.sleep(0.1)  # the server closes connections asynchronously
    assert _open_fds() <= baseline + 5  # it let go of every broken connection
    assert _unexpected(driver_log) == []


def test_concurrent_prepares_from_12_threads(served, driver_log, store):
    agent, _, _ = served
    own = [make_claim(store, f"t{i}", [("gpu", NODE, f"gpu-{i % 8}")]) for i in range(THREADS)]
    shared = make_claim(store, "shared", [("gpu", NODE, "gpu-7"), ("gpu", NODE, "gpu-6")])
    answers: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    errors: list[str] = []
    barrier = threading.Barrier(THREADS)

    def kubelet_thread(i: int) -> None:
        mine = ("default", own[i].metadata.uid, f"t{i}")
        both = [mine, ("default", shared.metadata.uid, "shared")]
        with KubeletClient(agent.paths.registration_socket, timeout=30) as kubelet:
            kubelet.register()
            barrier.wait()
            for round_ in range(15):
                answer = kubelet.prepare(both)
                for _, uid, _ in both:
                    entry = answer.claims[uid]
                    errors.extend([entry.error] if entry.error else [])
                    devices = tuple((d.device_name, d.cdi_device_ids[0]) for d in entry.devices)
                    answers.setdefault(uid, set()).add(devices)
                if round_ < 14:
                    error = kubelet.unprepare([mine]).claims[mine[1]].error
                    errors.extend([error] if error else [])

    threads = [threading.Thread(target=kubelet_thread, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert all(len(variants) == 1 for variants in answers.values())  # one answer per claim
    assert len(answers) == THREADS + 1
    claims, problems = disk_problems(agent.paths.plugin_dir, agent.cdi, NODE)
    assert problems == [] and sorted(claims) == sorted(answers)
    assert _unexpected(driver_log) == []
