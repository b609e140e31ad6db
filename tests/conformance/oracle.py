"""Upstream's allocator and CEL environment as a test oracle (the Go program in tools/oracle).

The program is built once per machine from its pinned Go module into kubedra's cache
(`~/.cache/kubedra/oracle/<key>/oracle`, the key a hash of its sources, so an edit
rebuilds), exactly as the control-plane binaries are. One process serves a whole run:
requests and answers are JSON lines over its stdin/stdout.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kubedra.devcluster.binaries import BinariesMissing, _go, _go_build, cache_root

MODULE = Path(__file__).resolve().parents[2] / "tools" / "oracle"
K8S_VERSION = "v0.37.2"  # k8s.io/dynamic-resource-allocation, api, apimachinery (go.mod)


def _key() -> str:
    digest = hashlib.sha256()
    for path in sorted(MODULE.iterdir()):
        if path.suffix in (".go", ".mod", ".sum"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{K8S_VERSION}-{digest.hexdigest()[:16]}"


def binary() -> Path:
    return cache_root() / "oracle" / _key() / "oracle"


def build() -> Path:
    """The oracle binary, built first if needed; raises BinariesMissing without Go."""
    target = binary()
    if os.access(target, os.X_OK):
        return target
    go = _go()
    target.parent.mkdir(parents=True, exist_ok=True)
    _go_build(go, MODULE, ["."], target.parent, "-s -w", io.StringIO())
    if not os.access(target, os.X_OK):
        raise BinariesMissing(f"go build in {MODULE} did not produce {target}")
    return target


def unavailable() -> str | None:
    """Why the oracle cannot run here (no Go and nothing built), or None."""
    if os.access(binary(), os.X_OK):
        return None
    try:
        _go()
    except BinariesMissing as exc:
        return f"upstream oracle unavailable (tools/oracle is built with Go 1.26+): {exc}"
    return None


class OracleFault(Exception):
    """The oracle could not answer (a bad request or a panic in upstream's code)."""


class Oracle:
    """A running oracle process; `ask` one request, `ask_many` a pipelined batch."""

    def __init__(self, path: Path | None = None) -> None:
        self._proc = subprocess.Popen(
            [str(path or build())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1 << 20,
        )
        self._lock = threading.Lock()

    def ask(self, mode: str, body: Any = None) -> dict[str, Any]:
        (answer,) = self.ask_many([(mode, body)])
        return answer

    def ask_many(self, requests: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
        """Answers in request order. A writer thread feeds stdin while this one reads, so a
        large batch cannot fill both pipes and stall."""
        lines = [json.dumps({"mode": m, "body": b}, separators=(",", ":")) for m, b in requests]
        with self._lock:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            writer = threading.Thread(target=self._write, args=(lines,), daemon=True)
            writer.start()
            answers = [self._read() for _ in lines]
            writer.join()
        for answer in answers:
            if "fault" in answer:
                raise OracleFault(answer["fault"])
        return answers

    def _write(self, lines: list[str]) -> None:
        assert self._proc.stdin is not None
        for line in lines:
            self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise OracleFault(f"the oracle exited (code {self._proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
