"""Progress of long work: one line on stderr, redrawn in place, on a terminal only.

Piped or redirected output (CI logs, `2> file`, tests) gets nothing, so what a command
prints stays exactly what it printed before. Work that ends within `delay` seconds shows
nothing either (no flicker on small inputs; KUBEDRA_PROGRESS_DELAY sets it, 1 s by
default). The standard library is enough: the choice against tqdm and rich, with
measurements, is in docs/decisions.md.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

REDRAW_S = 0.1  # at most ten redraws a second


class Progress:
    """`with Progress("applying", total) as bar: bar.update(done)`; the line is erased at
    the end, so the command's own output starts on a clean line."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        stream: TextIO | None = None,
        delay: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream)
        self._clock = clock
        self._start = clock()
        if delay is None:
            delay = float(os.environ.get("KUBEDRA_PROGRESS_DELAY", "1"))
        self._shown_after = self._start + delay
        self._drawn_at = float("-inf")
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def update(self, done: int, total: int | None = None, label: str | None = None) -> None:
        """`done` of `total` units finished (a new `total` or `label`: the next step's)."""
        if total is not None:
            self.total = max(total, 1)
        if label is not None:
            self.label = label
        if not self.enabled:
            return
        now = self._clock()
        if now < self._shown_after or now - self._drawn_at < REDRAW_S:
            return
        self._drawn_at = now
        self._drawn = True
        self.stream.write("\r" + self.line(done, now - self._start) + "\x1b[K")
        self.stream.flush()

    def line(self, done: int, elapsed: float) -> str:
        """`applying  [######------]  52%  4,940/9,500  ETA 12 s`, cut to the terminal."""
        done = min(max(done, 0), self.total)
        fraction = done / self.total
        width = 20
        filled = round(fraction * width)
        eta = f"  ETA {duration(elapsed * (1 - fraction) / fraction)}" if done else ""
        text = (
            f"{self.label}  [{'#' * filled}{'-' * (width - filled)}]  {fraction:4.0%}  "
            f"{done:,}/{self.total:,}{eta}"
        )
        return text[: shutil.get_terminal_size().columns - 1]

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def duration(seconds: float) -> str:
    """`8 s`, `3 min 20 s`, `1 h 05 min`."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
