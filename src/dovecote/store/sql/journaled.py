"""The journaled SQL store (compatibility M4): a fast journal in front of the SQL store.

A write is appended to journal data files (the same record format as the journal store,
see ../journal/FORMAT.md) and fsynced with its group; the operations also gather in a
*window* in memory. A checkpoint (every ``checkpoint_interval_ms``, when the window grows
past ``checkpoint_max_ops``, and at stop) folds the window (a queue message added and
consumed inside it cancels out, so it never reaches the database) and applies what is left
to the SQL tables in one transaction that also records the journal position it covers.
Journal files wholly before that position are then deleted.

On start, the journal after the recorded position is replayed into the window and
checkpointed at once, so the tables hold everything before the broker recovers from them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from pathlib import Path

from dovecote.core.destinations import Destination
from dovecote.store.api import (
    RecoveredState,
    RemoveDestination,
    RemoveMessage,
    StoreOp,
    UpdateRedelivery,
)
from dovecote.store.groupcommit import GroupWriter, written
from dovecote.store.journal.datafiles import DataFiles, Location
from dovecote.store.journal.records import (
    JournalOp,
    SequencedAdd,
    adds_to_store,
    decode_batch,
    encode_batch,
    sequence,
)
from dovecote.store.sql.adapter import SqlPersistenceAdapter

log = logging.getLogger("dovecote.store.journaled_sql")


def fold(window: list[JournalOp]) -> list[JournalOp]:
    """The window's net effect: a queue message added and removed inside it disappears;
    a redelivery count for one added inside it is folded into the add."""
    out: list[JournalOp | None] = []
    added: dict[tuple[str, str], int] = {}
    for op in window:
        match op:
            case SequencedAdd(_, message) if message.destination.is_queue:
                added[(str(message.destination), message.message_id)] = len(out)
                out.append(op)
            case RemoveMessage(destination, message_id) if (str(destination), message_id) in added:
                out[added.pop((str(destination), message_id))] = None
            case UpdateRedelivery(destination, message_id, counter) if (
                str(destination), message_id,
            ) in added:  # fmt: skip
                i = added[(str(destination), message_id)]
                add = out[i]
                assert isinstance(add, SequencedAdd)
                out[i] = SequencedAdd(add.seq, add.message.with_redelivery(counter))
            case RemoveDestination(destination):
                for key in [k for k in added if k[0] == str(destination)]:
                    out[added.pop(key)] = None
                out.append(op)
            case _:
                out.append(op)
    return [op for op in out if op is not None]


class JournaledSqlPersistenceAdapter:
    def __init__(
        self,
        journal_directory: Path,
        sql: SqlPersistenceAdapter,
        max_file_length: int = 32 * 1024 * 1024,
        disk_syncs: bool = True,
        checkpoint_interval_ms: int = 5_000,
        checkpoint_max_ops: int = 100_000,
    ) -> None:
        self.directory = journal_directory
        self.sql = sql
        self.max_file_length = max_file_length
        self.disk_syncs = disk_syncs
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.checkpoint_max_ops = checkpoint_max_ops
        self._files: DataFiles | None = None
        self._window: list[JournalOp] = []
        self._window_end = Location(0, 0)
        self._writer = GroupWriter(self._write_group, self._after_group, adds=adds_to_store)
        self._ticker: asyncio.Task[None] | None = None
        self._next_seq = 1
        self.checkpoints = 0
        self.folded_away = 0
        """How many operations checkpoints kept out of the database (for tests and stats)."""

    async def start(self) -> None:
        await self.sql.start()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._files = DataFiles(self.directory, self.max_file_length)
        covered = self.sql.checkpoint_position()
        start = Location(*covered) if covered else None
        top = self.sql.next_seq - 1
        for _, payload in self._files.scan(start):
            ops = decode_batch(payload)
            self._window.extend(ops)
            top = max([top, *(op.seq for op in ops if isinstance(op, SequencedAdd))])
        self._next_seq = top + 1
        # Never write below a position the tables already claim to cover.
        self._files.open_for_append(first_id=covered[0] + 1 if covered else 1)
        self._window_end = self._files.head
        self._writer.probe = self._files.roll
        if self._window:
            log.info("journaled SQL: %d operations in the journal tail", len(self._window))
        await self._checkpoint_now()
        self._writer.start()
        if self.checkpoint_interval_ms > 0:
            self._ticker = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        await self._writer.stop()
        if self._files is not None:
            await self._checkpoint_now()
            self._files.close()
            self._files = None
        await self.sql.stop()

    def write(
        self, batch: Sequence[StoreOp], sync: bool = True, lazy: bool = False
    ) -> Awaitable[None]:
        if not batch:
            return written()
        ops, self._next_seq = sequence(batch, self._next_seq)
        return self._writer.submit(ops, urgent=not lazy)

    async def _write_group(self, group: list[list[JournalOp]]) -> None:
        files = self._files
        assert files is not None
        for ops in group:
            files.append(encode_batch(ops))
        end = files.head
        await files.sync(self.disk_syncs)
        for ops in group:
            self._window.extend(ops)
        self._window_end = end

    @property
    def degraded(self) -> str | None:
        """Why the store is in degraded mode (store/health.py), or None."""
        return self._writer.degraded

    async def _after_group(self) -> None:
        if len(self._window) >= self.checkpoint_max_ops:
            await self._checkpoint_now()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.checkpoint_interval_ms / 1000)
            await self._writer.run_exclusive(self._checkpoint_now)

    async def _checkpoint_now(self) -> None:
        """Move the window into SQL; runs between groups, never during one."""
        files = self._files
        assert files is not None
        # The window covers the journal up to ``_window_end``, and only that is claimed.
        window, self._window = self._window, []
        head = self._window_end
        net = fold(window)
        self.folded_away += len(window) - len(net)
        await self.sql.apply_checkpoint(net, (head.file_id, head.offset))
        self.checkpoints += 1
        # Everything before the head is in the tables now: older journal files can go.
        for file_id in list(files.file_ids):
            if file_id < head.file_id:
                files.delete(file_id)

    def checkpoint(self) -> None:
        """The periodic task and the size trigger checkpoint; nothing to do synchronously."""

    def recover(self) -> RecoveredState:
        return self.sql.recover()

    def message_count(self, destination: Destination) -> int:
        pending = fold(self._window)
        count = self.sql.message_count(destination)
        for op in pending:
            if isinstance(op, SequencedAdd) and op.message.destination == destination:
                count += 1
            elif isinstance(op, RemoveMessage) and op.destination == destination:
                count -= 1
        return count
