"""The node's cgroup subtree: one kubedra-owned folder in every hierarchy, emptied and
removed on `down`.

The kubelet's cgroupRoot is `/kubedra-<id>` (pods go under it) and the agent puts itself,
containerd, its shims and the kubelet in `/kubedra-<id>/node`, so every process the node
ever started can be found, and killed, by its cgroup, also after the agent died. Works on
cgroup v1 (one mount per controller) and v2 (one unified mount).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path


def hierarchies() -> list[Path]:
    """Every cgroup mount of this mount namespace (v1 controllers and named hierarchies, or
    the v2 unified one)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")
        if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2"):
            found.append(Path(fields[0].split()[4]))
    return found


def create(name: str) -> None:
    """`/name` (and its parents) in every hierarchy."""
    for root in hierarchies():
        _make(root, name)


def join(name: str, pid: int) -> None:
    """Put `pid` in `/name` of every hierarchy."""
    for root in hierarchies():
        (_make(root, name) / "cgroup.procs").write_text(str(pid))


def _make(root: Path, name: str) -> Path:
    """A cgroup folder, with its parents; a new v1 cpuset gets its parent's CPUs and memory
    nodes, which it lacks and without which no process may join it."""
    folder = root
    for part in Path(name).parts:
        folder = folder / part
        folder.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (folder / knob).exists() and not (folder / knob).read_text().strip():
                (folder / knob).write_text((folder.parent / knob).read_text())
    return folder


def pids(name: str) -> set[int]:
    """Every process in the subtree `/name`, in any hierarchy."""
    found: set[int] = set()
    for folder in _subtree(name):
        with contextlib.suppress(OSError):
            found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
    return found


def kill(name: str, spare: int | None = None, timeout: float = 15.0) -> None:
    """SIGKILL every process of the subtree until none is left (but `spare`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = pids(name) - {spare}
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    raise RuntimeError(f"processes of cgroup /{name} survive SIGKILL: {sorted(pids(name))}")


def remove(name: str, timeout: float = 10.0) -> None:
    """Remove the subtree `/name` of every hierarchy, deepest first (a cgroup whose last
    process just died can be busy for a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        for folder in sorted(_subtree(name), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                folder.rmdir()
        left = [str(f) for f in _subtree(name)]
        if not left:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"cgroups left under /{name}: {left}")
        time.sleep(0.2)


def exists(name: str) -> bool:
    return any((root / name).exists() for root in hierarchies())


def _subtree(name: str) -> Iterator[Path]:
    for root in hierarchies():
        top = root / name
        if top.is_dir():
            yield top
            for folder, children, _ in os.walk(top):
                yield from (Path(folder) / child for child in children)
