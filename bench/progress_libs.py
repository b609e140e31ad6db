"""Which progress bar long commands use: kubedra's own, tqdm or rich (not part of `make bench`).

    python -m bench.progress_libs [PYTHON]    PYTHON: an interpreter with tqdm and rich
                                              installed (default: this one)

Reported per candidate: the import time (median of 7 fresh interpreters), the cost of one
update when drawing to a terminal (a pseudo-terminal drained by a thread) and when the
output is not a terminal (the bar must then stay silent), the distributions it adds to
kubedra's and their installed size. The third cost that matters, the time a 50 MB apply
takes with and without its bar, is measured by `python -m bench.progress_libs apply`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UPDATES = 100_000

IMPORTS = {
    "kubedra": "import kubedra.cli.progress",
    "tqdm": "import tqdm",
    "rich": "import rich.progress",
}

# One script per candidate: UPDATES updates to a pseudo-terminal, then to a pipe (a file
# that is no terminal), printing the two costs per update in microseconds.
DRAW = """
import io, os, pty, sys, threading, time
N = {updates}
master, slave = pty.openpty()
threading.Thread(target=lambda: [os.read(master, 65536) for _ in iter(int, 1)], daemon=True).start()
tty = open(slave, "w", buffering=1)
pipe = open(os.devnull, "w")

def kubedra(stream):
    from kubedra.cli.progress import Progress
    with Progress("applying", N, stream=stream, delay=0) as bar:
        for i in range(N):
            bar.update(i + 1)

def tqdm(stream):
    from tqdm import tqdm as bar_of
    with bar_of(total=N, file=stream, disable=None, mininterval=0.1) as bar:
        for _ in range(N):
            bar.update(1)

def rich(stream):
    from rich.console import Console
    from rich.progress import Progress
    console = Console(file=stream, force_terminal=stream is tty)
    with Progress(console=console, disable=stream is not tty) as progress:
        task = progress.add_task("applying", total=N)
        for _ in range(N):
            progress.update(task, advance=1)

run = globals()[sys.argv[1]]
for stream in (tty, pipe):
    start = time.perf_counter()
    run(stream)
    print((time.perf_counter() - start) / N * 1e6)
"""


def import_ms(python: str, statement: str, runs: int = 7) -> float:
    """Median import time of `runs` fresh interpreters, less the interpreter's own start."""

    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([python, "-c", code], check=True, env=_env())
        return time.perf_counter() - start

    bare = statistics.median(once("pass") for _ in range(runs))
    return (statistics.median(once(statement) for _ in range(runs)) - bare) * 1e3


def update_us(python: str, name: str) -> tuple[float, float]:
    script = DRAW.format(updates=UPDATES)
    out = subprocess.run(
        [python, "-c", script, name], check=True, capture_output=True, text=True, env=_env()
    ).stdout.split()
    return float(out[0]), float(out[1])


def installed(python: str, dist: str, versions: bool = False) -> tuple[list[str], float]:
    """The distributions `dist` brings (itself and what it requires, recursively, less what
    kubedra has besides it; `versions`: named `name-version`) and their installed size in MB."""
    import re
    import tomllib

    wanted = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    have = sorted({re.split(r"[ ;<>=!\\[]", r)[0].lower() for r in wanted} - {dist.lower()})
    code = f"""
import importlib.metadata as md, re, os
have = set({have!r})
todo, seen = [{dist!r}], set()
while todo:
    name = todo.pop().lower()
    if name in seen or name in have:
        continue
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:  # a requirement for another platform
        continue
    seen.add(name)
    todo += [re.split(r"[ ;<>=!\\[]", r)[0] for r in d.requires or [] if "extra ==" not in r]
size = sum(os.path.getsize(f.locate()) for n in seen for f in md.distribution(n).files or ())
named = (n + "-" + md.version(n) if {versions!r} else n for n in seen)
print(" ".join(sorted(named)), size / 1e6)
"""
    out = subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True, env=_env()
    ).stdout.split()
    return out[:-1], float(out[-1])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


def compare(python: str) -> None:
    print(f"{'candidate':<10} {'import':>9} {'update, tty':>12} {'update, pipe':>13}  adds")
    for name, statement in IMPORTS.items():
        try:
            ms = import_ms(python, statement)
        except subprocess.CalledProcessError:
            print(f"{name:<10} not installed for {python}")
            continue
        tty, pipe = update_us(python, name)
        adds = (
            "nothing"
            if name == "kubedra"
            else "{} ({:.1f} MB)".format(
                *(lambda d, mb: (", ".join(d), mb))(*installed(python, name))
            )
        )
        print(f"{name:<10} {ms:7.1f} ms {tty:9.2f} µs {pipe:10.2f} µs  {adds}")


def apply_cost(size_mb: int = 50) -> None:
    """A `size_mb` MB apply with stderr on a pseudo-terminal (bar drawn) against the same
    on a pipe (bar silent), fresh stores each time, 3 runs each."""
    from bench.bench_api import slice_doc

    folder = REPO / "bench" / ".data"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"apply-{size_mb}mb.yaml"
    if not path.exists():
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        chunks: list[str] = []
        while sum(map(len, chunks)) < size_mb * 1_000_000:
            docs = [slice_doc(500 * len(chunks) + i) for i in range(500)]
            chunks.append(yaml.dump_all(docs, Dumper=dumper, sort_keys=False))
        path.write_text("---\n".join(chunks))
    print(f"input: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    times: dict[str, list[float]] = {"pipe": [], "tty": []}
    for _ in range(3):  # interleaved, so that the machine's load falls on both alike
        for where, kept in times.items():
            kept.append(_timed_apply(path, where))
    for where, kept in times.items():
        shown = ", ".join(f"{t:.1f}" for t in kept)
        print(f"apply with stderr on a {where}: best {min(kept):.1f} s ({shown})")


def _timed_apply(path: Path, where: str) -> float:
    import pty
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "kubedra", "--store", f"{tmp}/s.db", "apply", "-f"]
        master, slave = pty.openpty() if where == "tty" else (None, None)
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*command, str(path)],
            stdout=subprocess.DEVNULL,
            stderr=slave if slave is not None else subprocess.PIPE,
            env=_env(),
        )
        if master is not None and slave is not None:
            os.close(slave)
            while True:
                try:
                    if not os.read(master, 65536):
                        break
                except OSError:
                    break
        else:
            assert proc.stderr is not None
            proc.stderr.read()
        proc.wait()
        return time.perf_counter() - start


if __name__ == "__main__":
    if sys.argv[1:2] == ["apply"]:
        apply_cost(int(sys.argv[2]) if len(sys.argv) > 2 else 50)
    else:
        compare(sys.argv[1] if len(sys.argv) > 1 else sys.executable)
