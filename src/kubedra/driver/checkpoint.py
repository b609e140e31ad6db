"""The node agent's checkpoint: which claims are prepared, with the answer given to the kubelet.

Unprepare may come from another process than the prepare (restart, rolling update), and the
kubelet retries prepare after a restart; both are answered from this file. Writes are atomic
(temp file in the same directory, fsync, rename, fsync of the directory), so a crash leaves the
old or the new checkpoint, never a torn one. Reading is lenient (unknown fields ignored), so a
newer agent's file still loads.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import msgspec

CHECKPOINT_VERSION = 1


class PreparedDevice(msgspec.Struct, kw_only=True, rename="camel"):
    request_names: list[str]
    pool_name: str
    device_name: str
    cdi_device_ids: list[str]
    share_id: str | None = None


class PreparedClaim(msgspec.Struct, kw_only=True, rename="camel"):
    uid: str
    namespace: str
    name: str
    devices: list[PreparedDevice]
    cdi_spec_file: str = ""
    cdi_spec: dict[str, Any] = msgspec.field(default_factory=dict)
    sharing: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)  # device -> config
    host_dirs: list[str] = msgspec.field(default_factory=list)
    prepared_at: str = ""


class CheckpointFile(msgspec.Struct, kw_only=True, rename="camel"):
    kind: str = "KubedraDriverCheckpoint"
    version: int = CHECKPOINT_VERSION
    driver: str = ""
    node: str = ""
    prepared_claims: dict[str, PreparedClaim] = msgspec.field(default_factory=dict)


class CheckpointError(RuntimeError):
    pass


class Checkpoint:
    def __init__(self, path: Path, driver: str, node: str) -> None:
        self.path, self.driver, self.node = path, driver, node

    def load(self) -> dict[str, PreparedClaim]:
        if not self.path.exists():
            return {}
        try:
            data = msgspec.json.decode(self.path.read_bytes(), type=CheckpointFile)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            raise CheckpointError(f"checkpoint {self.path} is unreadable: {err}") from None
        if data.driver and data.driver != self.driver:
            raise CheckpointError(
                f"checkpoint {self.path} belongs to driver {data.driver!r}, not {self.driver!r}"
            )
        return dict(data.prepared_claims)

    def save(self, claims: dict[str, PreparedClaim]) -> None:
        data = CheckpointFile(driver=self.driver, node=self.node, prepared_claims=claims)
        atomic_write(self.path, msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n")


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` with `data` all at once (temp file + fsync + rename + directory fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
