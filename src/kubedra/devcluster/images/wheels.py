"""The kubedra image's Python packages: the third-party wheels pinned in
tools/images/requirements.lock (writing the lock, downloading, unzipping them like an
install) and precompiling .py files with the image's own Python."""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from kubedra.devcluster import oci
from kubedra.devcluster.images.cache import Cache, used
from kubedra.devcluster.images.host import (
    ImageBuildError,
    Log,
    checkout,
    pip,
    project,
    run,
    tool,
)

PYTHON = "python3.11"
SITE = "usr/local/lib/python3.11/dist-packages"  # Debian's python puts it on sys.path
WHEEL_ABIS = ("cp311", "abi3", "none")
MANYLINUX = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(17, 37))  # glibc 2.36


def lock_path() -> Path:
    """tools/images/requirements.lock: the image's wheels, pinned with their hashes."""
    return checkout() / "tools" / "images" / "requirements.lock"


def locked_wheels(cache: Cache, log: Log) -> list[Path]:
    """The locked wheels from the cache, downloaded from PyPI when any is missing."""
    folder = cache.downloads / "wheels"
    wanted = _locked_hashes()
    found = _wheels_by_hash(folder)
    if not all(any(h in found for h in hashes) for hashes in wanted.values()):
        log(f"downloading {len(wanted)} wheels (cp311 manylinux x86_64)")
        _pip_download(["--require-hashes", "--no-deps", "-r", str(lock_path())], folder)
        found = _wheels_by_hash(folder)
    chosen = []
    for name, hashes in sorted(wanted.items()):
        match = [found[h] for h in hashes if h in found]
        if not match:
            raise ImageBuildError(f"{name}: no downloaded wheel matches {lock_path()}")
        chosen.append(match[0])
        used(match[0])
    return chosen


def _locked_hashes() -> dict[str, list[str]]:
    """`name==version` -> its allowed sha256 hex digests, from the lock file."""
    text = lock_path().read_text().replace("\\\n", " ")
    locked = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement, *options = line.split()
            locked[requirement] = [o.split(":", 1)[1] for o in options if "sha256:" in o]
    return locked


def _wheels_by_hash(folder: Path) -> dict[str, Path]:
    """Every .whl in the folder by its sha256 hex digest."""
    return {_sha256_hex(w): w for w in sorted(folder.glob("*.whl"))}


def _sha256_hex(path: Path) -> str:
    """A file's sha256 as bare hex (what pip's --hash takes)."""
    return oci.sha256_file(path).split(":", 1)[1]


def _pip_download(arguments: Sequence[str], folder: Path) -> None:
    """`pip download` of cp311 manylinux x86_64 wheels (never sdists: nothing is built)."""
    platforms = [f"--platform={p}" for p in (*MANYLINUX, "manylinux2014_x86_64")]
    abis = [f"--abi={abi}" for abi in WHEEL_ABIS]
    folder.mkdir(parents=True, exist_ok=True)
    pip(
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version=3.11",
        "--implementation=cp",
        *abis,
        *platforms,
        "--dest",
        str(folder),
        *arguments,
    )


def write_lock(log: TextIO = sys.stderr) -> Path:
    """Rewrite the lock: pyproject's runtime dependencies less matplotlib, at the versions
    installed in this environment (what the tests ran), with their dependencies."""
    wanted = project()["dependencies"]
    pins = []
    for requirement in wanted:
        name = re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0]
        if name.lower() == "matplotlib":
            continue
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(requirement)
    with tempfile.TemporaryDirectory() as scratch:
        _pip_download(pins, Path(scratch))
        lines = [_lock_line(w) for w in sorted(Path(scratch).glob("*.whl"))]
    header = (
        "# The kubedra image's wheels (cp311, manylinux x86_64), written by\n"
        "# `python -m kubedra.devcluster.images --write-lock`. matplotlib is left out.\n"
    )
    lock_path().write_text(header + "".join(lines))
    log.write(f"wrote {lock_path()} ({len(lines)} wheels)\n")
    return lock_path()


def _lock_line(wheel: Path) -> str:
    """`name==version --hash=sha256:...` for a downloaded wheel."""
    name, version = wheel.name.split("-")[:2]
    return f"{name.replace('_', '-').lower()}=={version} --hash=sha256:{_sha256_hex(wheel)}\n"


def unpack_wheel(wheel: Path, site: Path, drop_tests: bool = False) -> list[str]:
    """Install a wheel by unzipping it (what pip does, minus scripts, headers, data and the
    host's paths in RECORD); returns its top-level names. Files are 0644, or 0755 when the
    wheel marks them executable. `drop_tests` leaves out `tests` packages (numpy's are
    15 MiB that nothing imports at run time)."""
    tops: set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            rel = _wheel_target(info.filename)
            if rel is None or (drop_tests and "tests" in rel.split("/")[1:-1]):
                continue
            target = site / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(info))
            target.chmod(0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
            tops.add(rel.split("/", 1)[0])
    return sorted(tops)


def _wheel_target(name: str) -> str | None:
    """Where a wheel member goes under site-packages (None: not installed)."""
    parts = name.split("/")
    if name.endswith("/") or ".." in parts or name.startswith("/"):
        return None
    if parts[0].endswith(".data"):
        return "/".join(parts[2:]) if parts[1] in ("purelib", "platlib") else None
    return name


def compile_pyc(root: Path, *folders: str) -> None:
    """Precompile with the image's own Python, in a chroot: unchecked-hash .pyc (no source
    stat at import, no mtime in them) and a fixed hash seed (set constants keep their
    order), so the bytes depend on the sources alone."""
    command = [
        tool("chroot", "coreutils"),
        str(root),
        f"/usr/bin/{PYTHON}",
        "-m",
        "compileall",
        "-q",
        "--invalidation-mode",
        "unchecked-hash",
        *folders,
    ]
    if os.geteuid() != 0:
        command = [tool("unshare", "util-linux"), "--user", "--map-root-user", *command]
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "SOURCE_DATE_EPOCH": str(oci.EPOCH),
    }
    run(command, env=env, clean_env=True)
