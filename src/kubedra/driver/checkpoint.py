"""The node agent's checkpoint: which claims are prepared, with the answer given to the kubelet.

It is the commit record of prepare and unprepare: a claim is prepared exactly when its entry
is in the checkpoint; CDI specs and host directories are derived from the entries (see
`recovery`). Unprepare may come from another process than the prepare (restart, rolling
update), and the kubelet retries prepare after a restart; both are answered from this file.

Integrity, as the kubelet's checkpoint manager and NVIDIA's driver do it: the file carries a
checksum of its payload, so a damaged file is detected instead of trusted. Here it is a
SHA-256 of the payload's exact bytes, kept apart from the payload so that a newer agent's
unknown fields are still covered. Every save also bumps a generation, which each CDI spec
records, so a checkpoint older than the specs on disk (a restored copy) is recognised as stale.
Before a save replaces the file, the previous one (valid: it was loaded or written by this
agent) is kept as `checkpoint.last-good.json`; an unusable file is set aside as
`checkpoint.damaged.json` for inspection and never overwritten in place.

Reading is lenient about unknown fields (a newer agent's file still loads) and strict about
everything that reaches a path or a response: UIDs, names and namespaces are validated.

MIG instances (`kubedra.driver.mig`): a prepared claim's entry records the GPU and compute
instance the driver made for each of its MIG devices (`PreparedClaim.mig`); `migPending`
records the instances the driver is making or tearing down that no prepared claim holds
(written before the instance is created and when an unprepare commits, dropped once the
instance exists for its claim or is destroyed). Together they are the driver's proof of which
instances it made: the only ones it ever destroys.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kubedra.api.validation import names
from kubedra.driver import files

CHECKPOINT_KIND = "KubedraDriverCheckpoint"
CHECKPOINT_VERSION = 2
LEGACY_VERSION = 1  # kubedra 0.1: no checksum, no generation
MAX_CHECKPOINT_BYTES = 64 << 20
FILE_NAME = "checkpoint.json"
LAST_GOOD_NAME = "checkpoint.last-good.json"
DAMAGED_NAME = "checkpoint.damaged.json"


class PreparedDevice(msgspec.Struct, kw_only=True, rename="camel"):
    request_names: list[str]
    pool_name: str
    device_name: str
    cdi_device_ids: list[str]
    share_id: str | None = None


class MigInstance(msgspec.Struct, kw_only=True, rename="camel"):
    """A MIG instance (GPU instance + its compute instance) the driver makes for a claim.

    `gpu_instance_id` / `compute_instance_id` are None while the instance is being created
    (the record is written before NVML is asked); `mig_uuid` is the MIG device's UUID."""

    device_name: str  # the published placement device, gpu-6-mig-3g40gb-9-4
    claim_uid: str
    gpu_uuid: str
    gpu_minor: int
    profile: str  # 3g.40gb
    profile_id: int  # NVML GPU-instance profile ID
    start: int  # placement: first memory slice
    size: int  # placement: memory slices
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    mig_uuid: str = ""

    @property
    def slices(self) -> range:
        return range(self.start, self.start + self.size)


class PreparedClaim(msgspec.Struct, kw_only=True, rename="camel"):
    uid: str
    namespace: str
    name: str
    devices: list[PreparedDevice]
    cdi_spec: dict[str, Any] = msgspec.field(default_factory=dict)
    sharing: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)  # device -> config
    # device -> its identity, for the claim's status.devices (kubedra 0.1 files lack it)
    device_data: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    prepared_at: str = ""
    generation: int = 0  # the checkpoint generation that committed this entry
    mig: list[MigInstance] = msgspec.field(default_factory=list)  # instances made for it


class _Payload(msgspec.Struct, kw_only=True, rename="camel"):
    driver: str
    node: str
    generation: int
    prepared_claims: dict[str, PreparedClaim] = msgspec.field(default_factory=dict)
    mig_pending: list[MigInstance] = msgspec.field(default_factory=list)


class _Envelope(msgspec.Struct, kw_only=True):
    kind: str
    version: int
    checksum: str
    data: msgspec.Raw


class _Header(msgspec.Struct):
    kind: str = ""
    version: Any = None


class _LegacyFile(msgspec.Struct, kw_only=True, rename="camel"):
    driver: str = ""
    node: str = ""
    prepared_claims: dict[str, PreparedClaim] = msgspec.field(default_factory=dict)
    mig_pending: list[MigInstance] = msgspec.field(default_factory=list)  # never written


