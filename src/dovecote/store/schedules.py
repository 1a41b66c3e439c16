"""Where the scheduler keeps its jobs (compatibility D5): a contract, a memory store and a log file.

ActiveMQ keeps its job scheduler in a store of its own beside the message store (a second
KahaDB under the data directory, whatever the persistence adapter, JDBC included); so does
dovecote. The scheduler holds every job in memory and tells the store each change; the
store's only other duty is to give the jobs back at start.

- ``MemoryJobStore``: nothing is kept (a broker on the memory store, ActiveMQ's
  InMemoryJobSchedulerStore): jobs live as long as the process.
- ``JobLog``: an append-only log file, for every persistent store (the journal, SQLite,
  PostgreSQL): ``<data_dir>/scheduler/jobs.log``. A file rather than a table in the SQL
  store because it is one small design for all three, and because a schedule is the
  broker's own state, not a message: ActiveMQ makes the same choice.

FORMAT
======

The file starts with the 8 bytes ``DVSCHED1``. Then frames, each one batch of changes that
``write`` was given, applied all or not at all:

    length  u32 big-endian   bytes of the payload
    crc     u32 big-endian   zlib.crc32 of the payload
    payload msgpack          a list of records

A record is a msgpack list whose first item says what it is:

    [1, job_id, start, cron, delay, period, repeat, next_time, fresh_ids, fired, message]
        a new job; ``message`` in store/messagecodec.py's list form
    [2, job_id, next_time, repeat, fired]
        a job fired and goes on: its next time, the repeats it has left, times fired
    [3, job_id]
        a job is gone (fired for the last time, or removed by an admin)

Reading replays the frames in order; a record about a job not known is ignored (its
removal came first). A frame cut short or failing its crc ends the log: it is the tail a
crash cut while it was being written (its ``write`` never returned), and the file is
truncated there. When the file holds four times the bytes the live jobs need (and at
least ``COMPACT_MIN_BYTES``), it is rewritten: the live jobs as one frame in a new file,
synced, then renamed over the old one, and the directory synced.

Every ``write`` is fsynced before it returns (unless disk syncs are off in the
configuration): a scheduled persistent send's response or receipt follows it (compatibility M7).
Writes made while one group is being synced form the next group: one write and one fsync
for all of them (each still a frame of its own).
"""

from __future__ import annotations

import asyncio
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgpack

from dovecote.core.message import Message
from dovecote.store.messagecodec import decode_message, encode_message

MAGIC = b"DVSCHED1"
COMPACT_MIN_BYTES = 1024 * 1024
_FRAME = struct.Struct(">II")
_ADD, _RESCHEDULE, _REMOVE = 1, 2, 3


@dataclass(slots=True)
class StoredJob:
    """One scheduled message and where its schedule stands."""

    job_id: str
    message: Message
    """As sent, with its AMQ_SCHEDULED_* properties and without its transaction."""
    start: int
    """When it was scheduled, in ms since the epoch (rounded up to 500 ms, as ActiveMQ)."""
    cron: str
    delay: int
    period: int
    repeat: int
    """Repeats left; negative: without end."""
    next_time: int
    fresh_ids: bool
    """Each delivered copy gets a new message id (a repeating or cron job's copies)."""
    fired: int = 0


class JobStore(Protocol):
    def load(self) -> list[StoredJob]:
        """The jobs stored, in the order they were added (at start, before any write)."""

    async def write(
        self,
        added: Sequence[StoredJob] = (),
        rescheduled: Sequence[StoredJob] = (),
        removed: Sequence[str] = (),
    ) -> None:
        """Record the changes, all or none; durable when this returns."""

    async def close(self) -> None: ...


class MemoryJobStore:
    """The scheduler's own memory is the store: nothing outlives the process."""

    def load(self) -> list[StoredJob]:
        return []

    async def write(
        self,
        added: Sequence[StoredJob] = (),
        rescheduled: Sequence[StoredJob] = (),
        removed: Sequence[str] = (),
    ) -> None:
        return None

    async def close(self) -> None:
        return None


