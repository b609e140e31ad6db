"""Fixtures: a `Server` on a real store in this process; Debian's Chromium driven by
Playwright and a `kubedra ui` subprocess to point it at.

Every page the tests open collects the browser's console errors and uncaught exceptions;
a test that saw one fails. Screenshots go to $KUBEDRA_ARTIFACTS (default
/tmp/kubedra-artifacts/web), never into the repository.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedra.cluster import SqliteStore
from kubedra.web.api import App
from kubedra.web.mirror import Mirror
from kubedra.web.server import Server
from tests.scheduler.cluster import gpu_node, new_store
from tests.web.browser import launch, missing

ARTIFACTS = Path(os.environ.get("KUBEDRA_ARTIFACTS", "/tmp/kubedra-artifacts")) / "web"


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=4)
    return store


@pytest.fixture
def server(store: SqliteStore, tmp_path: Path) -> Iterator[Server]:
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "run-allocation.png").write_bytes(b"\x89PNG fake")
    (tmp_path / "secret.png").write_bytes(b"TOP-SECRET-BYTES")
    mirror = Mirror(store, idle=0.2).start()
    running = Server(App(mirror, backend="test", figures_dir=figures), port=0).start()
    yield running
    running.stop()
    mirror.stop()


class UiProcess:
    """`kubedra ui` as a real subprocess on a free loopback port."""

    def __init__(
        self,
        *args: str,
        sigint_ignored: bool = False,
        cwd: Path | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        """`args`: kubedra's own (--store); `options`: the ui command's; `sigint_ignored`:
        start it as a shell starts a background job, SIGINT ignored; `cwd`: the folder it
        runs in (a relative --store is shown as given)."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubedra", *args, "ui", "--port", "0", *options],
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread
            preexec_fn=_ignore_sigint if sigint_ignored else None,
        )
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        found = re.search(r"(http://\S+/)", line)
        if found is None:
            self.stop()
            raise AssertionError(f"kubedra ui did not start: {line}{self.process.stderr.read()}")
        self.url = found.group(1)

    def stop(self) -> None:
        self.process.terminate()
        self.wait(20)

    def wait(self, timeout: float) -> int:
        """Its exit status; if it has not exited within `timeout` seconds, fail with where
        each of its threads was (it is aborted, its fault handler prints their stacks)."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            _, stderr = self.process.communicate(timeout=20)
            raise AssertionError(f"kubedra ui still running after {timeout} s:\n{stderr}") from None


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="session")
def browser_context() -> Iterator[Any]:
    why = missing()
    if why is not None:
        pytest.skip(f"browser tests skipped: {why}")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = launch(p, profile, viewport={"width": 1280, "height": 860})
        yield context
        context.close()


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    """A fresh tab; the test fails if the page logs a console error or throws."""
    tab = browser_context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    yield tab
    tab.close()
    assert errors == [], "JavaScript errors on the page"


def shot(page: Any, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