class CheckpointError(RuntimeError):
    """The checkpoint exists but cannot be trusted; the message says why (for the log line)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason  # a short label for the recovery metric


@dataclass(frozen=True)
class Snapshot:
    claims: dict[str, PreparedClaim] = field(default_factory=dict)
    generation: int = 0
    # MIG instances being made or torn down that no prepared claim holds (see the module doc)
    pending: tuple[MigInstance, ...] = ()


def checksum(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def claim_problem(uid: str, namespace: str, name: str) -> str | None:
    """Why a claim reference is not one the API server could have made (None: it is valid).
    Checked before any path is built from it; lengths first, so no long input is scanned."""
    checks = (
        ("uid", uid, 36, names.object_uid),
        ("namespace", namespace, 63, names.dns_label),
        ("name", name, 253, names.dns_subdomain),
    )
    for what, value, longest, check in checks:
        detail = f"must be at most {longest} characters" if len(value) > longest else check(value)
        if detail:
            shown = value if len(value) <= 80 else value[:80] + "..."
            return f"claim {what} {shown!r}: {detail}"
    return None


def entry_problem(key: str, claim: PreparedClaim) -> str | None:
    """Why a decoded entry cannot be used (None: it can)."""
    if key != claim.uid:
        return f"entry {key!r} holds claim uid {claim.uid!r}"
    return claim_problem(claim.uid, claim.namespace, claim.name)


class Checkpoint:
    def __init__(self, directory: Path, driver: str, node: str) -> None:
        self.directory, self.driver, self.node = directory, driver, node
        self.path = files.child(directory, FILE_NAME)
        self.last_good = files.child(directory, LAST_GOOD_NAME)
        self.damaged = files.child(directory, DAMAGED_NAME)

    def read(self) -> Snapshot | None:
        """The checkpoint, None when there is none; CheckpointError when it is unusable."""
        return self._read(self.path)

    def read_last_good(self) -> Snapshot | None:
        """The copy kept before the last save, None when it is missing or unusable too."""
        try:
            return self._read(self.last_good)
        except CheckpointError:
            return None

    def _read(self, path: Path) -> Snapshot | None:
        try:
            raw = files.read_bounded(path, MAX_CHECKPOINT_BYTES)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise CheckpointError("unreadable", f"cannot be read: {err}") from None
        try:
            header = msgspec.json.decode(raw, type=_Header)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            raise CheckpointError("unreadable", f"is truncated or not JSON: {err}") from None
        if header.kind != CHECKPOINT_KIND:
            raise CheckpointError(
                "unreadable", f"is not a {CHECKPOINT_KIND} (kind {header.kind!r})"
            )
        if header.version == LEGACY_VERSION and type(header.version) is int:
            return self._validated(self._decode(raw, _LegacyFile), 0)
        if header.version != CHECKPOINT_VERSION or type(header.version) is not int:
            raise CheckpointError(
                "version",
                f"has version {header.version!r}; this driver reads versions "
                f"{LEGACY_VERSION} and {CHECKPOINT_VERSION}",
            )
        envelope = self._decode(raw, _Envelope)
        actual = checksum(bytes(envelope.data))
        if envelope.checksum != actual:
            raise CheckpointError(
                "checksum", f"fails its checksum (recorded {envelope.checksum!r}, content {actual})"
            )
        payload = self._decode(bytes(envelope.data), _Payload)
        return self._validated(payload, payload.generation)

    @staticmethod
    def _decode(raw: bytes, type_: type[Any]) -> Any:
        try:
            return msgspec.json.decode(raw, type=type_)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            raise CheckpointError("unreadable", f"is truncated or malformed: {err}") from None

    def _validated(self, payload: _Payload | _LegacyFile, generation: int) -> Snapshot:
        if (payload.driver, payload.node) != (self.driver, self.node) and payload.driver:
            raise CheckpointError(
                "foreign",
                f"belongs to driver {payload.driver!r} on node {payload.node!r}, "
                f"not {self.driver!r} on {self.node!r}",
            )
        for key, claim in payload.prepared_claims.items():
            problem = entry_problem(key, claim)
            if problem:
                raise CheckpointError("invalid", f"has an invalid entry: {problem}")
        return Snapshot(dict(payload.prepared_claims), generation, tuple(payload.mig_pending))

    def save(
        self,
        claims: dict[str, PreparedClaim],
        generation: int,
        pending: tuple[MigInstance, ...] = (),
    ) -> None:
        """Write `claims` (and the MIG instances `pending`) as `generation`, keeping the file
        it replaces as the last-good copy."""
        payload = _Payload(
            driver=self.driver,
            node=self.node,
            generation=generation,
            prepared_claims=claims,
            mig_pending=list(pending),
        )
        data = msgspec.json.format(msgspec.json.encode(payload), indent=2)
        envelope = _Envelope(
            kind=CHECKPOINT_KIND,
            version=CHECKPOINT_VERSION,
            checksum=checksum(data),
            data=msgspec.Raw(data),
        )
        self._keep_last_good()
        files.atomic_write(self.path, msgspec.json.encode(envelope) + b"\n", files.CHECKPOINT_MODE)

    def _keep_last_good(self) -> None:
        """Hard-link the current file to a temporary, then rename it over the last-good copy:
        both names always hold a complete file, whatever the moment of a crash."""
        tmp = files.child(self.directory, f".{LAST_GOOD_NAME}.link{files.TEMP_SUFFIX}")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        try:
            os.link(self.path, tmp)
        except FileNotFoundError:
            return  # first save, or the damaged file was set aside
        os.replace(tmp, self.last_good)
        # rename() does nothing when both names already link one file (a save killed after
        # this step, before its write): the temporary must not outlive the save then.
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()

    def set_aside(self) -> Path:
        """Move an unusable checkpoint out of the way (kept for inspection, not trusted)."""
        os.replace(self.path, self.damaged)
        files.fsync_dir(self.directory)
        return self.damaged

    def remove_temporaries(self) -> int:
        return files.remove_temporaries(self.directory, "checkpoint.")
