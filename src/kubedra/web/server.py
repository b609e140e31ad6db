"""The HTTP server: aiohttp's low-level server, GET and HEAD only, with server-sent events.

Chosen by measurement (docs/decisions.md): attacked from the same machine, the stdlib's
server parsed a refused request's body as the next request, dropped connections past a
backlog of 5, held a thread per half-sent request forever and printed a traceback for each
when it left, and closed on a `*` target without an answer. aiohttp holds those cases by
configuration: the backlog is ours to set, an idle timeout runs from the connection's first
byte (a request whose headers never end is closed), the request line and headers have
limits, parse errors get a 400, there is no thread per connection (200 event streams are
200 coroutines), and its shutdown waits for the views in flight. What stays ours: a refused
request closes its connection, HEAD on the stream sends headers only, the streams end at
`stop`.

It runs on an event loop of its own thread, so callers (`kubedra ui`, tests, benchmarks)
keep a blocking `start`/`stop`. Views are blocking code (`App.get`, which computes a view
under a lock) and run in a small thread pool; event streams wait on the loop, woken by one
thread that follows the mirror (and the device metrics' scrapes, if any: a `metrics` event
after each round, which the pages showing them follow). Safe by default: it binds to
loopback, answers GET and HEAD only (the UI is read-only) and closes the connection of any
refused request, refuses a Host header that is not the address it serves (a DNS-rebinding
page cannot read it), and sends a strict Content-Security-Policy (no inline script or
style, nothing from elsewhere) so a hostile object name cannot run as script even if it
reached the page unescaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from urllib.parse import parse_qsl

import msgspec
from aiohttp import hdrs, web
from aiohttp.http_exceptions import HttpProcessingError

from kubedra.web.api import App, Response, error
from kubedra.web.devicemetrics import Scraper
from kubedra.web.mirror import Mirror

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
IDLE_TIMEOUT = 15.0  # seconds a connection may wait for a whole request (first or next)
BACKLOG = 1024  # connections the kernel queues before they are accepted (tabs reconnecting)
SHUTDOWN_TIMEOUT = 5.0  # seconds `stop` waits for the views in flight
VIEW_THREADS = 4  # views compute one at a time (App's lock); static files need no lock
READ_ONLY = ("GET", "HEAD")


class Server:
    """`kubedra ui`'s server: `App` over HTTP, the history sampled in the background."""

    def __init__(
        self,
        app: App,
        host: str = "127.0.0.1",
        port: int = 8080,
        min_interval: float = 1.0,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.app = app
        self.min_interval = min_interval  # at most one change event a second per stream
        self.stopping = threading.Event()
        self.idle_timeout = idle_timeout
        self._socket = _listen(host, port)  # OSError here: the port is taken or not ours
        self._loop = asyncio.new_event_loop()
        self._pool = ThreadPoolExecutor(VIEW_THREADS, thread_name_prefix="ui-view")
        self._changes = _Changes(app.mirror, self._loop, app.device_metrics)
        self._runner: web.ServerRunner | None = None
        self._threads: list[threading.Thread] = []

    @property
    def bound(self) -> tuple[str, int]:
        """The address and port listened on (the port the system chose for port 0)."""
        host, port = self._socket.getsockname()[:2]
        return str(host), int(port)

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
        """Serve from a thread of its own: the loop never runs in the caller's thread,
        which may have a loop of its own (Playwright's sync API in the browser tests)."""
        self._spawn(self._loop.run_forever, "ui-loop")
        ready = asyncio.run_coroutine_threadsafe(self._setup(), self._loop)
        self._runner = ready.result(timeout=10)
        self._spawn(self._changes.follow, "ui-changes")
        self._spawn(self._sample, "ui-sample")
        return self

    def stop(self) -> None:
        """End the event streams, stop listening, let the views in flight finish (at most
        SHUTDOWN_TIMEOUT), close every connection, then the loop and the threads. Once."""
        if self._loop.is_closed():
            return
        self.stopping.set()
        if self._runner is not None and self._loop.is_running():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            done.result(timeout=SHUTDOWN_TIMEOUT + 5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        for thread in self._threads:
            thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._loop.close()
        self._socket.close()

    def _spawn(self, target: Callable[[], object], name: str) -> None:
        thread = threading.Thread(target=target, daemon=True, name=name)
        thread.start()
        self._threads.append(thread)

    async def _setup(self) -> web.ServerRunner:
        server = web.Server(
            self._handle,
            keepalive_timeout=self.idle_timeout,  # also runs from the connection's first byte
            access_log=None,
            logger=_HTTP_LOG,
        )
        runner = web.ServerRunner(server, shutdown_timeout=SHUTDOWN_TIMEOUT)
        await runner.setup()
        await web.SockSite(runner, self._socket, backlog=BACKLOG).start()
        return runner

    async def _shutdown(self) -> None:
        self._changes.close()
        if self._runner is not None:
            await self._runner.cleanup()

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

    # --- requests (on the loop) -----------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        path, _, query = request.raw_path.partition("?")
        if path == "/api/events":
            return await self._events(request)
        answer = await self._loop.run_in_executor(
            self._pool, self.app.get, path, dict(parse_qsl(query))
        )
        return _reply(answer)

    def _refusal(self, request: web.BaseRequest) -> web.Response | None:
        """The answer to a request this server does not serve, or None. A refused
        request's connection is closed after the answer: its body is never read, so it
        cannot be taken for the next request."""
        host = request.headers.get(hdrs.HOST, "")
        if host not in self.allowed_hosts:
            refused = _reply(error(HTTPStatus.MISDIRECTED_REQUEST, f"unexpected Host {host!r}"))
        elif request.method not in READ_ONLY:
            refused = _reply(error(HTTPStatus.METHOD_NOT_ALLOWED, "the web UI is read-only"))
            refused.headers[hdrs.ALLOW] = ", ".join(READ_ONLY)
        else:
            return None
        refused.force_close()
        return refused

    async def _events(self, request: web.BaseRequest) -> web.StreamResponse:
        """`change` events as the cluster changes, `metrics` events after each round of
        device metrics, coalesced to one per min_interval (HEAD: the headers alone)."""
        headers = {hdrs.CONTENT_TYPE: "text/event-stream", **SECURITY_HEADERS}
        if request.method == "HEAD":
            return web.Response(headers=headers)
        stream = web.StreamResponse(headers=headers)
        await stream.prepare(request)
        changes, sent_at = self._changes, 0.0
        seen, rounds = changes.version, changes.rounds
        with contextlib.suppress(ConnectionError):  # the page went away
            await _event(stream, "hello", {"version": seen})
            while not changes.closed:
                await changes.wait(seen, rounds, KEEPALIVE)
                if changes.closed:
                    break
                if (changes.version, changes.rounds) == (seen, rounds):
                    await stream.write(b": keep-alive\n\n")
                    continue
                if await changes.closed_within(sent_at + self.min_interval - self._loop.time()):
                    break
                # everything that arrived during the pause; a change refreshes the figures too
                changed = changes.version != seen
                seen, rounds = changes.version, changes.rounds
                if changed:
                    await _event(stream, "change", {"version": seen})
                else:
                    await _event(stream, "metrics", {"version": seen, "round": rounds})
                sent_at = self._loop.time()
        return stream


class _Changes:
    """The mirror's version and the device metrics' round for the event streams: one thread
    waits on the mirror (a blocking condition) and wakes every stream on the loop, instead
    of a thread each."""

    def __init__(
        self, mirror: Mirror, loop: asyncio.AbstractEventLoop, scraper: Scraper | None = None
    ) -> None:
        self.mirror = mirror
        self.loop = loop
        self.scraper = scraper
        self.version = mirror.version
        self.rounds = scraper.generation if scraper is not None else 0
        self.closed = False
        self._changed = asyncio.Event()
        self._closed = asyncio.Event()

    def follow(self) -> None:
        """Publish each new version (and scrape round) on the loop until `close` (or the
        mirror stops). A round is noticed within the wait's timeout."""
        seen, rounds = self.version, self.rounds
        while not self.closed and not self.mirror.stopped:
            version = self.mirror.wait(seen, timeout=0.25)  # how soon `stop` is noticed
            now = self.scraper.generation if self.scraper is not None else 0
            if (version, now) != (seen, rounds):
                seen, rounds = version, now
                self.loop.call_soon_threadsafe(self._publish, version, now)
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self.loop.call_soon_threadsafe(self.close)

    def close(self) -> None:
        """Every stream ends (on the loop)."""
        self.closed = True
        self._closed.set()
        self._changed.set()

    async def wait(self, seen: int, rounds: int, timeout: float) -> None:
        """Return once the version is past `seen` or the round past `rounds`, or after
        `timeout` seconds, or at close."""
        if (self.version, self.rounds) == (seen, rounds) and not self.closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    async def closed_within(self, seconds: float) -> bool:
        """Sleep `seconds` unless closed meanwhile; whether it is closed."""
        if seconds > 0 and not self.closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), seconds)
        return self.closed

    def _publish(self, version: int, rounds: int) -> None:
        self.version, self.rounds = version, rounds
        self._changed.set()
        self._changed = asyncio.Event()


class _ClientErrors(logging.Filter):
    """aiohttp logs each malformed request it has answered with a 400 as an error with a
    traceback: the client's mistake, already answered, is not worth a traceback on stderr.
    Anything else it logs (an exception in a view) still goes through."""

    def filter(self, record: logging.LogRecord) -> bool:
        failure = record.exc_info[1] if record.exc_info else None
        return not isinstance(failure, HttpProcessingError)


_HTTP_LOG = logging.getLogger(f"{__name__}.http")
_HTTP_LOG.addFilter(_ClientErrors())


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket (not `socket.create_server`: its errors repeat the address)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _reply(response: Response) -> web.Response:
    headers = {hdrs.CONTENT_TYPE: response.content_type, **SECURITY_HEADERS, **response.headers}
    return web.Response(status=response.status, body=response.body, headers=headers)


async def _event(stream: web.StreamResponse, name: str, data: Mapping[str, object]) -> None:
    payload = msgspec.json.encode(data)
    await stream.write(b"event: %s\ndata: %s\n\n" % (name.encode(), payload))
