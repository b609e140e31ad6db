"""The embedded store's file: created whole, recognised before use, its faults named.

The rule for a new store: kubedra initialises a store only where no file exists. It builds
the store aside (schema, identity, WAL mode) and links it into place in one step, so a file
at a store's path is either a complete kubedra store or something kubedra did not make. An
existing file is never initialised: an empty (0-byte) one, garbage, another program's
database, a truncated file or a damaged write-ahead log is refused with one line naming
the file and the fault, and left untouched for `kubedra store repair`.

Opening reads only (header bytes, SQLite's identity pragmas, the table layout, the log), so
a read-only command never waits for a writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import struct
import uuid
from pathlib import Path

from kubedra.cluster import userconfig, verify, wal
from kubedra.errors import DamagedStore, StoreError

APPLICATION_ID = 0x6B647261  # "kdra", SQLite's header field for the file's owner
SCHEMA_VERSION = 1  # PRAGMA user_version; 0 in stores made before it was set
SQLITE_MAGIC = b"SQLite format 3\x00"
SCHEMA = """
CREATE TABLE objects (
    kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    uid TEXT NOT NULL, rv INTEGER NOT NULL, node_name TEXT, driver TEXT, data BLOB NOT NULL,
    PRIMARY KEY (kind, namespace, name));
CREATE INDEX objects_node ON objects (kind, node_name);
CREATE INDEX objects_driver ON objects (kind, driver);
CREATE TABLE owners (
    owner_uid TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL);
CREATE INDEX owners_uid ON owners (owner_uid);
CREATE INDEX owners_object ON owners (kind, namespace, name);
CREATE TABLE changes (
    rv INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, kind TEXT NOT NULL,
    data BLOB NOT NULL);
