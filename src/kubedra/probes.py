"""The HTTP endpoints of kubedra's long-running components (the node driver, the
scheduler): Prometheus `/metrics` and one path per health check, as kubelet probes and
Prometheus expect them (a check answers 200 `ok`, or 503 and the problem)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], "str | None"]  # a problem, or None when all is well


class ProbeServer:
    """Serves a registry and checks on a background thread until `shutdown`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def serve(self, port: int, addr: str = "0.0.0.0", checks: Mapping[str, Check] = {}) -> int:
        """Serve on `port` (0 = any free port); returns the port."""
        server = ThreadingHTTPServer((addr, port), _handler(self.registry, dict(checks)))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
        self._thread.start()
        return int(server.server_port)

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _handler(registry: CollectorRegistry, checks: dict[str, Check]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path in checks:
                problem = checks[path]()
                body = f"{problem}\n" if problem else "ok\n"
                self._answer(503 if problem else 200, body.encode(), "text/plain")
            else:
                self._answer(404, b"not found\n", "text/plain")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds: not worth a log line each

    return Handler
