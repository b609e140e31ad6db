"""SQLite's write-ahead log (`<store>-wal`) read directly, to tell a damaged log from a live one.

SQLite trusts a log frame only while every frame before it checks out, and it says nothing
when one does not: a damaged frame hides every transaction committed after it, a damaged
header hides the whole log, and the next write overwrites the evidence. kubedra looks first.

The log, in short (sqlite.org/fileformat2.html, "The WAL file format"): a 32-byte header
(magic, format version, page size, checkpoint sequence, two salts, a checksum of the first
24 bytes), then frames of a 24-byte header (page number, the database size in pages on the
frame that commits a transaction, else 0, the salts, a running checksum) and one page. The
running checksum covers every frame since the header, so a frame is good only if all frames
before it are; frames whose salts differ are left over from before the log was restarted.
The wal-index (`<store>-shm`, sqlite.org/walformat.html) holds SQLite's own verdict: the
number of the last frame it accepted (mxFrame).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

MAGICS = (0x377F0682, 0x377F0683)  # the low bit: checksums over big-endian words
FORMAT_VERSION = 3007000
HEADER_SIZE = 32
FRAME_HEADER_SIZE = 24
INDEX_HEADER_SIZE = 48
_MASK = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class LogHeader:
    big_endian: bool
    page_size: int
    salts: bytes
    checksum: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Frame:
    number: int  # 1-based, as SQLite counts them
    commit: bool  # the last frame of a transaction
    current: bool  # carries the header's salts (not left over from before a restart)
    checksum: tuple[int, int]  # the running checksum it claims


@dataclass(frozen=True, slots=True)
class LogReport:
    """What a full read of the log finds."""

    frames: int
    accepted: int  # the last frame of the last transaction SQLite will replay
    lost: int  # committed transactions after a damaged frame (SQLite skips them)
    first_bad: int | None  # the damaged frame that hides them

    def problem(self) -> str | None:
        if not self.lost:
            return None
        return (
            f"frame {self.first_bad} is damaged: SQLite would drop the {self.lost} "
            "transaction(s) committed after it"
        )


def log_path(store: Path) -> Path:
    return store.with_name(store.name + "-wal")


def index_path(store: Path) -> Path:
    return store.with_name(store.name + "-shm")


def checksum(data: bytes, big_endian: bool, seed: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """SQLite's log checksum: two running sums over pairs of 32-bit words."""
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    s0, s1 = seed
    pairs = iter(words)
    for a, b in zip(pairs, pairs, strict=True):
        s0 = (s0 + a + s1) & _MASK
        s1 = (s1 + b + s0) & _MASK
    return s0, s1


def read_header(data: bytes) -> LogHeader | None:
    """The log's header, or None when it is not a valid one."""
    if len(data) < HEADER_SIZE:
        return None
    magic, version, page_size = struct.unpack_from(">3I", data)
    valid_size = 512 <= page_size <= 65536 and page_size & (page_size - 1) == 0
    if magic not in MAGICS or version != FORMAT_VERSION or not valid_size:
        return None
    big_endian = bool(magic & 1)
    stored = struct.unpack_from(">2I", data, 24)
    if checksum(data[:24], big_endian) != stored:
        return None
    return LogHeader(big_endian, page_size, data[16:24], stored)


