"""The node agent's filesystem primitives: every file, directory and socket the driver makes
goes through here, so modes, durability and containment are decided in one place.

Modes are explicit and never depend on the umask (a DaemonSet may run with umask 000):
- the plugin and registration directories 0750, as the kubelet creates `plugins/` and
  `plugins_registry/`; the sockets in them 0600 (only the kubelet, as root, connects);
- the checkpoint 0600 (it names every claim on the node);
- the CDI directory 0755 and spec files 0644: container runtimes read them, and these are the
  modes CDI's own producer library writes;
- MPS host directories 0755: bind-mounted into containers (NVIDIA's driver uses 0755 too).

Writes are atomic and durable: a temporary file beside the target (`.<name>.<random>.tmp`,
which no CDI consumer loads: they read only `*.json` and `*.yaml`), fsync, rename over the
target, fsync of the directory; a crash leaves the old or the new file and perhaps a
temporary, which `remove_temporaries` deletes at the next start.

Paths below a driver directory are built only by `child`: one path component, never `.`,
`..`, a separator or NUL, and never an existing symlink, so no input can name a file outside.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import IO

PLUGIN_DIR_MODE = 0o750
SOCKET_MODE = 0o600
CHECKPOINT_MODE = 0o600
CDI_DIR_MODE = 0o755
CDI_SPEC_MODE = 0o644
HOST_DIR_MODE = 0o755
TEMP_SUFFIX = ".tmp"


class UnsafePath(ValueError):
    """A name that would leave the driver's directory, or a symlink where a file belongs."""


def child(directory: Path, name: str) -> Path:
    """`directory/name` for a single, plain path component that is not a symlink."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UnsafePath(f"{name!r} is not a plain file name")
    path = directory / name
    if path.is_symlink():
        raise UnsafePath(f"{path} is a symlink; the driver does not follow links")
    return path


def ensure_dir(path: Path, mode: int, *, own: bool = True) -> Path:
    """Create `path` and missing parents with `mode`. An existing directory is set to `mode`
    when the driver owns it (`own`), and left as it is when shared (kubelet's, CDI's)."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(directory, mode)
        os.chmod(directory, mode)  # mkdir's mode is masked by the umask
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a directory")
    if own and stat.S_IMODE(path.stat().st_mode) != mode:
        os.chmod(path, mode)
    return path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Replace `path` with `data` all at once and durably, with `mode` whatever the umask."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def read_bounded(path: Path, limit: int) -> bytes:
    """The file's bytes, refusing files larger than `limit` (a damaged file is no memory bomb)."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    return data


def remove_file(path: Path) -> bool:
    """Unlink `path` durably; False when it did not exist."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def remove_tree(path: Path) -> bool:
    """Remove a directory tree the driver made (never through a symlink); False if absent."""
    if path.is_symlink():
        raise UnsafePath(f"{path} is a symlink; the driver does not follow links")
    if not path.exists():
        return False
    shutil.rmtree(path)  # rmtree removes links inside the tree, never what they point to
    return True


def remove_temporaries(directory: Path, prefix: str) -> int:
    """Delete temporaries `atomic_write` left for targets named `prefix*` (a crash mid-write)."""
    if not directory.is_dir():
        return 0
    removed = 0
    for entry in os.scandir(directory):
        if entry.name.startswith(f".{prefix}") and entry.name.endswith(TEMP_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed += 1
    return removed


class Busy(OSError):
    """Another process holds the driver's lock (a second instance on the same directories)."""


def hold_lock(path: Path, timeout: float) -> IO[bytes]:
    """An exclusive lock on `path` (flock), held until the returned file is closed or the
    process dies: two instances of a driver on one node (a rolling update) must not both
    write the checkpoint. Waits up to `timeout` seconds for the other to stop."""
    f = open(path, "ab")  # noqa: SIM115 - the open file is the lock
    os.fchmod(f.fileno(), CHECKPOINT_MODE)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() >= deadline:
                f.close()
                raise Busy(
                    f"{path} is locked by another instance of the driver (waited {timeout:g} s)"
                ) from None
            time.sleep(0.05)
