"""The journal's data files: append, roll, read back, scan with torn-tail detection, delete.

Writes go through ``os.pwrite`` on the current file (the page cache); ``sync`` fsyncs every
file written since the last sync, which the adapter calls once per group of batches. A file
is preallocated when started (FORMAT.md says why): its data ends at the first all-zero
record header, and a clean close truncates the current file there.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dovecote.core.records import pickle_by_fields
from dovecote.store.journal.records import (
    FILE_HEADER,
    FILE_MAGIC,
    RECORD_HEADER,
    RECORD_START,
    JournalOp,
    check_record,
    file_header,
    salvage,
)
from dovecote.store.journal.threads import ReadAhead, SyncThread

log = logging.getLogger("dovecote.store.journal")

_NAME = re.compile(r"^db-(\d+)\.log$")


INLINE_SYNC_LIMIT_S = 0.001
"""fsyncs faster than this (on average) run in the event loop, slower ones in a thread."""
INLINE_SYNC_MAX_BYTES = 64 * 1024
"""... and only for groups of at most this many bytes."""
PROBE_ROOM = 4 * 1024 * 1024
"""The room a store whose writes failed wants in a new data file before it says it can
write again (a file's full length may be more than the disk held even when empty)."""
READ_AHEAD_MIN = 8 * 1024 * 1024
"""The groups ``prepare`` reads ahead for: this many bytes or more."""


@dataclass(slots=True, unsafe_hash=True, order=True, init=False)
class Location:
    """Where a record starts (or the journal ends). Two made per group written: built as
    core/records.py says, and as immutable."""

    file_id: int
    offset: int

    def __init__(self, file_id: int, offset: int) -> None:
        self.file_id = file_id
        self.offset = offset


@dataclass(slots=True)
class Damage:
    """A range of a data file that recovery skipped (FORMAT.md: Torn tails and damaged
    records), with what could still be decoded from it."""

    file_id: int
    start: int
    end: int
    why: str
    torn_tail: bool
    salvaged: list[JournalOp]


class DamagedRecordError(Exception):
    """A record read back (not scanned) is not what was written: cut short, missing, or its
    checksum does not hold. (Not an OSError: mypyc cannot compile a subclass of one.)"""


class DataFiles:
    def __init__(self, directory: Path, max_file_length: int, report_damage: bool = True) -> None:
        self.directory = directory
        self.report_damage = report_damage
        """Log each skipped range here (an owner that reports what was lost there does not)."""
        self.max_file_length = max_file_length
        self.file_ids: list[int] = sorted(
            int(m.group(1)) for p in directory.iterdir() if (m := _NAME.match(p.name))
        )
        self._readers: dict[int, int] = {}
        self._dirty: set[int] = set()
        self._fd = -1
        self.current_id = 0
        self.position = 0
        self.sync_cost_s = 0.0
        """A moving average of how long an fsync takes here."""
        self._unsynced = 0
        self._syncer: SyncThread | None = None
        """Where slow fsyncs go (started the first time one is)."""
        self._read_ahead: ReadAhead | None = None
        self._data_ends: dict[int, int] = {}
        """Where each scanned file's data ends (a preallocated file is longer)."""
        self.damage: list[Damage] = []
        """The ranges scans skipped, for their owner to report (and clear)."""

    def path(self, file_id: int) -> Path:
        return self.directory / f"db-{file_id}.log"

    # -- writing ---------------------------------------------------------------------------

    def open_for_append(self, first_id: int = 1) -> None:
        """Continue the last file after its last good record (recovery scanned it) or
        start one."""
        if not self.file_ids:
            self._start_file(first_id)
            return
        self.current_id = self.file_ids[-1]
        self._fd = os.open(self.path(self.current_id), os.O_WRONLY)
        end = self._data_ends.get(self.current_id)
        if end is None:
            end = self._find_end(self.current_id)
        self.position = end

    async def roll(self) -> None:
        """Start the next data file now, with room for PROBE_ROOM bytes at least: what a
        store whose writes failed tries (a full disk refuses a new file first). Raises
        OSError if the disk cannot give that room."""
        self._start_file(self.current_id + 1, need_room=PROBE_ROOM)

    def _start_file(self, file_id: int, need_room: int = 0, length: int = 0) -> None:
        # The new file is made whole before the current one is let go: on a full disk the
        # append fails and the journal goes on in the file it had (a half-made one removed).
        path = self.path(file_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        header = file_header(file_id)
        try:
            _preallocate(fd, max(self.max_file_length, length), need_room)
            if os.pwrite(fd, header, 0) != len(header):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise _at(exc, path) from exc
        if self._fd >= 0:
            self._truncate_to_data()
            os.close(self._fd)
        self._fd = fd
        self.current_id = file_id
        self.position = len(header)
        if file_id not in self.file_ids:
            self.file_ids.append(file_id)
        self._dirty.add(file_id)
        _fsync_directory(self.directory)

    def _truncate_to_data(self) -> None:
        """Give back the preallocated space after the data (a rolled or closed file)."""
        if os.fstat(self._fd).st_size > self.position:
            os.ftruncate(self._fd, self.position)
            self._dirty.add(self.current_id)

    def prepare(self, size: int) -> None:
        """About ``size`` bytes are to be appended next. A group this large is encoded in the
        event loop for a while before it is written: meanwhile a thread reads the range it
        will go to (a file it will not fit in is rolled now, the next one preallocated to
        hold it). Read, an unwritten range leaves zeroed pages in the page cache for the
        write to copy into; without them the write itself waits for new pages, which are
        slow to come on a VM that hands free memory back to its host. A smaller group is
        left to its write: read ahead, its pages would cost a zeroing and a copy more, for a
        wait no longer than the read's (docs/performance.md)."""
        if size < READ_AHEAD_MIN:
            return
        if self.position > FILE_HEADER.size and self.position + size > self.max_file_length:
            self._start_file(self.current_id + 1, length=FILE_HEADER.size + size)
        if self._read_ahead is None:
            self._read_ahead = ReadAhead()
        self._read_ahead.read(self.path(self.current_id), self.position, self.position + size)

    def append(self, *parts: bytes | memoryview) -> Location:
        """Write one record, given whole or in parts (written together, not joined)."""
        size = sum(len(part) for part in parts)
        if self.position > FILE_HEADER.size and self.position + size > self.max_file_length:
            self._start_file(self.current_id + 1)
        location = Location(self.current_id, self.position)
        try:
            written = os.pwritev(self._fd, parts, self.position)
            if written < size:  # a short write to a regular file is rare; finish it
                rest = b"".join(parts)
                while written < size:
                    written += os.pwrite(self._fd, rest[written:], self.position + written)
        except OSError as exc:
            raise _at(exc, self.path(self.current_id)) from exc
        self.position += size
        self._unsynced += size
        self._dirty.add(self.current_id)
        return location

    def rewind(self, start: Location) -> None:
        """Take back what was appended from ``start`` on (a group whose write or fsync
        failed): zeroed, so that no record of it is found again, and written over next.
        (A group that rolled to a new file meanwhile is left as it is: rare, and replay
        then applies it.)"""
        if start.file_id != self.current_id or self.position <= start.offset:
            return
        with contextlib.suppress(OSError):
            os.pwrite(self._fd, bytes(self.position - start.offset), start.offset)
        self.position = start.offset

    async def sync(self, disk_syncs: bool) -> None:
        """Make everything appended since the last sync durable: one fsync per file written
        (skipped when ``disk_syncs`` is off, and then left for the next sync to cover).

        A fast fsync runs right here in the event loop: handing it to a worker thread and
        back costs more than the fsync itself on a fast disk (docs/performance.md).
        A slow disk must not stall every connection, so once fsyncs average
        over ``INLINE_SYNC_LIMIT_S`` they move to a worker thread (and back if they speed
        up again). A group of more than ``INLINE_SYNC_MAX_BYTES`` always goes to the
        thread."""
        if not disk_syncs:
            return
        # A big group (large messages) takes longer to sync, and meanwhile the loop can
        # read the next group's frames: that one goes to a thread whatever the average.
        if self.syncs_inline():
            self.sync_now()
            return
        if self._syncer is None:
            self._syncer = SyncThread(asyncio.get_running_loop())
        for fd in self._dirty_fds():
            started = time.perf_counter()
            await self._syncer.fsync(fd)
            self._synced(started)

    def syncs_inline(self, more: int = 0) -> bool:
        """Whether ``sync`` would run in the event loop, with ``more`` bytes appended."""
        return (
            self.sync_cost_s < INLINE_SYNC_LIMIT_S
            and self._unsynced + more <= INLINE_SYNC_MAX_BYTES
        )

    def sync_now(self) -> None:
        """``sync`` in the event loop, whatever it costs."""
        for fd in self._dirty_fds():
            started = time.perf_counter()
            os.fsync(fd)
            self._synced(started)

    def _dirty_fds(self) -> list[int]:
        fds = [self._fd if f == self.current_id else self._reader(f) for f in self._dirty]
        self._dirty.clear()
        self._unsynced = 0
        return fds

    def _synced(self, started: float) -> None:
        cost = time.perf_counter() - started
        self.sync_cost_s = 0.9 * self.sync_cost_s + 0.1 * cost

    @property
    def head(self) -> Location:
        return Location(self.current_id, self.position)

    # -- reading ---------------------------------------------------------------------------

    def _reader(self, file_id: int) -> int:
        fd = self._readers.get(file_id)
        if fd is None:
            fd = self._readers[file_id] = os.open(self.path(file_id), os.O_RDONLY)
        return fd

    def read_payload(self, location: Location) -> bytes:
        """A record's payload; ``DamagedRecordError`` when it cannot be read whole and
        checked (its file gone or cut short, or its checksum wrong)."""
        try:
            fd = self._reader(location.file_id)
            header = os.pread(fd, RECORD_HEADER.size, location.offset)
            if len(header) < RECORD_HEADER.size:
                raise DamagedRecordError("cut short")
            length, crc, kind = RECORD_HEADER.unpack(header)
            payload = os.pread(fd, length, location.offset + RECORD_HEADER.size)
        except DamagedRecordError:
            raise
        except OSError as exc:
            raise DamagedRecordError(str(exc)) from exc
        return _checked(length, crc, kind, payload)

    def read_file(self, file_id: int) -> bytes:
        """A whole data file, for reading many of its records (recovery)."""
        return self.path(file_id).read_bytes()

    @staticmethod
    def payload_in(data: bytes, location: Location) -> bytes:
        """The payload of the record at ``location`` in its file's bytes."""
        if location.offset + RECORD_HEADER.size > len(data):
            raise DamagedRecordError("cut short")
        length, crc, kind = RECORD_HEADER.unpack_from(data, location.offset)
        start = location.offset + RECORD_HEADER.size
        return _checked(length, crc, kind, data[start : start + length])

    def scan(self, start: Location | None) -> Iterator[tuple[Location, bytes]]:
        """Every good record from ``start`` (default: the beginning) to the end. Damage is
        skipped up to the next good record (noted in ``damage``); a torn tail of the last
        file is truncated away."""
        for file_id in list(self.file_ids):
            if start is not None and file_id < start.file_id:
                continue
            offset = start.offset if start is not None and file_id == start.file_id else 0
            yield from self._scan_file(file_id, offset)

    def verify(self, until: Location) -> int:
        """Read every record before ``until`` and check its checksum (KahaDB's
        checkForCorruptJournalFiles): the damaged ranges are noted in ``damage``. Returns
        how many good records there were."""
        good = 0
        for file_id in list(self.file_ids):
            if file_id > until.file_id:
                break
            for location, _ in self._scan_file(file_id, 0):
                if location >= until:
                    break
                good += 1
        return good

    def _scan_file(self, file_id: int, offset: int) -> Iterator[tuple[Location, bytes]]:
        path = self.path(file_id)
        try:
            with path.open("rb") as f:
                data = f.read()
        except OSError as exc:
            self._damaged(file_id, 0, 0, f"unreadable ({exc})", b"")
            return
        size = len(data)
        if offset == 0:
            if size < FILE_HEADER.size:
                self._damaged(file_id, 0, size, "no valid file header", data)
                return
            if data[:8] != FILE_MAGIC:
                # The records after it may be whole: only the header is lost (and written
                # again in the file new records go to).
                self._note(Damage(file_id, 0, FILE_HEADER.size, "no valid file header", False, []))
                if file_id == self.file_ids[-1]:
                    with path.open("r+b") as f:
                        f.write(file_header(file_id))
            offset = FILE_HEADER.size
        self._data_ends[file_id] = offset
        while offset < size:
            end = offset + RECORD_HEADER.size
            why = ""
            if data[offset:end] == _NO_RECORD:
                if _NONZERO.search(data, end) is None:
                    return  # the unwritten, preallocated rest of the file
                why = "zeros amid the data"
            elif end > size:
                why = "record header cut short"
            else:
                length, crc, kind = RECORD_HEADER.unpack_from(data, offset)
                if end + length > size:
                    why = "record cut short"
                elif not check_record(kind, crc, data[end : end + length]):
                    why = "checksum mismatch"
                else:
                    yield Location(file_id, offset), data[end : end + length]
                    offset = end + length
                    self._data_ends[file_id] = offset
                    continue
            good = next_good_record(data, offset + 1)
            if good < 0:
                self._damaged(file_id, offset, size, why, data)
                return
            self._damaged(file_id, offset, good, why, data)
            offset = good

    def _find_end(self, file_id: int) -> int:
        """The end of a file's data, found by walking its record headers."""
        for _ in self._scan_file(file_id, 0):
            pass
        return self._data_ends.get(file_id, FILE_HEADER.size)

    def _damaged(self, file_id: int, offset: int, end: int, why: str, data: bytes) -> None:
        """Note a skipped range; when it runs to the end of the last file, that is a torn
        tail: the file is cut there so that new writes follow the last good record."""
        torn = end == len(data) and file_id == self.file_ids[-1] and len(data) > 0
        region = data[offset:end]
        if torn:
            # Trailing zeros are the preallocated rest, not part of the damage.
            end = offset + len(region.rstrip(b"\0"))
            region = data[offset:end]
        self._note(Damage(file_id, offset, end, why, torn, salvage(region)))
        if torn:
            keep = max(offset, FILE_HEADER.size)
            self._data_ends[file_id] = keep
            with self.path(file_id).open("r+b") as f:
                if offset == 0:
                    f.seek(0)
                    f.write(file_header(file_id))
                f.truncate(keep)

    def _note(self, damage: Damage) -> None:
        self.damage.append(damage)
        if not self.report_damage:
            return
        where = f"journal db-{damage.file_id}.log bytes {damage.start}-{damage.end}"
        found = len(damage.salvaged)
        if damage.torn_tail:
            log.warning("%s: %s; the tail of an interrupted write, cut off (%d operations in it)",
                        where, damage.why, found)  # fmt: skip
        else:
            log.error("%s: %s; skipped to the next good record (%d operations lost there)",
                      where, damage.why, found)  # fmt: skip

    # -- removing --------------------------------------------------------------------------

    def delete(self, file_id: int) -> None:
        fd = self._readers.pop(file_id, None)
        if fd is not None:
            os.close(fd)
        self.path(file_id).unlink(missing_ok=True)
        self.file_ids.remove(file_id)
        # Written since the last sync, perhaps (sends and acks nobody waited for): nothing
        # in it is needed, so nothing of it need reach the disk.
        self._dirty.discard(file_id)
        log.info("journal db-%d.log removed: nothing in it is needed any more", file_id)

    def close(self) -> None:
        if self._syncer is not None:
            self._syncer.stop()
            self._syncer = None
        if self._read_ahead is not None:
            self._read_ahead.stop()
            self._read_ahead = None
        if self._fd >= 0:
            self._truncate_to_data()
            os.close(self._fd)
            self._fd = -1
        for fd in self._readers.values():
            os.close(fd)
        self._readers.clear()


_NO_RECORD = bytes(RECORD_HEADER.size)
_NONZERO = re.compile(rb"[^\x00]")


def next_good_record(data: bytes, start: int) -> int:
    """The offset of the first good record at or after ``start`` in a file's bytes, or -1:
    where a batch may start (``RECORD_START``), its length within the file and its checksum
    holding (KahaDB's recovery looks for its next batch header the same way)."""
    position = start + RECORD_HEADER.size - 1  # the type byte's place
    while (match := RECORD_START.search(data, position)) is not None:
        offset = match.start() - (RECORD_HEADER.size - 1)
        position = match.start() + 1
        if offset < start:
            continue
        length, crc, kind = RECORD_HEADER.unpack_from(data, offset)
        begin = offset + RECORD_HEADER.size
        if begin + length <= len(data) and check_record(kind, crc, data[begin : begin + length]):
            return offset
    return -1


def _checked(length: int, crc: int, kind: int, payload: bytes) -> bytes:
    if len(payload) != length:
        raise DamagedRecordError("cut short")
    if not check_record(kind, crc, payload):
        raise DamagedRecordError("checksum mismatch")
    return payload


def _at(exc: OSError, path: Path) -> OSError:
    """The error with the file it happened to (os.pwrite does not say)."""
    if exc.filename is not None:
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def _preallocate(fd: int, length: int, need_room: int = 0) -> None:
    # Without fallocate here (or without the room), the file grows with its appends
    # instead; but ``need_room`` bytes of it must be had.
    try:
        os.posix_fallocate(fd, 0, length)
    except AttributeError:
        pass
    except OSError as exc:
        if need_room and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            os.posix_fallocate(fd, 0, min(length, need_room))


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


pickle_by_fields(__name__)
