"""The API client keeps the connections its threads use at once: a scheduler binds from 16
threads while about ten watches hold a connection each, and a connection the pool cannot
keep is closed, so the next request pays a new TCP and TLS handshake (on both sides: the
API server's CPU too). Tested against a real HTTP/1.1 server that counts connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kubedra.cluster.kubeconfig import ClusterConfig, Credentials
from kubedra.cluster.rest import ApiClient, Request

AT_ONCE = 32  # more than a scheduler's binders and watches together
HOLD_S = 0.3  # each answer waits, so the requests of a round overlap


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    connections = 0

    def process_request(self, request: object, client_address: object) -> None:
        self.connections += 1  # one per accepted TCP connection
        super().process_request(request, client_address)  # type: ignore[arg-type]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def do_GET(self) -> None:
        time.sleep(HOLD_S)
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _round(client: ApiClient) -> None:
    about = Request("list", "namespaces")
    threads = [
        threading.Thread(target=client.request, args=("GET", "/api/v1/namespaces", about))
        for _ in range(AT_ONCE)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_connections_used_at_once_are_kept_for_the_next_requests(server: _Server) -> None:
    host, port = server.server_address[:2]
    client = ApiClient(ClusterConfig(f"http://{host!s}:{port}", Credentials()), qps=0)
    try:
        _round(client)
        assert server.connections == AT_ONCE  # they did overlap
        _round(client)
        _round(client)
        assert server.connections == AT_ONCE  # and every one was reused
    finally:
        client.close()
