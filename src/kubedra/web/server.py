"""The HTTP server: the stdlib's threading server, GET only, with server-sent events.

Chosen by measurement (docs/decisions.md): it serves a cached view as fast as aiohttp and
faster than uvicorn + Starlette here, imports in a third of their time and adds no
dependency. One thread per connection suits a dashboard: a few viewers, each with one
event stream. Safe by default: it binds to loopback, answers GET and HEAD only (the UI is
read-only), refuses a Host header that is not the address it serves (a DNS-rebinding page
cannot read it), and sends a strict Content-Security-Policy (no inline script, nothing
from elsewhere) so a hostile object name cannot run as script even if it reached the page.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import msgspec

from kubedra.web.api import App, Response, error

log = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet stream (proxies drop idle ones)


class Server:
    """`kubedra ui`'s server: `App` over HTTP, the history sampled in the background."""

    def __init__(
        self, app: App, host: str = "127.0.0.1", port: int = 8080, min_interval: float = 1.0
    ) -> None:
        self.app = app
        self.min_interval = min_interval  # at most one change event a second per stream
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def bound(self) -> tuple[str, int]:
        """The address and port listened on (the port the system chose for port 0)."""
        host, port = self.httpd.server_address[:2]
        return (host if isinstance(host, str) else bytes(host).decode()), int(port)

    @property
    def url(self) -> str:
        host, port = self.bound
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    @property
    def allowed_hosts(self) -> set[str]:
        """Host headers accepted: the bound address, and localhost when on loopback."""
        host, port = self.bound
        names = {host, f"[{host}]"}
        if _is_loopback(host):
            names |= {"localhost", "127.0.0.1", "[::1]"}
        return names | {f"{n}:{port}" for n in names}

    def start(self) -> Server:
        for target in (self.httpd.serve_forever, self._sample):
            thread = threading.Thread(target=target, daemon=True, name=f"ui-{target.__name__}")
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _sample(self) -> None:
        """Record fragmentation history whenever the cluster changes, at most every
        history interval."""
        mirror, seen = self.app.mirror, -1
        while not self.stopping.is_set():
            version = mirror.wait(seen, timeout=1.0)
            if version == seen:
                continue
            try:
                self.app.sample_history()
            except Exception:  # a view bug must not stop the sampler: it is logged
                log.exception("fragmentation sample failed")
            seen = version
            self.stopping.wait(self.app.history.interval)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body leave at once (no 40 ms stall)
        server_version = "kubedra-ui"

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s " + format, self.address_string(), *args)

        def do_GET(self) -> None:
            self._answer(send_body=True)

        def do_HEAD(self) -> None:
            self._answer(send_body=False)

        def _refuse(self) -> None:
            self._send(error(HTTPStatus.METHOD_NOT_ALLOWED, "the web UI is read-only"), True)

        do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

        def _answer(self, send_body: bool) -> None:
            host = self.headers.get("Host", "")
            if host not in server.allowed_hosts:
                self._send(error(HTTPStatus.MISDIRECTED_REQUEST, f"unexpected Host {host!r}"))
                return
            url = urlsplit(self.path)
            query = dict(parse_qsl(url.query))
            if url.path == "/api/events":
                self._events()
                return
            self._send(server.app.get(url.path, query), send_body)

        def _send(self, response: Response, send_body: bool = True) -> None:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for name, value in {**SECURITY_HEADERS, **response.headers}.items():
                self.send_header(name, value)
            self.end_headers()
            if send_body:
                self.wfile.write(response.body)

        def _events(self) -> None:
            """`change` events as the cluster changes, coalesced to one per min_interval."""
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            for name, value in SECURITY_HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            self.close_connection = True
            mirror, sent_at = server.app.mirror, 0.0
            seen = mirror.version
            try:
                self._event("hello", {"version": seen})
                while not server.stopping.is_set() and not mirror.stopped:
                    version = mirror.wait(seen, KEEPALIVE)
                    if version == seen:
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                        continue
                    pause = sent_at + server.min_interval - time.monotonic()
                    if pause > 0 and server.stopping.wait(pause):
                        return
                    seen = mirror.version  # everything that arrived during the pause
                    self._event("change", {"version": seen})
                    sent_at = time.monotonic()
            except (BrokenPipeError, ConnectionResetError):
                return  # the page went away

        def _event(self, name: str, data: Mapping[str, object]) -> None:
            payload = msgspec.json.encode(data)
            self.wfile.write(b"event: %s\ndata: %s\n\n" % (name.encode(), payload))
            self.wfile.flush()

    return Handler