class JobLog:
    """The append-only log the FORMAT section describes."""

    def __init__(self, directory: Path, sync: bool = True) -> None:
        self.path = directory / "jobs.log"
        self.sync = sync
        self._file: Any = None
        self._live: dict[str, int] = {}
        """Each live job and the bytes it takes in a rewritten log."""
        self._live_bytes = 0
        self._waiting: list[tuple[bytes, asyncio.Future[None]]] = []
        """Frames written while the previous group is being synced: the next group."""
        self._writer: asyncio.Task[None] | None = None

    def load(self) -> list[StoredJob]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        jobs = self._replay()
        self._live = {job_id: len(_pack([_add_record(job)])) for job_id, job in jobs.items()}
        self._live_bytes = sum(self._live.values())
        self._file = open(self.path, "ab")  # noqa: SIM115 - kept open for appends
        if self._file.tell() == 0:
            self._file.write(MAGIC)
            self._flush()
        return list(jobs.values())

    def _replay(self) -> dict[str, StoredJob]:
        jobs: dict[str, StoredJob] = {}
        if not self.path.exists():
            return jobs
        data = self.path.read_bytes()
        if not data.startswith(MAGIC):
            if len(data) >= len(MAGIC):
                raise OSError(f"{self.path} is not a dovecote scheduler log")
            data = b""  # a crash while the file was being created
        offset = good = len(MAGIC) if data else 0
        while offset + _FRAME.size <= len(data):
            length, crc = _FRAME.unpack_from(data, offset)
            payload = data[offset + _FRAME.size : offset + _FRAME.size + length]
            if len(payload) < length or zlib.crc32(payload) != crc:
                break
            for record in msgpack.unpackb(payload, raw=False, strict_map_key=False):
                _apply(jobs, record)
            offset += _FRAME.size + length
            good = offset
        if good < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())
        return jobs

    async def write(
        self,
        added: Sequence[StoredJob] = (),
        rescheduled: Sequence[StoredJob] = (),
        removed: Sequence[str] = (),
    ) -> None:
        records: list[list[Any]] = [_add_record(job) for job in added]
        records += [[_RESCHEDULE, j.job_id, j.next_time, j.repeat, j.fired] for j in rescheduled]
        records += [[_REMOVE, job_id] for job_id in removed]
        if not records:
            return
        for job in added:
            self._live[job.job_id] = size = len(_pack([_add_record(job)]))
            self._live_bytes += size
        for job_id in removed:
            self._live_bytes -= self._live.pop(job_id, 0)
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((_pack(records), done))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_groups())
        await done

    async def _write_groups(self) -> None:
        """Group commit: each group of frames in one write and one fsync, in order."""
        while self._waiting:
            group, self._waiting = self._waiting, []
            try:
                await asyncio.to_thread(self._append, b"".join(frame for frame, _ in group))
            except Exception as exc:  # each writer hears of it; the trace goes with it
                for _, done in group:
                    done.set_exception(exc)
            else:
                for _, done in group:
                    done.set_result(None)
        self._writer = None

    def _append(self, frames: bytes) -> None:
        self._file.write(frames)
        self._flush()
        if self._file.tell() > max(COMPACT_MIN_BYTES, 4 * self._live_bytes):
            self._compact()

    def _flush(self) -> None:
        self._file.flush()
        if self.sync:
            os.fsync(self._file.fileno())

    def _compact(self) -> None:
        """Rewrite the log as its live jobs (by the group writer, off the loop)."""
        self._file.close()
        jobs = self._replay()
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            if jobs:
                f.write(_pack([_add_record(job) for job in jobs.values()]))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self._file = open(self.path, "ab")  # noqa: SIM115

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer
        if self._file is not None:
            self._file.close()
            self._file = None


def _add_record(job: StoredJob) -> list[Any]:
    return [
        _ADD, job.job_id, job.start, job.cron, job.delay, job.period, job.repeat,
        job.next_time, job.fresh_ids, job.fired, encode_message(job.message),
    ]  # fmt: skip


def _pack(records: list[list[Any]]) -> bytes:
    payload = bytes(msgpack.packb(records, use_bin_type=True))
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _apply(jobs: dict[str, StoredJob], record: list[Any]) -> None:
    kind, job_id = record[0], record[1]
    if kind == _ADD:
        start, cron, delay, period, repeat, next_time, fresh_ids, fired, message = record[2:]
        jobs[job_id] = StoredJob(
            job_id, decode_message(message), start, cron, delay, period, repeat, next_time,
            fresh_ids, fired,
        )  # fmt: skip
    elif kind == _RESCHEDULE:
        job = jobs.get(job_id)
        if job is not None:
            job.next_time, job.repeat, job.fired = record[2], record[3], record[4]
    elif kind == _REMOVE:
        jobs.pop(job_id, None)
