"""The dashboard's server over real HTTP on loopback: routes, safety, live events."""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubedra.cluster import SqliteStore
from kubedra.web.api import PAGES, ROUTES
from kubedra.web.server import Server
from tests.scheduler.cluster import gpu_node, gpu_pod, gpu_template


def request(server: Server, path: str, method: str = "GET", host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    address, port = server.bound
    conn = http.client.HTTPConnection(address, port, timeout=10)
    headers = {"Host": host} if host is not None else {}
    conn.request(method, path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def get_json(server: Server, path: str) -> Any:
    status, _, body = request(server, path)
    assert status == 200, body
    return json.loads(body)


def test_page_static_files_and_api_index(server: Server) -> None:
    status, headers, body = request(server, "/")
    assert status == 200 and b'<script src="/static/app.js"' in body
    assert headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        status, headers, body = request(server, f"/static/{name}")
        assert status == 200 and headers["Content-Type"].startswith(kind) and body
    assert get_json(server, "/api") == {"routes": ROUTES, "pages": PAGES}


def test_every_documented_view_answers_json(server: Server, store: SqliteStore) -> None:
    gpu_template(store, "one", 1)
    gpu_pod(store, "p", template="one")
    deadline = time.monotonic() + 10
    while get_json(server, "/api/pods")["pods"] == [] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert get_json(server, "/api/status") == {
        "version": server.app.mirror.version, "backend": "test", "error": None, "readOnly": True}
    assert get_json(server, "/api/fleet")["summary"]["devices"] == 4
    assert get_json(server, "/api/fleet?class=gpu")["summary"]["admitted"] == 4
    assert get_json(server, "/api/claims")["claims"] == []
    assert [p["name"] for p in get_json(server, "/api/pending")["pods"]] == ["p"]
    assert get_json(server, "/api/pending/default/p")["groups"][0]["fits"] is True
    fragmentation = get_json(server, "/api/fragmentation")
    assert fragmentation["now"]["accelerators"] == 4
    assert fragmentation["figures"] == [{"name": "run-allocation.png", "title": "run · allocation"}]
    assert request(server, "/figures/run-allocation.png")[2] == b"\x89PNG fake"


@pytest.mark.parametrize(("path", "status"), [
    ("/nope", 404),
    ("/api/nope", 404),
    ("/api/claims/default/missing", 404),
    ("/api/fleet/extra", 404),
    ("/api/claims/a/b/c", 404),
    ("/api/pending?limit=lots", 400),
    ("/static/../api.py", 404),
    ("/static/api.py", 404),
    ("/figures/../secret.png", 404),
    ("/figures/%2e%2e%2fsecret.png", 404),
    ("/figures/missing.png", 404),
])
def test_errors_are_json_with_a_message(server: Server, path: str, status: int) -> None:
    got, headers, body = request(server, path)
    assert got == status, body
    if status != 200:
        assert headers["Content-Type"] == "application/json" and json.loads(body)["error"]
    assert b"TOP-SECRET-BYTES" not in body


def test_it_is_read_only(server: Server, store: SqliteStore) -> None:
    before = store.resource_version()
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        status, headers, body = request(server, "/api/claims", method)
        assert status == 405 and json.loads(body) == {"error": "the web UI is read-only"}
        assert headers["Allow"] == "GET, HEAD"
    assert store.resource_version() == before


def test_a_foreign_host_header_is_refused(server: Server) -> None:
    """A page on another site that rebinds its name to 127.0.0.1 cannot read the API."""
    port = server.bound[1]
    assert request(server, "/api/status", host=f"evil.example:{port}")[0] == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        assert request(server, "/api/status", host=host)[0] == 200


def read_events(server: Server, seconds: float) -> Iterator[tuple[float, str, dict[str, int]]]:
    """(time, event, data) of the SSE stream for `seconds`."""
    address, port = server.bound
    with socket.create_connection((address, port), timeout=0.2) as s:
        s.sendall(f"GET /api/events HTTP/1.1\r\nHost: {address}:{port}\r\n\r\n".encode())
        buffer, deadline = b"", time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                return
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                lines = dict(line.split(": ", 1) for line in block.decode().splitlines()
                             if line.startswith(("event", "data")))
                if "event" in lines:
                    yield time.monotonic(), lines["event"], json.loads(lines["data"])


def test_changes_stream_live_and_a_burst_is_coalesced(server: Server, store: SqliteStore) -> None:
    def burst() -> None:
        time.sleep(0.5)
        for i in range(40):  # 40 writes within about a second
            gpu_node(store, f"burst-{i}", gpus=1)
            time.sleep(0.025)

    writer = threading.Thread(target=burst)
    writer.start()
    events = list(read_events(server, 4.5))
    writer.join()
    names = [e for _, e, _ in events]
    assert names[0] == "hello"
    changes = [(t, d["version"]) for t, e, d in events if e == "change"]
    assert 1 <= len(changes) <= 4, changes  # 80 watch events in ~1 s: at most one a second
    assert all(b[0] - a[0] >= 0.95 for a, b in itertools.pairwise(changes))
    assert changes[-1][1] == server.app.mirror.version  # the last one brings everything
    assert get_json(server, "/api/fleet")["summary"]["nodes"] == 41


def test_views_follow_the_store_without_a_restart(server: Server, store: SqliteStore) -> None:
    assert get_json(server, "/api/fleet")["summary"]["nodes"] == 1
    gpu_node(store, "n2", gpus=2)
    deadline = time.monotonic() + 10
    while get_json(server, "/api/fleet")["summary"]["nodes"] != 2:
        assert time.monotonic() < deadline, "the new node never reached the view"
        time.sleep(0.05)
    assert get_json(server, "/api/fleet")["summary"]["devices"] == 6
