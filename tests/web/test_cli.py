"""`kubedra ui` as a user runs it: it serves, stops on Ctrl-C, and bad options fail cleanly."""

from __future__ import annotations

import json
import signal
import socket
import urllib.request
from pathlib import Path

import pytest

from tests.cli.test_lint import kubedra
from tests.web.conftest import UiProcess


def test_ui_serves_the_store_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    assert kubedra("--store", str(store), "cluster", "create", "--node-profile", "l4x4=1").returncode == 0
    ui = UiProcess("--store", str(store))
    assert ui.url.startswith("http://127.0.0.1:")  # loopback unless told otherwise
    with urllib.request.urlopen(ui.url + "api/fleet", timeout=10) as answer:
        assert json.load(answer)["summary"] == {
            "nodes": 1, "devices": 4, "free": 4, "allocated": 0, "shared": 0, "blocked": 0,
            "tainted": 0, "unhealthy": 0, "admitted": 0,
            "accelerators": {"total": 4, "gpu": 4, "tpu": 0, "allocated": 0, "partial": 0, "free": 4, "tainted": 0,
                             "unhealthy": 0},
            "partitionsInUse": 0, "partitionable": 0, "nics": {"total": 0, "inUse": 0}}
    with urllib.request.urlopen(ui.url, timeout=10) as page:  # the page itself, whole
        html = page.read().decode()
        assert "l4x4-0" in html and '<b>4</b> accelerators (4 GPUs)' in html
    ui.process.send_signal(signal.SIGINT)
    assert ui.wait(20) == 0
    assert ui.process.stderr is not None and "Traceback" not in ui.process.stderr.read()


@pytest.mark.parametrize(
    ("sigint_ignored", "sent"),
    [(True, signal.SIGINT), (False, signal.SIGTERM)],
    ids=["ctrl-c-in-a-background-job", "sigterm"],
)
def test_ui_stops_cleanly_on_either_signal(
    tmp_path: Path, sigint_ignored: bool, sent: signal.Signals
) -> None:
    """A shell's background job starts with SIGINT ignored, and a pod is stopped by
    SIGTERM: the UI stops cleanly (status 0, its threads stopped) on both."""
    store = tmp_path / "state.db"
    assert kubedra("--store", str(store), "cluster", "create", "--node-profile", "l4x4=1").returncode == 0
    ui = UiProcess("--store", str(store), sigint_ignored=sigint_ignored)
    ui.process.send_signal(sent)
    assert ui.wait(20) == 0
    assert ui.process.stderr is not None and "Traceback" not in ui.process.stderr.read()


def test_hostile_clients_leave_no_traceback_on_stderr(tmp_path: Path) -> None:
    """Half-sent requests whose clients leave, a `*` target, an over-long URL, too many
    headers: each is answered or dropped quietly (the stdlib's server printed a traceback
    per client that left), and the UI still serves and stops cleanly."""
    store = tmp_path / "state.db"
    assert kubedra("--store", str(store), "cluster", "create", "--node-profile", "l4x4=1").returncode == 0
    ui = UiProcess("--store", str(store))
    address = ui.url.removeprefix("http://").rstrip("/")
    host, port = address.rsplit(":", 1)
    hostile = [
        f"GET /api/status HTTP/1.1\r\nHost: {address}\r\nX-Slow: ",
        f"GET * HTTP/1.1\r\nHost: {address}\r\n\r\n",
        f"GET /api/status?{'a' * 100_000} HTTP/1.1\r\nHost: {address}\r\n\r\n",
        "GET /api/status HTTP/1.1\r\n" + "".join(f"X-{i}: v\r\n" for i in range(2000)) + "\r\n",
    ]
    for text in hostile * 50:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(text.encode())
    with urllib.request.urlopen(ui.url + "api/status", timeout=10) as answer:
        assert json.load(answer)["readOnly"] is True
    ui.process.send_signal(signal.SIGTERM)
    assert ui.wait(20) == 0
    assert ui.process.stderr is not None and "Traceback" not in ui.process.stderr.read()


def test_bad_backend_options_fail_with_one_line(tmp_path: Path) -> None:
    both = kubedra("--store", str(tmp_path / "s.db"), "--kubeconfig", str(tmp_path / "k"), "ui")
    assert both.returncode == 1 and both.stderr.startswith("error: --store names the embedded store")
    missing = kubedra("--kubeconfig", str(tmp_path / "nope.yaml"), "ui")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "Traceback" not in missing.stderr and "nope.yaml" in missing.stderr


def test_a_busy_port_fails_with_one_line(tmp_path: Path) -> None:
    store = tmp_path / "s.db"  # only commands that make a store make one; ui opens it first
    assert kubedra("--store", str(store), "cluster", "create", "--node-profile", "l4x4=1").returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = kubedra("--store", str(store), "ui", "--port", str(port))
    assert run.returncode == 1
    assert run.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