@dataclass(frozen=True, slots=True)
class _Image:
    """The frames of a log as one read saw them: `data` starts at frame `first`."""

    header: LogHeader
    first: int
    data: bytes

    @property
    def step(self) -> int:
        return FRAME_HEADER_SIZE + self.header.page_size

    def frames(self, current_only: bool = False) -> list[Frame]:
        """The complete frames (their headers); only those with the header's salts if
        `current_only` (a restarted log is mostly frames left over from before)."""
        out, view, salts = [], memoryview(self.data), self.header.salts
        for number, at in enumerate(range(0, len(view) - self.step + 1, self.step), self.first):
            current = view[at + 8 : at + 16] == salts
            if current or not current_only:
                _, db_size, _, _, sum1, sum2 = struct.unpack_from(">6I", view, at)
                out.append(Frame(number, db_size != 0, current, (sum1, sum2)))
        return out

    def checks_out(self, frame: Frame, seed: tuple[int, int]) -> bool:
        """Whether the frame's checksum follows from `seed` (its predecessor's running sum)."""
        at = (frame.number - self.first) * self.step
        raw = self.data[at : at + self.step]
        big_endian = self.header.big_endian
        return frame.current and _frame_sum(raw, big_endian, seed) == frame.checksum

    def lost_after(self, frames: list[Frame], accepted: int) -> int:
        """Commit frames after frame `accepted`, beyond a frame that breaks the running
        checksum, that check out against their predecessor's claimed sum (`frames` run on
        from frame `accepted`, or from the first): committed transactions cut off from the
        log by damage before them. Frames that still chain on from `accepted` are not
        damage, even past a commit frame: a writer killed after writing its commit frame
        but before SQLite's index recorded it was never told its transaction committed,
        and SQLite drops it (or, rebuilding the index from the log, keeps it) whole."""
        claimed = {frame.number: frame.checksum for frame in frames}
        claimed[0] = self.header.checksum
        seed: tuple[int, int] | None = claimed.get(accepted)
        lost = 0
        for frame in frames:
            if frame.number <= accepted or not frame.current:
                continue
            if seed is not None and self.checks_out(frame, seed):
                seed = frame.checksum  # the log goes on intact
                continue
            seed = None  # broken here: what commits after this is cut off
            before = claimed.get(frame.number - 1)
            lost += frame.commit and before is not None and self.checks_out(frame, before)
        return lost


def _frame_sum(frame: bytes, big_endian: bool, seed: tuple[int, int]) -> tuple[int, int]:
    """The running checksum after a frame: over its first 8 header bytes, then its page."""
    return checksum(frame[FRAME_HEADER_SIZE:], big_endian, checksum(frame[:8], big_endian, seed))


def _settled(look: Callable[[], T], fault: Callable[[T], bool], tries: int = 3) -> T:
    """What `look` finds, a fault only if it is still there after `tries` looks 20 ms
    apart: a log being written shows a commit in flight or a torn header for an instant."""
    found = look()
    for _ in range(tries - 1):
        if not fault(found):
            break
        time.sleep(0.02)
        found = look()
    return found


def quick_problem(store: Path) -> str | None:
    """What is wrong with the store's log, cheaply (frame headers only, and the checksum of
    a frame only where one is suspect); None when it is fine or absent. It compares the log
    with SQLite's own index of it, so the caller must have read the store first."""
    return _settled(lambda: _look(store), lambda problem: problem is not None)


def _look(store: Path) -> str | None:
    log_file = log_path(store)
    try:
        size = log_file.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None
    with open(log_file, "rb") as log:
        header = read_header(log.read(HEADER_SIZE))
        if header is None:
            return f"its write-ahead log {log_file} has no valid header ({size} bytes)"
        hint = _accepted_frames(store, header)
        if hint is None:
            return None  # no index for this log yet: nothing to compare with
        # From the last accepted frame on, read before the index is read again: a commit
        # seen in the log has then (all but an instant) reached the index.
        first = max(hint, 1)
        log.seek(HEADER_SIZE + (first - 1) * (FRAME_HEADER_SIZE + header.page_size))
        image = _Image(header, first, log.read())
    accepted = _accepted_frames(store, header)
    if accepted is None:
        return None  # the log was restarted meanwhile
    lost = image.lost_after(image.frames(current_only=True), accepted)
    if lost:
        return (
            f"its write-ahead log {log_file} is damaged after frame {accepted}: "
            f"{lost} committed transaction(s) in it would be silently dropped"
        )
    return None


