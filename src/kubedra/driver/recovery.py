"""What the driver does at start so that the checkpoint and the CDI directory agree.

The checkpoint is the commit record (prepare commits the entry, then writes the spec;
unprepare commits the removal, then deletes the spec), so a kill -9 at any moment leaves a
checkpoint that is right and files that may lag behind it by one claim. At start:

Normal start (the checkpoint is valid, not older than any spec on disk): the checkpoint is
the truth. Temporaries of writes cut short are deleted; specs and host directories that no
entry owns (an unprepare killed after its commit) are deleted; an entry whose spec is missing
or differs (a prepare killed after its commit, or /var/run/cdi on a tmpfs after a reboot)
gets it rewritten.

Recovery (the checkpoint is unreadable, fails its checksum, has an unknown version, belongs
to another driver or node, is missing while specs exist, or is stale: older than a spec on
disk): the file is set aside, one error line and a metric report it, and the claims are
rebuilt from the CDI directory, the newest evidence there is (every commit is followed by its
spec write or removal). Each spec embeds its entry; a spec without a readable one (written by
kubedra 0.1, or damaged) takes the entry from the last-good copy when that has the claim, and
is dropped otherwise. An entry of the last-good copy without a spec is marked not prepared:
most likely it was unprepared after the copy was made, and if not, the kubelet's next prepare
(idempotent, derived from the claim again) restores it. Then every rebuilt entry is checked
against the API (the Store): a claim that is gone, or exists with another UID, is stale and
dropped, as NVIDIA's driver cleans its checkpoint; when the API cannot answer, the entry is
kept. This check is the seam for the real-cluster driver (issue 19), which can also compare
the claim's allocation and reservation with this node.

MIG instances: the pending records (`migPending`) of the checkpoint, or of the last-good copy
when the checkpoint is unusable, are carried over; an entry recovery drops (stale, or not
prepared) hands its instance records to them, so the driver destroys what it made for a
claim it no longer serves (`kubedra.driver.prepare`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubedra.api.resource import ResourceClaim
from kubedra.cluster.store import Store
from kubedra.driver.checkpoint import Checkpoint, CheckpointError, PreparedClaim, Snapshot
from kubedra.driver.claimfiles import ClaimFiles
from kubedra.driver.logs import get_logger, log_event
from kubedra.driver.metrics import DriverMetrics
from kubedra.errors import NotFound

log = get_logger("recovery")


@dataclass
class Repairs:
    """What a start changed on disk (the figures of the log line and the metric)."""

    temporaries: int = 0
    orphan_specs: int = 0
    specs_written: int = 0
    host_dirs: int = 0
    failed: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "temporaries_removed": self.temporaries,
            "orphan_specs_removed": self.orphan_specs,
            "specs_written": self.specs_written,
            "host_dirs_removed": self.host_dirs,
        }


def recover(
    checkpoint: Checkpoint, claim_files: ClaimFiles, store: Store, metrics: DriverMetrics
) -> Snapshot:
    """Bring checkpoint and files into agreement; returns the prepared claims to serve."""
    repairs = Repairs()
    repairs.temporaries = checkpoint.remove_temporaries() + claim_files.remove_temporaries()
    on_disk, strangers = claim_files.spec_uids()
    if strangers:
        log_event(
            log,
            "files named like this driver's CDI specs carry no valid claim UID; left alone",
            logging.WARNING,
            files=sorted(strangers),
        )
    embedded: dict[str, PreparedClaim] = {}
    for uid in on_disk:  # a spec of kubedra 0.1 or a damaged one: the checkpoint may have it
        with contextlib.suppress(ValueError):
            embedded[uid] = claim_files.read_entry(uid)
    try:
        snapshot, problem = checkpoint.read(), None
    except CheckpointError as err:
        snapshot, problem = None, err
    newest = max((e.generation for e in embedded.values()), default=0)
    if problem is None and snapshot is not None and newest > snapshot.generation:
        problem = CheckpointError(
            "stale",
            f"is generation {snapshot.generation}, older than a CDI spec on disk "
            f"(generation {newest})",
        )
    if problem is None and snapshot is None and on_disk:
        problem = CheckpointError(
            "missing", f"is missing while {len(on_disk)} CDI spec(s) of this driver exist"
        )
    if problem is None:
        result = snapshot or Snapshot()
    else:
        result = _rebuild(checkpoint, claim_files, store, metrics, problem, snapshot, embedded)
    _reconcile(claim_files, result.claims, on_disk, repairs)
    changed = repairs.counts()
    for action, count in changed.items():
        metrics.reconciled(action, count)
    if any(changed.values()) or repairs.failed:
        log_event(
            log,
            "checkpoint and CDI directory reconciled",
            logging.WARNING,
            **changed,
            failed=repairs.failed or None,
        )
    return result


def _rebuild(
    checkpoint: Checkpoint,
    claim_files: ClaimFiles,
    store: Store,
    metrics: DriverMetrics,
    problem: CheckpointError,
    snapshot: Snapshot | None,
    embedded: Mapping[str, PreparedClaim],
) -> Snapshot:
    kept_as = str(checkpoint.set_aside()) if checkpoint.path.exists() else None
    base = snapshot if snapshot is not None else checkpoint.read_last_good()
    base_claims = base.claims if base is not None else {}
    on_disk, _ = claim_files.spec_uids()
    claims: dict[str, PreparedClaim] = {}
    dropped: list[str] = []
    for uid in sorted(on_disk):
        entry = embedded.get(uid) or base_claims.get(uid)
        if entry is None:
            dropped.append(uid)  # nothing says which devices it held: the kubelet will retry
        else:
            claims[uid] = entry
    stale = [uid for uid, entry in claims.items() if _gone(store, entry)]
    pending = list(base.pending if base is not None else ())
    for uid in stale:
        pending += claims.pop(uid).mig
    for uid in base_claims.keys() - on_disk:  # not prepared: its instances were released
        pending += [r for r in base_claims[uid].mig if r not in pending]
    from_last_good = sum(uid not in embedded for uid in claims)
    generation = max([base.generation if base else 0, *(e.generation for e in embedded.values())])
    checkpoint.save(claims, generation + 1, tuple(pending))
    metrics.checkpoint_recovered(problem.reason)
    log_event(
        log,
        "checkpoint unusable: prepared claims rebuilt from the CDI directory",
        logging.ERROR,
        checkpoint=str(checkpoint.path),
        problem=f"{checkpoint.path.name} {problem}",
        kept_as=kept_as,
        recovered=len(claims),
        entries_from_last_good=from_last_good,
        unrecoverable_specs=dropped or None,
        not_prepared=sorted(base_claims.keys() - on_disk) or None,
        stale=stale or None,
    )
    return Snapshot(claims, generation + 1, tuple(pending))


def _gone(store: Store, entry: PreparedClaim) -> bool:
    """The API says the claim no longer exists as prepared (deleted, or replaced by another
    object of the same name); False also when the API cannot answer."""
    try:
        claim = store.get(ResourceClaim, entry.name, entry.namespace)
    except NotFound:
        return True
    except Exception as err:  # the API is not reachable: keep what the node knows
        log_event(log, "cannot check a recovered claim", logging.WARNING, uid=entry.uid, error=err)
        return False
    return claim.metadata.uid != entry.uid


def _reconcile(
    claim_files: ClaimFiles,
    claims: Mapping[str, PreparedClaim],
    on_disk: set[str],
    repairs: Repairs,
) -> None:
    for uid, entry in claims.items():
        try:
            repairs.specs_written += claim_files.materialize(entry)
        except OSError as err:  # prepare retries it when the kubelet asks again
            repairs.failed.append(f"{uid}: {err}")
    for uid in on_disk - claims.keys():
        claim_files.remove(uid)
        repairs.orphan_specs += 1
    for uid in claim_files.host_dir_uids() - claims.keys():
        claim_files.remove(uid)
        repairs.host_dirs += 1
