"""The dashboard's server attacked from the same machine: what the stdlib's server failed.

Each test is one case of the measurement that replaced it (docs/decisions.md): a refused
request's body taken for the next request, connections dropped by a listen backlog of 5,
half-sent requests holding a thread each forever (and a traceback each when they left), a
`*` target answered by a closed connection, HEAD on the event stream sending the stream,
memory growing with every distinct query string, Python's int-digits message for a huge
`limit`, and 200 event streams with a shutdown while they are open.
"""

from __future__ import annotations

import json
import logging
import re
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from urllib.parse import quote

import pytest

from kubedra.cluster import SqliteStore
from kubedra.web.api import MAX_LIMIT, App
from kubedra.web.cache import MAX_ENTRIES, ResponseCache
from kubedra.web.mirror import Mirror
from kubedra.web.server import VIEW_THREADS, Server
from tests.scheduler.cluster import gpu_node


def statuses(data: bytes) -> list[int]:
    return [int(s) for s in re.findall(rb"^HTTP/1\.[01] (\d{3}) ", data, re.MULTILINE)]


def exchange(server: Server, data: bytes, seconds: float = 5.0) -> tuple[bytes, bool]:
    """Send `data` on a new connection: what came back, and whether the server closed it
    (False: still open after `seconds`)."""
    with socket.create_connection(server.bound, timeout=seconds) as s:
        s.sendall(data)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except TimeoutError:
            return got, False
        return got, True


def host(server: Server) -> str:
    address, port = server.bound
    return f"{address}:{port}"


@pytest.fixture
def quick_server(store: SqliteStore) -> Iterator[Server]:
    """A server that waits 1 s for a request (the default is 15 s)."""
    mirror = Mirror(store, idle=0.2).start()
    running = Server(App(mirror), port=0, idle_timeout=1.0).start()
    yield running
    running.stop()
    mirror.stop()


@pytest.mark.parametrize("refusal", ["foreign host", "method"])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_refused_requests_body_is_never_read_as_the_next_request(
    server: Server, refusal: str, framing: str
) -> None:
    """The stdlib's server answered 405 and then parsed the body as a request: a POST with
    a foreign Host whose body was a GET with the right Host got the fleet."""
    smuggled = f"GET /api/fleet HTTP/1.1\r\nHost: {host(server)}\r\n\r\n".encode()
    if framing == "chunked":
        body, length = b"%x\r\n%s\r\n0\r\n\r\n" % (len(smuggled), smuggled), "Transfer-Encoding: chunked"
    else:
        body, length = smuggled, f"Content-Length: {len(smuggled)}"
    sent_host = f"evil.example:{server.bound[1]}" if refusal == "foreign host" else host(server)
    method = "GET" if refusal == "foreign host" else "POST"
    head = f"{method} /api/status HTTP/1.1\r\nHost: {sent_host}\r\n{length}\r\n\r\n"
    got, closed = exchange(server, head.encode() + body)
    assert statuses(got) == [421 if refusal == "foreign host" else 405]
    assert closed and b'"summary"' not in got


def test_a_hundred_simultaneous_connections_are_queued_not_dropped(server: Server) -> None:
    """The stdlib's backlog of 5 dropped the connections past it: each waited for a SYN
    retransmission (1 s, then 3 s, ...): a median of 1 s and up to 28 s for 100."""
    selector = selectors.DefaultSelector()
    started = time.monotonic()
    for _ in range(100):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(server.bound)
        selector.register(s, selectors.EVENT_WRITE)
    connected = []
    while len(connected) < 100 and time.monotonic() - started < 10:
        for key, _ in selector.select(timeout=0.1):
            connected.append(time.monotonic() - started)
            selector.modify(key.fileobj, selectors.EVENT_READ)
    assert len(connected) == 100 and max(connected) < 0.9  # none waited for a retransmission
    request = f"GET /api/status HTTP/1.1\r\nHost: {host(server)}\r\nConnection: close\r\n\r\n"
    answers = []
    for key in list(selector.get_map().values()):
        s = key.fileobj
        assert isinstance(s, socket.socket)
        s.setblocking(True)
        s.settimeout(10)
        s.sendall(request.encode())
    for key in list(selector.get_map().values()):
        s = key.fileobj
        assert isinstance(s, socket.socket)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        answers.append(statuses(got))
        selector.unregister(s)
        s.close()
    assert answers == [[200]] * 100


def half_sent(server: Server, count: int) -> list[socket.socket]:
    """`count` connections, each with a request whose headers never end."""
    opened = []
    for _ in range(count):
        s = socket.create_connection(server.bound, timeout=10)
        s.sendall(f"GET /api/status HTTP/1.1\r\nHost: {host(server)}\r\nX-Slow: ".encode())
        opened.append(s)
    return opened