def _accepted_frames(store: Path, header: LogHeader) -> int | None:
    """SQLite's mxFrame from the wal-index header (native byte order), when the index
    describes this log (same salts); None otherwise."""
    try:
        with open(index_path(store), "rb") as index:
            data = index.read(INDEX_HEADER_SIZE)
    except FileNotFoundError:
        return None
    if len(data) < INDEX_HEADER_SIZE:
        return None
    version, _, _, initialised = struct.unpack_from("=3IB", data)
    if version != FORMAT_VERSION or not initialised or data[32:40] != header.salts:
        return None
    (accepted,) = struct.unpack_from("=I", data, 16)
    return int(accepted)


def full_report(log_file: Path) -> LogReport | str:
    """Every frame's checksum, as SQLite's recovery reads them (for `kubedra store check`
    and repair: about 0.2 s per 1,000 frames); a string when the header is not valid. A
    live log is read whole at once, and a fault must be there in three reads."""
    return _settled(lambda: _full_report_once(log_file), _is_fault)


def _is_fault(report: LogReport | str) -> bool:
    return isinstance(report, str) or report.lost > 0


def _full_report_once(log_file: Path) -> LogReport | str:
    data = log_file.read_bytes()
    header = read_header(data)
    if header is None:
        return f"no valid header ({len(data)} bytes)"
    image = _Image(header, 1, data[HEADER_SIZE:])
    frames = image.frames()
    seed, accepted, first_bad = header.checksum, 0, None
    for frame in frames:
        if not image.checks_out(frame, seed):
            first_bad = frame.number
            break
        seed = frame.checksum
        if frame.commit:
            accepted = frame.number
    lost = image.lost_after(frames, accepted) if first_bad is not None else 0
    return LogReport(len(frames), accepted, lost, first_bad if lost else None)


def rechain(log_file: Path, page_size: int) -> int:
    """Rewrite a *copy* of a damaged log so that SQLite replays every frame still intact:
    frames that fail their own checksum are dropped and the running checksum is computed
    afresh over the rest (a lost header is rebuilt from the first frame's salts and the
    database's `page_size`). Every transaction before the log's last commit was committed,
    so each kept frame is a page as some committed transaction left it; a dropped one leaves
    its page older, which repair's row-by-row reading tolerates. Returns the frames dropped."""
    data = log_file.read_bytes()
    header = read_header(data)
    trust_first = header is None  # a rebuilt header cannot vouch for the first frame
    header = header or _rebuilt_header(data, page_size)
    if header is None:
        return 0
    step = FRAME_HEADER_SIZE + header.page_size
    head = struct.pack(">3I", MAGICS[header.big_endian], FORMAT_VERSION, header.page_size)
    head += data[12:16] + header.salts
    seed = checksum(head, header.big_endian)
    out = bytearray(head + struct.pack(">2I", *seed))
    claimed, dropped = header.checksum, 0
    for offset in range(HEADER_SIZE, len(data) - step + 1, step):
        frame = data[offset : offset + step]
        if frame[8:16] != header.salts:
            continue  # left over from before a restart
        stored = struct.unpack_from(">2I", frame, 16)
        own = _frame_sum(frame, header.big_endian, claimed)
        claimed = stored
        if own != stored and not (trust_first and offset == HEADER_SIZE):
            dropped += 1
            continue
        seed = _frame_sum(frame, header.big_endian, seed)
        out += frame[:16] + struct.pack(">2I", *seed) + frame[FRAME_HEADER_SIZE:]
    log_file.write_bytes(bytes(out))
    return dropped


def _rebuilt_header(data: bytes, page_size: int) -> LogHeader | None:
    """A header for a log whose own is lost: salts from the first frame; the checksum byte
    order is the one under which the second frame follows from the first."""
    step = FRAME_HEADER_SIZE + page_size
    if len(data) < HEADER_SIZE + 2 * step:
        return None
    first, second = (
        data[HEADER_SIZE : HEADER_SIZE + step],
        data[HEADER_SIZE + step : HEADER_SIZE + 2 * step],
    )
    claimed = struct.unpack_from(">2I", first, 16)
    for big_endian in (False, True):
        if _frame_sum(second, big_endian, claimed) == struct.unpack_from(">2I", second, 16):
            return LogHeader(big_endian, page_size, first[8:16], claimed)
    return None