"""
COLUMNS = {
    "objects": ("kind", "namespace", "name", "uid", "rv", "node_name", "driver", "data"),
    "owners": ("owner_uid", "kind", "namespace", "name"),
    "changes": ("rv", "type", "kind", "data"),
}
_WAL_FORMAT = 2  # header bytes 18-19: the file is in WAL mode
# SQLite's primary result codes that mean the file itself is bad.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6
_SQLITE_IOERR, _SQLITE_FULL = 10, 13
_SHM_DMS_BYTE = 128  # every connection to a WAL database holds a shared lock on it


def store_flag(path: Path) -> str:
    """The `--store` option that names this store on a kubedra command line (none for the
    user's default store)."""
    return "" if Path(path) == userconfig.default_store() else f" --store {path}"


def damaged(path: Path, what: str) -> DamagedStore:
    """The one line every command refuses a damaged store with."""
    command = f"kubedra{store_flag(path)} store"
    return DamagedStore(
        f"store {path} is damaged: {what}; "
        f'"{command} check" lists every fault, "{command} repair" keeps a copy and recovers '
        "what it can"
    )


def translate(path: Path, err: sqlite3.Error) -> StoreError:
    """One line for an SQLite failure: damage, a busy store, or anything else."""
    code = (getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return damaged(path, str(err))
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return StoreError(f"store {path} is busy: another process held it for over 60 s ({err})")
    if code in (_SQLITE_IOERR, _SQLITE_FULL) and disk_full(path):
        return StoreError(
            f"store {path}: the disk holding it is full ({err}): free some space and run the "
            "command again; every write that was acknowledged is kept"
        )
    return StoreError(f"store {path}: {err}")


def disk_full(path: Path) -> bool:
    """Whether the file system holding the store has no room for another page: SQLite
    reports a full disk as an I/O error when the log's shared memory cannot be made."""
    try:
        fs = os.statvfs(path.parent if str(path.parent) else ".")
    except OSError:
        return False
    return fs.f_bavail * fs.f_frsize < 64 * 1024


def build(path: Path) -> None:
    """Write a complete, empty store file at `path` (which must not exist)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.executescript(f"BEGIN; {SCHEMA} COMMIT;")
        db.execute("PRAGMA journal_mode=WAL")  # kept in the file's header
    finally:
        db.close()


def scratch_path(path: Path, purpose: str) -> Path:
    """A private name next to `path` (same file system, so it can be linked or renamed)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.{purpose}")


def remove_with_log(path: Path) -> None:
    for file in (path, wal.log_path(path), wal.index_path(path)):
        file.unlink(missing_ok=True)


def missing(path: Path) -> StoreError:
    """A command that does not make stores, on a path where none is."""
    flag = store_flag(path)
    return StoreError(
        f"store {path} does not exist: kubedra makes a store only on `kubedra{flag} cluster "
        f"create`, `kubedra{flag} apply` (and `demo`, `driver run`); check the path"
    )


def create(path: Path) -> None:
    """Make a new store at `path` if nothing is there: built aside, then linked into place
    (a link never replaces a file, so a racing process's store is kept, not overwritten)."""
    if path.exists() or path.is_symlink():
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next(p for p in (path.parent, *path.parent.parents) if p.exists())
        raise StoreError(
            f"store {path} cannot be created: {blocker} is a file, not a folder"
        ) from None
    except OSError as err:
        raise StoreError(f"store {path} cannot be created: {err.strerror}") from None
    scratch = scratch_path(path, "new")
    try:
        build(scratch)
        with contextlib.suppress(FileExistsError):
            os.link(scratch, path)
    finally:
        remove_with_log(scratch)


def connect(path: Path) -> sqlite3.Connection:
    """Open an existing store for reading and writing, after checking it is one. The checks
    run on a read-only connection: closing the last connection to a database makes SQLite
    checkpoint its log and delete it, which would erase a damaged log (and with it the
    evidence that transactions are missing); a read-only connection never does."""
    seen = verify.fingerprint(path)
    wal_mode = check_file(path)
    with contextlib.closing(open_connection(path, "ro")) as probe:
        try:
            check_identity(probe, path)  # also reads the log's index, for the next check
        except sqlite3.Error as err:
            raise translate(path, err) from None
        log_problem = wal.quick_problem(path)
        if log_problem is not None:
            raise damaged(path, log_problem)
        try:
            fault = None if verify.verified_before(path, seen) else verify.first_fault(probe)
        except sqlite3.Error as err:
            raise translate(path, err) from None
    if fault is not None:
        raise damaged(path, fault)
    verify.remember(path, seen)
    db = open_connection(path, "rw")
    try:
        db.execute("PRAGMA synchronous=NORMAL")  # WAL: a kill loses nothing committed
        if not wal_mode:
            db.execute("PRAGMA journal_mode=WAL")
        add_missing_indexes(db)
    except sqlite3.Error as err:
        db.close()
        raise translate(path, err) from None
    return db


# Indexes added after stores were made with SCHEMA_VERSION 1: derived data, so a store
# without them is still valid and gets them on its next open (no version change).
LATER_INDEXES = {"owners_object": "owners (kind, namespace, name)"}


def add_missing_indexes(db: sqlite3.Connection) -> None:
    """Build the indexes an older store lacks (one read when none is missing). Without
    `owners_object`, removing an object's owner rows scanned the whole owners table."""
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    for name, target in LATER_INDEXES.items():
        if name not in present:
            db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")


def open_connection(path: Path, mode: str) -> sqlite3.Connection:
    """A connection to an existing file (`mode` "ro" or "rw": never creates one)."""
    uri = f"{path.resolve().as_uri()}?mode={mode}"
    try:
        return sqlite3.connect(
            uri, uri=True, timeout=60, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as err:
        raise translate(path, err) from None


def check_file(path: Path) -> bool:
    """Refuse what cannot be a store, from its first 100 bytes; True if in WAL mode."""
    if path.is_dir():
        raise StoreError(f"store {path} is a directory, not a store file")
    if not path.exists():
        raise StoreError(f"store {path} does not exist")
    if not path.is_file():
        raise StoreError(f"store {path} is not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise damaged(
            path,
            "the file is empty (0 bytes); kubedra never leaves an empty store, so it was "
            "truncated or made by another program",
        )
    with open(path, "rb") as f:
        head = f.read(100)
    if not head.startswith(SQLITE_MAGIC):
        raise damaged(path, "not an SQLite database (it does not start with SQLite's header)")
    if len(head) < 100:
        raise damaged(path, f"truncated to {size} bytes, inside SQLite's 100-byte header")
    (page_size,) = struct.unpack_from(">H", head, 16)
    page_size = 65536 if page_size == 1 else page_size
    changed, pages = struct.unpack_from(">II", head, 24)
    (valid_for,) = struct.unpack_from(">I", head, 92)
    log = wal.log_path(path)
    quiet = not log.exists() or log.stat().st_size == 0  # no checkpoint can be growing it
    if quiet and changed == valid_for and size < pages * page_size:
        raise damaged(path, f"truncated to {size} bytes; its header says {pages * page_size}")
    return head[18] == _WAL_FORMAT


def check_identity(db: sqlite3.Connection, path: Path) -> None:
    """Refuse another program's database, a newer schema, or tables not laid out as
    kubedra's (one read transaction)."""
    with verify.read_transaction(db):
        (owner,) = db.execute("PRAGMA application_id").fetchone()
        (version,) = db.execute("PRAGMA user_version").fetchone()
        layout = {
            table: tuple(row[1] for row in db.execute(f"PRAGMA table_info({table})"))
            for table in COLUMNS
        }
    if owner not in (0, APPLICATION_ID):
        raise StoreError(
            f"store {path} is not a kubedra store: an SQLite database of another program "
            f"(application_id {owner:#x})"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"store {path} has schema version {version}; this kubedra knows up to "
            f"{SCHEMA_VERSION}: use a newer kubedra"
        )
    if not any(layout.values()):
        raise damaged(path, "an SQLite database without kubedra's tables")
    for table, columns in layout.items():
        if columns != COLUMNS[table]:
            found = ", ".join(columns) if columns else "missing"
            raise damaged(path, f"table {table} is {found}, not ({', '.join(COLUMNS[table])})")


def in_use(path: Path) -> bool:
    """Whether another process has the store open: each SQLite connection to a database in
    WAL mode holds a shared lock on the wal-index's "dead man switch" byte, so an exclusive
    lock on it is refused while one is open (this process must not have it open itself)."""
    try:
        fd = os.open(wal.index_path(path), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_BYTE)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _SHM_DMS_BYTE)
        return False
    finally:
        os.close(fd)
