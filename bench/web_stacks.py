"""Which web stack serves `kubedra ui`: the candidates side by side (not part of `make bench`).

    python -m bench.web_stacks PYTHON=STACK ...   e.g. .venv/bin/python=stdlib \
        /tmp/s/bin/python=starlette /tmp/a/bin/python=aiohttp

Each candidate runs in its own interpreter (one with the stack installed) and serves what
the dashboard serves most: a cached view's JSON (GET, keep-alive) and a server-sent-events
stream. `wrk` (Debian's package) loads it from loopback. Reported per stack: requests/s and
latency for a 30 kB and a 1 MB body, the time to first SSE event, the import time (median of
7 fresh interpreters), the distributions it adds and their installed size. Throughput only:
the choice of aiohttp was made on the hostile cases as well (timeouts, backlog, body
handling, bounded caches, HEAD, shutdown, 200 streams; docs/decisions.md, "Web UI"), each
kept as a test in tests/web/test_hardening.py.
"""

from __future__ import annotations

import json
import re
import socket
import statistics
import subprocess
import sys
import time

PORT = 18765
SIZES = {"30kB": 30_000, "1MB": 1_000_000}

SERVERS = {
    "stdlib": """
import sys, http.server, socketserver
body = {bodies}
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/events":
            self.send_response(200); self.send_header("Content-Type", "text/event-stream")
            self.end_headers(); self.wfile.write(b"data: 1\\n\\n"); self.wfile.flush(); return
        data = body[self.path.strip("/")]
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers()
        self.wfile.write(data)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", {port}), H).serve_forever()
""",
    "starlette": """
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
body = {bodies}
async def view(request):
    return Response(body[request.path_params["name"]], media_type="application/json")
async def events(request):
    async def gen():
        yield b"data: 1\\n\\n"
    return StreamingResponse(gen(), media_type="text/event-stream")
app = Starlette(routes=[Route("/events", events), Route("/{{name}}", view)])
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="error", access_log=False)
""",
    "aiohttp": """
from aiohttp import web
body = {bodies}
async def view(request):
    return web.Response(body=body[request.match_info["name"]], content_type="application/json")
async def events(request):
    r = web.StreamResponse(headers={{"Content-Type": "text/event-stream"}})
    await r.prepare(request); await r.write(b"data: 1\\n\\n"); return r
app = web.Application()
app.add_routes([web.get("/events", events), web.get("/{{name}}", view)])
web.run_app(app, host="127.0.0.1", port={port}, print=None, access_log=None)
""",
}
IMPORTS = {
    "stdlib": "import http.server, socketserver",
    "starlette": "import uvicorn, starlette.applications, starlette.responses",
    "aiohttp": "import aiohttp.web",
}
DISTS = {
    "stdlib": [],
    "starlette": ["starlette", "uvicorn", "anyio", "h11", "idna", "sniffio", "typing_extensions"],
    "aiohttp": [
        "aiohttp",
        "multidict",
        "yarl",
        "frozenlist",
        "aiosignal",
        "attrs",
        "aiohappyeyeballs",
        "propcache",
        "idna",
        "typing_extensions",
    ],
}


def _wait_port() -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def _wrk(path: str) -> tuple[float, float, float]:
    out = subprocess.run(
        ["wrk", "-t2", "-c8", "-d5s", "--latency", f"http://127.0.0.1:{PORT}/{path}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]

    def ms(label: str) -> float:
        m = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out)
        assert m, out
        return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]

    return rps, ms("50%"), ms("99%")


def _first_event_ms() -> float:
    times = []
    for _ in range(20):
        start = time.perf_counter()
        with socket.create_connection(("127.0.0.1", PORT)) as s:
            s.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while b"data: 1" not in got:
                got += s.recv(4096)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _import_ms(python: str, stack: str) -> float:
    times = []
    for _ in range(7):
        code = f"import time; t=time.perf_counter(); {IMPORTS[stack]}; print(time.perf_counter()-t)"
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(out.stdout) * 1000)
    return statistics.median(times)


def _installed(python: str, stack: str) -> tuple[int, float]:
    code = (
        "import importlib.metadata as m, json, sys, os\n"
        "size = count = 0\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        d = m.distribution(name)\n"
        "    except m.PackageNotFoundError:\n"
        "        continue\n"
        "    count += 1\n"
        "    size += sum(os.path.getsize(d.locate_file(f)) for f in d.files or ()"
        " if os.path.exists(d.locate_file(f)))\n"
        "print(count, size)"
    )
    names = DISTS[stack]
    out = subprocess.run(
        [python, "-c", code, json.dumps(names)], capture_output=True, text=True, check=True
    )
    count, size = out.stdout.split()
    return int(count), int(size) / 1e6


def measure(python: str, stack: str) -> dict[str, float]:
    bodies = f"{{k: b'[' + b'1,' * (n // 2 - 1) + b'1]' for k, n in {SIZES!r}.items()}}"
    code = SERVERS[stack].format(bodies=bodies, port=PORT)
    server = subprocess.Popen([python, "-c", code], stderr=subprocess.DEVNULL)
    try:
        _wait_port()
        row: dict[str, float] = {}
        for key in SIZES:
            row[f"{key} req/s"], row[f"{key} p50 ms"], row[f"{key} p99 ms"] = _wrk(key)
        row["SSE first event ms"] = _first_event_ms()
    finally:
        server.terminate()
        server.wait()
    row["import ms"] = _import_ms(python, stack)
    row["dists"], row["installed MB"] = _installed(python, stack)
    return row


def main(argv: list[str]) -> int:
    results = {}
    for arg in argv:
        python, _, stack = arg.partition("=")
        results[stack] = measure(python, stack)
        time.sleep(1)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
