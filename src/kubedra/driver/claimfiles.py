"""Where a prepared claim lives on disk: its CDI spec and, with MPS sharing, its host directory.

Both are derived from the claim's checkpoint entry: `materialize` makes them match the entry,
`remove` deletes them. Every path is built from a validated claim UID through `files.child`,
never from a stored path. The spec embeds its entry (annotation `kubedra.io/prepared-claim`,
the entry without the spec itself), so the CDI directory alone is enough to rebuild a lost
checkpoint (`recovery`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.validation import names
from kubedra.driver import files
from kubedra.driver.cdi import kind, spec_file_name, spec_file_prefix
from kubedra.driver.checkpoint import PreparedClaim, entry_problem

PREPARED_ANNOTATION = "kubedra.io/prepared-claim"
MAX_SPEC_BYTES = 1 << 20  # a claim's spec is a few KB; anything bigger is not ours
_SPEC_SUFFIX = ".json"


def uses_mps(sharing: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a claim's sharing (device -> applied config) needs an MPS host directory."""
    return any(config.get("strategy") == "MPS" for config in sharing.values())


def embed(entry: PreparedClaim) -> dict[str, str]:
    """The annotations that let the spec stand in for the entry."""
    bare = msgspec.structs.replace(entry, cdi_spec={})
    return {PREPARED_ANNOTATION: msgspec.json.encode(bare).decode()}


def spec_bytes(spec: dict[str, Any]) -> bytes:
    return (json.dumps(spec, indent=2) + "\n").encode()


class ClaimFiles:
    def __init__(self, plugin_dir: Path, cdi_dir: Path, driver: str) -> None:
        self.plugin_dir, self.cdi_dir, self.driver = plugin_dir, cdi_dir, driver
        self._prefix = spec_file_prefix(driver)

    # --- paths ------------------------------------------------------------------------

    @staticmethod
    def _checked(uid: str) -> str:
        detail = names.object_uid(uid)
        if detail:
            raise files.UnsafePath(f"claim uid {uid[:80]!r} {detail}")
        return uid

    def spec_path(self, uid: str) -> Path:
        return files.child(self.cdi_dir, spec_file_name(self.driver, self._checked(uid)))

    def _mps_root(self) -> Path:
        return files.child(self.plugin_dir, "mps")

    def host_dir(self, uid: str) -> Path:
        return files.child(self._mps_root(), self._checked(uid))

    # --- one claim --------------------------------------------------------------------

    def materialize(self, entry: PreparedClaim) -> bool:
        """Make the claim's host directory and spec match `entry`; True when a spec was
        (re)written."""
        if uses_mps(entry.sharing):
            host = self.host_dir(entry.uid)
            files.ensure_dir(self._mps_root(), files.PLUGIN_DIR_MODE)
            for sub in ("pipe", "shm"):
                files.ensure_dir(
                    files.child(files.ensure_dir(host, files.HOST_DIR_MODE), sub),
                    files.HOST_DIR_MODE,
                )
        path = self.spec_path(entry.uid)
        data = spec_bytes(entry.cdi_spec)
        try:
            if files.read_bounded(path, MAX_SPEC_BYTES) == data:
                return False
        except (FileNotFoundError, ValueError):
            pass
        files.ensure_dir(self.cdi_dir, files.CDI_DIR_MODE, own=False)
        files.atomic_write(path, data, files.CDI_SPEC_MODE)
        return True

    def remove(self, uid: str) -> None:
        files.remove_file(self.spec_path(uid))
        files.remove_tree(self.host_dir(uid))

    def read_entry(self, uid: str) -> PreparedClaim:
        """The entry embedded in the claim's spec on disk; ValueError saying why not."""
        try:
            spec = json.loads(files.read_bounded(self.spec_path(uid), MAX_SPEC_BYTES))
            embedded = spec["annotations"][PREPARED_ANNOTATION]
            entry = msgspec.json.decode(embedded, type=PreparedClaim)
        except (OSError, ValueError, KeyError, TypeError, msgspec.ValidationError) as err:
            raise ValueError(f"no readable {PREPARED_ANNOTATION} annotation ({err})") from None
        if spec.get("kind") != kind(self.driver):
            raise ValueError(f"spec kind {spec.get('kind')!r} is not {kind(self.driver)!r}")
        problem = entry_problem(uid, entry)
        if problem:
            raise ValueError(problem)
        return msgspec.structs.replace(entry, cdi_spec=spec)

    # --- the whole directory ----------------------------------------------------------

    def spec_uids(self) -> tuple[set[str], list[str]]:
        """UIDs of this driver's spec files on disk, and the names of files that look like
        ours but carry no valid UID (left alone: the driver never wrote them)."""
        uids: set[str] = set()
        strangers: list[str] = []
        if not self.cdi_dir.is_dir():
            return uids, strangers
        for path in self.cdi_dir.iterdir():
            name = path.name
            if not (name.startswith(self._prefix) and name.endswith(_SPEC_SUFFIX)):
                continue
            uid = name[len(self._prefix) : -len(_SPEC_SUFFIX)]
            if names.object_uid(uid) or path.is_symlink():
                strangers.append(name)
            else:
                uids.add(uid)
        return uids, strangers

    def host_dir_uids(self) -> set[str]:
        root = self.plugin_dir / "mps"
        if root.is_symlink() or not root.is_dir():
            return set()
        return {p.name for p in root.iterdir() if not names.object_uid(p.name)}

    def remove_temporaries(self) -> int:
        return files.remove_temporaries(self.cdi_dir, self._prefix)

    def remove_all_specs(self) -> int:
        """Every file named like this driver's specs, and their temporaries (uninstall);
        returns the number removed. Unlinking never follows a symlink."""
        uids, strangers = self.spec_uids()
        for name in [spec_file_name(self.driver, uid) for uid in uids] + strangers:
            files.remove_file(self.cdi_dir / name)
        self.remove_temporaries()
        return len(uids) + len(strangers)
