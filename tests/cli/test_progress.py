"""The progress line of long commands: drawn on a terminal only, after a delay, throttled,
erased at the end; and a large apply through a real pseudo-terminal."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubedra.cli.progress import Progress, duration
from tests.api.manifests import slice_doc


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_drawn_where_the_output_is_no_terminal() -> None:
    stream, clock = io.StringIO(), Clock()
    with Progress("applying", 10, stream=stream, delay=0, clock=clock) as bar:
        for i in range(10):
            clock.now += 5
            bar.update(i + 1)
    assert stream.getvalue() == ""


def test_drawn_after_the_delay_throttled_and_erased() -> None:
    stream, clock = Terminal(), Clock()
    with Progress("applying", 9_500, stream=stream, delay=1.0, clock=clock) as bar:
        clock.now += 0.5
        bar.update(100)  # before the delay: short work shows nothing
        assert stream.getvalue() == ""
        clock.now += 1.5  # 2 s in, 4,750 of 9,500 done
        bar.update(4_750)
        first = stream.getvalue()
        assert first.startswith("\rapplying  [##########----------]   50%  4,750/9,500  ETA 2 s")
        clock.now += 0.05
        bar.update(4_800)  # within 0.1 s of the last draw: not redrawn
        assert stream.getvalue() == first
        clock.now += 0.1
        bar.update(9_000, label="applying again")
        assert stream.getvalue().count("\r") == 2 and "applying again" in stream.getvalue()
    assert stream.getvalue().endswith("\r\x1b[K")  # the line is erased at the end


def test_total_and_label_change_between_steps() -> None:
    stream, clock = Terminal(), Clock()
    bar = Progress("reading", 1, stream=stream, delay=0, clock=clock)
    clock.now += 1
    bar.update(30, total=120, label="reading big.yaml")
    assert "reading big.yaml  [#####---------------]   25%  30/120  ETA 3 s" in stream.getvalue()


@pytest.mark.parametrize(("seconds", "text"), [(8.4, "8 s"), (200, "3 min 20 s"), (3_900, "1 h 05 min")])
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_large_apply_on_a_terminal_shows_progress_and_prints_the_same(tmp_path: Path) -> None:
    """Reading and applying 600 slices with stderr on a pseudo-terminal (no delay before the
    bar): bars appear, are erased, and stdout is the same as without a terminal."""
    docs = []
    for n in range(600):
        doc = slice_doc()
        doc["metadata"]["name"] = doc["spec"]["nodeName"] = doc["spec"]["pool"]["name"] = f"n-{n}"
        docs.append(doc)
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    master, slave = pty.openpty()
    run = subprocess.Popen([sys.executable, "-m", "kubedra", "--store", str(tmp_path / "a.db"),
                            "apply", "-f", str(path)], stdout=subprocess.PIPE, stderr=slave,
                           env={**os.environ, "KUBEDRA_PROGRESS_DELAY": "0"})
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert run.stdout is not None
    out = run.stdout.read()
    assert run.wait(timeout=120) == 0
    assert b"reading " in seen and b"applying  [" in seen and seen.endswith(b"\r\x1b[K")
    piped = subprocess.run([sys.executable, "-m", "kubedra", "--store", str(tmp_path / "b.db"),
                            "apply", "-f", str(path)], capture_output=True, check=True)
    assert out == piped.stdout and piped.stderr == b""
    assert out.count(b"created\n") == 600