def closed_by_server(s: socket.socket, deadline: float) -> bool:
    s.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        while s.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def assert_quiet(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    """Nothing logged at WARNING or above, no traceback on stderr (a thread's own print)."""
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "Traceback" not in capfd.readouterr().err


def test_half_sent_and_idle_connections_are_closed_without_a_thread_each(
    quick_server: Server, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The stdlib's server held a thread per half-sent request, forever. Here a request
    has `idle_timeout` to arrive whole, from the first byte or after the last answer."""
    threads = threading.active_count()
    slow = half_sent(quick_server, 300)
    silent = socket.create_connection(quick_server.bound, timeout=10)  # sends nothing
    kept = HTTPConnection(*quick_server.bound, timeout=10)  # one answer, then idle
    kept.request("GET", "/api/status")
    assert kept.getresponse().read()
    assert threading.active_count() - threads <= VIEW_THREADS  # the views' pool, none per connection
    assert exchange(quick_server, f"GET /api/status HTTP/1.1\r\nHost: {host(quick_server)}\r\n"
                    "Connection: close\r\n\r\n".encode())[0].startswith(b"HTTP/1.1 200")
    deadline = time.monotonic() + 10
    assert all(closed_by_server(s, deadline) for s in [*slow, silent, kept.sock])  # type: ignore[list-item]
    for s in [*slow, silent]:
        s.close()
    kept.close()
    assert_quiet(caplog, capfd)


def test_clients_that_leave_mid_request_leave_no_traceback(
    server: Server, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The stdlib's server printed a BrokenPipe traceback for each half-sent request whose
    client left (299 of 300); here they go quietly and the server goes on."""
    for s in half_sent(server, 300):
        s.close()
    time.sleep(0.5)
    got, _ = exchange(server, f"GET /api/status HTTP/1.1\r\nHost: {host(server)}\r\n"
                      "Connection: close\r\n\r\n".encode())
    assert statuses(got) == [200]
    assert_quiet(caplog, capfd)


@pytest.mark.parametrize(("line", "status"), [
    ("GET * HTTP/1.1", 400),
    ("HEAD * HTTP/1.1", 400),
    ("OPTIONS * HTTP/1.1", 405),
    ("GET api/status HTTP/1.1", 400),
])
def test_a_target_without_a_leading_slash_gets_an_answer(
    server: Server, line: str, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The stdlib's server raised IndexError on `*` and closed without a response."""
    got, _ = exchange(server, f"{line}\r\nHost: {host(server)}\r\nConnection: close\r\n\r\n".encode())
    assert statuses(got) == [status]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_head_on_the_event_stream_sends_headers_only(server: Server) -> None:
    """The stdlib's server sent the stream's body to a HEAD. Here the same connection
    answers the next request: any body byte would be read as its status line."""
    conn = HTTPConnection(*server.bound, timeout=5)
    conn.request("HEAD", "/api/events")
    head = conn.getresponse()
    assert head.status == 200 and head.getheader("Content-Type") == "text/event-stream"
    assert head.read() == b""
    conn.request("GET", "/api/status")
    after = conn.getresponse()
    assert after.status == 200 and json.loads(after.read())["readOnly"] is True
    conn.request("HEAD", "/api/fleet")
    fleet = conn.getresponse()
    assert fleet.read() == b"" and int(fleet.getheader("Content-Length", "0")) > 100
    conn.close()


@pytest.mark.parametrize("limit", ["9" * 5000, str(MAX_LIMIT + 1), "-1", "²", "1e3", " 5", "0x10"])
def test_a_bad_limit_is_a_clean_400_naming_the_parameter(server: Server, limit: str) -> None:
    """`limit=` with 5,000 digits answered with Python's int-digits message."""
    address, port = server.bound
    conn = HTTPConnection(address, port, timeout=5)
    conn.request("GET", f"/api/pending?limit={quote(limit)}")
    answer = conn.getresponse()
    message = json.loads(answer.read())["error"]
    conn.close()
    assert answer.status == 400
    assert message.startswith("limit=") and message.endswith(f"expected a number of pods from 0 to {MAX_LIMIT}")
    assert len(message) < 120


def test_junk_parameters_share_the_plain_urls_cache_entry(store: SqliteStore) -> None:
    """Every distinct query string was cached until the cluster changed: 20,000 took a
    6-node dashboard from 47 to 410 MB. A view's key holds only the parameters it reads,
    normalised."""
    app = App(Mirror(store).sync())
    plain = app.get("/api/fleet", {})
    for i in range(20_000):
        assert app.get("/api/fleet", {"x": str(i), "class": ""}) is plain
    assert app.get("/api/pending", {"limit": "025"}) is app.get("/api/pending", {"limit": "25"})
    assert len(app.cache) == 2


def test_distinct_values_are_bounded_in_bytes_and_entries(store: SqliteStore) -> None:
    """Legitimate distinct values (every class name, every namespace) still make entries:
    the least recently used go once the byte or entry budget is reached."""
    app = App(Mirror(store).sync())
    one = len(app.get("/api/fleet", {"class": "c0"}).body)
    app.cache = ResponseCache(max_bytes=3 * one + one // 2)
    for i in range(50):
        app.get("/api/fleet", {"class": f"c{i}"})
    assert len(app.cache) == 3 and app.cache.bytes <= app.cache.max_bytes
    assert app.cache.get(app.mirror.version, ("fleet", "?", "class=c49")) is not None
    for i in range(MAX_ENTRIES + 50):
        app.get("/api/claims", {"namespace": f"ns{i}"})
    assert app.cache.bytes <= app.cache.max_bytes and app.cache.get(app.mirror.version, ("fleet", "?", "class=c49")) is None
    app.cache = ResponseCache()
    for i in range(MAX_ENTRIES + 50):
        app.get("/api/claims", {"namespace": f"ns{i}"})
    assert len(app.cache) == MAX_ENTRIES


def test_the_cache_keeps_the_recently_used_and_forgets_an_old_version() -> None:
    cache: ResponseCache[Body] = ResponseCache(max_bytes=30, max_entries=10)
    for name in "abc":
        cache.put(1, (name,), Body(b"x" * 10))
    assert cache.get(1, ("a",)) is not None  # a is now the most recent
    cache.put(1, ("d",), Body(b"x" * 10))
    assert [cache.get(1, (n,)) is not None for n in "abcd"] == [True, False, True, True]
    cache.put(1, ("big",), Body(b"x" * 31))  # over the whole budget: not kept
    assert cache.get(1, ("big",)) is None and cache.bytes == 30
    assert cache.get(2, ("a",)) is None and len(cache) == 0 and cache.bytes == 0
    cache.put(1, ("a",), Body(b"x"))  # an answer computed before the change: dropped
    assert len(cache) == 0 and cache.get(1, ("a",)) is None
    cache.put(3, ("a",), Body(b"x"))  # a newer version: the cache moves to it
    assert cache.get(3, ("a",)) is not None and cache.bytes == 1


class Body:
    def __init__(self, body: bytes) -> None:
        self.body = body


def test_many_query_strings_over_http_keep_one_entry(server: Server) -> None:
    conn = HTTPConnection(*server.bound, timeout=10)
    for i in range(2_000):
        conn.request("GET", f"/api/fleet?_={i}&utm_source=x{i}")
        assert conn.getresponse().read()
    conn.close()
    assert len(server.app.cache) == 1


def read_until(s: socket.socket, marker: bytes, deadline: float) -> bytes:
    got = b""
    while marker not in got:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_two_hundred_event_streams_then_a_shutdown(store: SqliteStore) -> None:
    """200 streams are 200 coroutines, not threads; a change reaches each; stopping the
    server ends every stream at once."""
    mirror = Mirror(store, idle=0.2).start()
    server = Server(App(mirror), port=0).start()
    threads = threading.active_count()
    streams = []
    try:
        for _ in range(200):
            s = socket.create_connection(server.bound, timeout=10)
            s.sendall(f"GET /api/events HTTP/1.1\r\nHost: {host(server)}\r\n\r\n".encode())
            streams.append(s)
        deadline = time.monotonic() + 20
        assert all(b"event: hello" in read_until(s, b"event: hello", deadline) for s in streams)
        assert threading.active_count() - threads <= VIEW_THREADS
        assert statuses(exchange(server, f"GET /api/status HTTP/1.1\r\nHost: {host(server)}\r\n"
                                 "Connection: close\r\n\r\n".encode())[0]) == [200]
        gpu_node(store, "n2", gpus=1)
        deadline = time.monotonic() + 20
        assert all(b"event: change" in read_until(s, b"event: change", deadline) for s in streams)
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 3
        deadline = time.monotonic() + 5
        assert all(closed_by_server(s, deadline) for s in streams)
    finally:
        for s in streams:
            s.close()
        server.stop()
        mirror.stop()


def test_the_idle_timeout_does_not_cut_an_event_stream(quick_server: Server, store: SqliteStore) -> None:
    """A stream is a request being answered, not an idle connection: it outlives the
    timeout (1 s here) and still brings the next change."""
    with socket.create_connection(quick_server.bound, timeout=10) as s:
        s.sendall(f"GET /api/events HTTP/1.1\r\nHost: {host(quick_server)}\r\n\r\n".encode())
        assert b"event: hello" in read_until(s, b"event: hello", time.monotonic() + 10)
        time.sleep(2.5)
        gpu_node(store, "n2", gpus=1)
        assert b"event: change" in read_until(s, b"event: change", time.monotonic() + 10)
