"""The journal store (compatibility M2), KahaDB's design: an append-only journal as the truth and an
LMDB index as its view. FORMAT.md beside this file describes the bytes on disk.

``write`` hands a batch to the group writer: every batch queued at that moment is appended
as a record and fsynced once for all of them (group commit; skipped when disk syncs are off);
then their writers wake. The index catches up a moment later, in one transaction for every
group since the last (see ``_catch_up``), and before anything reads it. Start takes
the directory's lock (a second broker waits, logging that it is a slave), replays the journal
tail the index has not seen, and truncates a torn last record. Reading everything back
(recovery.py), compaction (compaction.py) and damage (damage.py) have modules of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Generator, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import lmdb

from dovecote.core.destinations import Destination, parse_destination
from dovecote.core.errors import StoreFailedError
from dovecote.core.message import Message
from dovecote.store.api import (
    PagedRecovery,
    QueuePage,
    QueuePosition,
    RecoveredState,
    StoredQueue,
    StoreOp,
)
from dovecote.store.groupcommit import GroupWriter, written
from dovecote.store.health import INDEX
from dovecote.store.journal.catchup import (
    APPLY_NOW,
    CATCH_UP_SLICE_OPS,
    HOLD,
    INDEX_DELAY_S,
    INDEX_HOLD_ADDS,
    INDEX_HOLD_BYTES,
    INDEX_HOLD_S,
    WaitingRecords,
    slices,
)
from dovecote.store.journal.compaction import compaction_ops
from dovecote.store.journal.damage import (
    INDEX_DAMAGE,
    check_journal,
    forget_lost,
    usable_index,
)
from dovecote.store.journal.datafiles import DamagedRecordError, DataFiles, Location
from dovecote.store.journal.filelock import take_lock
from dovecote.store.journal.index import Index
from dovecote.store.journal.records import (
    BatchEncoder,
    BlockStarts,
    JournalOp,
    PagedRecord,
    batch_adds,
    forget_blocks,
    group_records,
    message_bytes,
    sequence,
    with_counter,
)
from dovecote.store.journal.recovery import index_matches, read_back, replay

log = logging.getLogger("dovecote.store.journal")

DEFAULT_MAX_FILE_LENGTH: Final = 32 * 1024 * 1024


class StoreLockedError(Exception):
    pass


class JournalPersistenceAdapter:
    def __init__(
        self,
        directory: Path,
        max_file_length: int = DEFAULT_MAX_FILE_LENGTH,
        disk_syncs: bool = True,
        compact_live_limit: int = 1000,
        index_delay_s: float = INDEX_DELAY_S,
        check_files: bool = False,
        index_hold: tuple[int, float, int] = (INDEX_HOLD_ADDS, INDEX_HOLD_S, INDEX_HOLD_BYTES),
    ) -> None:
        self.directory = directory
        self.check_files = check_files
        """Check every record's checksum at start (checkForCorruptJournalFiles)."""
        self.max_file_length = max_file_length
        self.disk_syncs = disk_syncs
        self.compact_live_limit = compact_live_limit
        self._lock_fd = -1
        self._files: DataFiles | None = None
        self._index: Index | None = None
        self._next_seq = 1
        self._writer = GroupWriter(
            self._write_group, self._after_group, adds=batch_adds, write_now=self._write_now
        )
        self._encoder = BatchEncoder()
        self._blocks: BlockStarts = {}
        """Adds that begin an Append block, until their record is written (BatchEncoder)."""
        self._waiting = WaitingRecords(index_delay_s, index_hold)
        """Groups written (durable) but not yet applied to the index."""
        self._catch_up_timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._catching_up: Generator[None, None, None] | None = None
        """A catch-up the writer left between two slices (its transaction open; nothing is
        written until it ends: the writer alone writes)."""
        self._stepped_aside = False
        """The last due catch-up let a waiting group be written first (it goes first next)."""
        self._index_changed = True
        """The index moved since the last checkpoint (live counts change only then)."""
        self._paging: dict[Location, PagedRecord] = {}
        """Records ``read_queue`` read lately (queues paged in by turns), as far as decoded."""

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = await take_lock(self.directory)
        self._open()
        self._writer.start()

    def _open(self) -> None:
        # (Not in ``start``: compiled, an async def let these LMDB errors pass its except.)
        # This adapter reports damage itself, with the messages lost by destination.
        self._files = DataFiles(self.directory, self.max_file_length, report_damage=False)
        self._index = self._open_index()
        if self.check_files:
            check_journal(self._files, self._index)
        try:
            replay(self._files, self._index)
        except lmdb.Error as exc:  # a page LMDB finds damaged while replay writes
            self._rebuild_index(exc)
        self._files.open_for_append()
        self._writer.probe = self._files.roll
        try:
            self._mark_started()
        except lmdb.Error as exc:
            self._rebuild_index(exc)
            self._mark_started()

    def _mark_started(self) -> None:
        index, files = self._index, self._files
        assert index is not None and files is not None
        with index.env.begin(write=True) as txn:
            index.note_file(txn, files.current_id)
            index.mark_version(txn)
            index.mark_applied(txn, files.head)
        self._next_seq = index.last_seq() + 1

    def _open_index(self) -> Index:
        assert self._files is not None
        path = self.directory / "index"
        if not usable_index(path, bool(self._files.file_ids)):  # before LMDB maps it
            return self._new_index()
        try:
            index = Index(str(path))
            if index_matches(self._files, index):
                return index
            index.env.close()
            log.warning("journal index at %s does not match the journal; rebuilding it", path)
        except lmdb.Error as exc:
            log.warning("journal index at %s is damaged (%s); rebuilding it", path, exc)
        return self._new_index()

    def _rebuild_index(self, exc: lmdb.Error) -> None:
        """The index met damage LMDB reports (a page of the wrong type, say): it is built
        again from the journal, at once, and the read that met it is retried. Any other
        LMDB error (a full disk, an I/O error) is raised: a rebuild would meet it too."""
        if not isinstance(exc, INDEX_DAMAGE):
            raise exc
        log.warning("journal index is damaged (%s); rebuilding it from the journal", exc)
        if self._catching_up is not None:
            self._catching_up.close()  # (its transaction aborted; the replay applies it)
        if self._index is not None:
            with contextlib.suppress(lmdb.Error):
                self._index.env.close()
        self._all_applied()  # (written groups not applied yet: the replay applies them)
        self._index = self._new_index()
        assert self._files is not None
        replay(self._files, self._index)
        with self._index.env.begin(write=True) as txn:
            self._index.mark_version(txn)
        self._index_changed = True

    def _new_index(self) -> Index:
        path = self.directory / "index"
        if path.exists():  # (a rebuild; shutil is not imported by a fresh start)
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        return Index(str(path))

    async def stop(self) -> None:
        await self._writer.stop()
        if self._index is not None:
            # (Failing, it was logged: the next start replays those records.)
            with contextlib.suppress(StoreFailedError):
                self._catch_up()
        if self._files is not None:
            # Writes nobody waited for are synced by a clean stop, as KahaDB's close does.
            await self._files.sync(self.disk_syncs)
            self._files.close()
            self._files = None
        if self._index is not None:
            self._index.close()
            self._index = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = -1

    # -- writing ---------------------------------------------------------------------------

    def write(
        self, batch: Sequence[StoreOp], sync: bool = True, lazy: bool = False
    ) -> Awaitable[None]:
        if not batch:
            return written()
        blocks = self._blocks
        known = len(blocks)
        ops, self._next_seq = sequence(batch, self._next_seq, blocks)
        mine = list(blocks)[known:] if len(blocks) > known else None
        future = self._writer.submit((ops, sync), urgent=not lazy)
        if mine:
            future.add_done_callback(partial(forget_blocks, blocks, mine))
        return future

    async def _write_group(self, group: list[tuple[list[JournalOp], bool]]) -> None:
        files = self._files
        assert files is not None
        files.prepare(message_bytes(group))
        start = files.head
        try:
            written, size = self._append(group)
            # One fsync covers every batch of the group: the group commit. A group of
            # batches that asked for none (acks nobody waits for) is left to the next one.
            await files.sync(self.disk_syncs and any(sync for _, sync in group))
        except OSError:
            # Its writers are told it failed (a full disk): the journal must not keep it,
            # or a replay would apply what the index never saw.
            files.rewind(start)
            raise
        self._written(written, size)

    def _write_now(self, group: list[tuple[list[JournalOp], bool]]) -> bool:
        """``_write_group`` now if that needs no wait (a fast fsync); else False, unwritten."""
        files = self._files
        assert files is not None
        syncs = self.disk_syncs and any(sync for _, sync in group)
        expected = message_bytes(group)
        if syncs and not files.syncs_inline(expected):
            return False
        if self._index_due():
            return False  # the writer brings the index up to date after this group
        files.prepare(expected)
        start = files.head
        try:
            written, size = self._append(group)
            if syncs:
                files.sync_now()
        except OSError:
            files.rewind(start)
            raise
        self._written(written, size)
        if self._index_due():
            self._writer.wake()  # (asleep: this group was written in its writer's turn)
        return True

    def _append(
        self, group: list[tuple[list[JournalOp], bool]]
    ) -> tuple[list[tuple[Location, list[JournalOp]]], int]:
        """Append a group's records: where each went, and their bytes."""
        files = self._files
        assert files is not None
        written: list[tuple[Location, list[JournalOp]]] = []
        size = 0
        encoder = self._encoder
        for ops in group_records([batch for batch, _ in group]):
            parts = encoder.parts(ops, self._blocks)
            try:
                size += sum(map(len, parts))
                written.append((files.append(*parts), ops))
            finally:
                encoder.release()
        return written, size

    def _written(self, written: list[tuple[Location, list[JournalOp]]], size: int) -> None:
        """A group is durable: the index is to catch up with it."""
        assert self._files is not None
        head = self._files.head
        # The index is a view the journal can rebuild: it is not brought up to date before
        # the writers wake (their receipts need only the fsync) but a moment later, between
        # groups, for several groups in one transaction. A crash before that replays them.
        loop = asyncio.get_running_loop()
        action = self._waiting.note(written, size, head, loop.time())
        if action == APPLY_NOW:
            with contextlib.suppress(StoreFailedError):  # written: the index catches up later
                self._catch_up()
        elif action == HOLD or self._catch_up_timer is None:
            # (A bulk load's hold: the catch-up waits for its consumers, INDEX_HOLD_ADDS.)
            if self._catch_up_timer is not None:
                self._catch_up_timer.cancel()
            delay = self._waiting.due - loop.time()
            self._catch_up_timer = loop.call_later(delay, self._writer.wake)

    def _index_due(self) -> bool:
        """Groups written that the index is to catch up with now (enough, or their time)."""
        return self._waiting.is_due(self._writer.loop.time())

    def _index_behind(self) -> bool:
        """Whether written records wait for the index. (A method: in ``_after_group``, mypy
        keeps the attribute narrowed to not None across the catch-up, and mypyc trusts it.)"""
        return self._waiting.head is not None

    def _catch_up(self, records: int = -1) -> None:
        """Apply every written group the index has not seen (the first ``records`` records
        only, if given), in one transaction: in the writer between groups, and before any read
        of the index (finishing one left between slices first)."""
        if self._catching_up is not None:
            for _ in self._catching_up:
                pass
        if self._index_behind():
            whole = len(self._waiting.records)
            self._catching_up = self._applying(0, whole if records < 0 else records)
            for _ in self._catching_up:
                pass

    async def _catch_up_by_slices(self, records: int) -> None:
        """A slice at a time, the loop's other work between (a crash: all left to replay)."""
        self._catching_up = self._catching_up or self._applying(CATCH_UP_SLICE_OPS, records)
        for _ in self._catching_up:
            await asyncio.sleep(0)

    def _applying(self, ops_per_slice: int, records: int) -> Generator[None, None, None]:
        """The catch-up of the first ``records`` records waiting, pausing (yielding) between
        slices of ``ops_per_slice`` (0: none)."""
        index = self._index
        assert index is not None
        pieces = slices(self._waiting.records[:records], ops_per_slice)
        head = self._waiting.end_of(records)
        txn = index.begin()
        try:
            # What cancels out is found across the whole catch-up (a slice at a time too): a
            # bulk load's adds and the removals a hold brings to them are many slices apart.
            left_out = None
            for found in index.left_out(txn, pieces, ops_per_slice):
                if found is None:
                    yield
                left_out = found
            assert left_out is not None
            for i, piece in enumerate(pieces):
                if i:
                    yield
                index.apply_records(txn, piece, left_out)
            index.raise_top_seq(txn, left_out[1])
            index.mark_applied(txn, head)
            index.commit(txn)
        except lmdb.Error as exc:
            index.abort(txn)
            self._catching_up = None
            if isinstance(exc, INDEX_DAMAGE):
                self._rebuild_index(exc)  # which applies these records too
                return
            # (A full disk.) Nothing of it counted: the same records are applied again by
            # the next catch-up; until then reads that need the index fail.
            reason = f"the store's index could not be updated: {exc}"
            self._writer.health.failed(INDEX, reason)
            raise StoreFailedError(reason) from exc
        except BaseException:  # (GeneratorExit too: a catch-up abandoned, as by a rebuild)
            index.abort(txn)
            raise
        finally:
            self._catching_up = None
        self._writer.health.repaired(INDEX)
        if records < len(self._waiting.records):
            self._waiting.applied(records)
        else:
            self._all_applied()
        self._index_changed = True

    def _all_applied(self) -> None:
        """No written group is left for the index to catch up with."""
        if self._catch_up_timer is not None:
            self._catch_up_timer.cancel()
            self._catch_up_timer = None
        self._waiting.clear()

    @property
    def degraded(self) -> str | None:
        """Why the store is in degraded mode (store/health.py), or None."""
        return self._writer.degraded

    async def _after_group(self) -> None:
        if self._index_behind():
            if not self._index_due():
                return  # not yet: the timer wakes the writer
            # Those just woken go first (a commit's enqueue and answer): the index is a view.
            await asyncio.sleep(0)
            records = self._waiting.due_count(self._writer.loop.time())
            large = self._waiting.ops > CATCH_UP_SLICE_OPS
            if large and self._writer.waiting and not self._stepped_aside:
                # A commit queued behind a large catch-up (Spark's other partition) is written
                # first, once; the catch-up then applies both groups in one transaction.
                self._stepped_aside = True
                return
            self._stepped_aside = False
            try:
                if large:
                    await self._catch_up_by_slices(records)
                else:
                    self._catch_up(records)
            except StoreFailedError:
                return  # logged; the next group tries again
            if self._index_behind():
                return  # a hold goes on: files are removed after its catch-up
        # Whoever brought the index up to date (this, a large group, a read), the files it
        # shows dead go now; while it has not moved, the answer would be the same.
        if not self._index_changed:
            return
        self._index_changed = False
        self.checkpoint()
        assert self._files is not None and self._index is not None
        moves = compaction_ops(
            self._files, self._index, self.compact_live_limit, self.max_file_length,
            self._forget_lost,
        )  # fmt: skip
        if moves:
            # Built and written in the writer task, between groups: no other write can come
            # between reading what is live and recording its move.
            await self._write_group([(moves, True)])
            self._catch_up()
            self.checkpoint()
            self._index_changed = False

    # -- reading ---------------------------------------------------------------------------

    def recover(self) -> RecoveredState:
        try:
            return self._recover(queues=True)
        except lmdb.Error as exc:
            self._rebuild_index(exc)
            return self._recover(queues=True)

    def _recover(self, queues: bool) -> RecoveredState:
        assert self._files is not None and self._index is not None
        self._catch_up()
        return read_back(self._files, self._index, queues, self._forget_lost)

    def recover_paged(self) -> PagedRecovery:
        """Each queue's count and bytes from the index alone (the broker pages its messages
        in with ``read_queue``); durable subscriptions as ``recover`` gives them."""
        try:
            return self._recover_paged()
        except lmdb.Error as exc:
            self._rebuild_index(exc)
            return self._recover_paged()

    def _recover_paged(self) -> PagedRecovery:
        index = self._index
        assert index is not None
        self._catch_up()
        state = PagedRecovery()
        if next(index.subscriptions(), None) is not None:
            state.subscriptions = self._recover(queues=False).subscriptions
        for name, (count, size, last) in index.queue_totals().items():
            state.queues[parse_destination(name)] = StoredQueue(count, size, last)
        return state

    def read_queue(self, destination: Destination, start: QueuePosition, limit: int) -> QueuePage:
        """Up to ``limit`` stored messages of a queue from ``start`` on, whole, in order."""
        try:
            return self._read_queue(destination, start, limit)
        except lmdb.Error as exc:
            self._rebuild_index(exc)
            return self._read_queue(destination, start, limit)

    def _read_queue(self, destination: Destination, start: QueuePosition, limit: int) -> QueuePage:
        index = self._index
        assert index is not None and self._files is not None
        self._catch_up()
        messages: list[Message] = []
        lost = lost_bytes = 0
        position = start
        # Until a message is found or the queue ends: a page of nothing but lost messages
        # would tell the broker the queue is empty.
        while not messages:
            rows = index.queue_page(str(destination), position, limit)
            if not rows:
                break
            position = (rows[-1][0], rows[-1][1] + 1)
            # Messages sent together share a record: each record is read and decoded once.
            records: dict[Location, dict[int, Message]] = {}
            damaged: dict[Location, tuple[str, list[int]]] = {}
            missing: set[int] = set()
            for _, seq, entry in rows:
                if entry[2] in missing:
                    continue  # forgotten with the rest of its file, and counted
                location = Location(entry[2], entry[3])
                adds = records.get(location)
                if location not in damaged and (adds is None or seq not in adds):
                    try:
                        adds = records[location] = self._record_adds(location, seq)
                    except (DamagedRecordError, OSError, ValueError) as exc:
                        if not self._files.path(location.file_id).exists():
                            # A data file gone: all of this queue's messages in it at once,
                            # in one log line, not a line per record.
                            missing.add(location.file_id)
                            seqs = index.queue_seqs_in_file(str(destination), location.file_id)
                            gone = self._forget_lost(f"db-{location.file_id}.log", seqs, "missing")
                            lost += len(gone)
                            lost_bytes += sum(gone_entry[9] for gone_entry in gone)
                            continue
                        damaged[location] = (str(exc), [])
                message = None if adds is None else adds.get(seq)
                if message is None:
                    if location not in damaged:
                        damaged[location] = (f"it has no message {seq}", [])
                    damaged[location][1].append(seq)
                    lost += 1
                    lost_bytes += entry[9]
                else:
                    messages.append(with_counter(message, entry[4]))
            for location, (why, seqs) in damaged.items():
                where = f"db-{location.file_id}.log record at offset {location.offset}"
                self._forget_lost(where, seqs, why)
            for location in records:
                if (kept := self._paging.get(location)) and kept.read_past(position[1]):
                    del self._paging[location]  # read to its end
            if len(rows) < limit:
                break
        return QueuePage(messages, position, lost, lost_bytes)

    def _record_adds(self, location: Location, seq: int) -> dict[int, Message]:
        """A record's messages by seq, decoded up to ``seq`` (records.PagedRecord: decoded
        whole for every page, a big transaction's record took minutes of the loop)."""
        kept = self._paging.get(location)
        if kept is None:
            assert self._files is not None
            kept = self._paging[location] = PagedRecord(self._files.read_payload(location))
            if len(self._paging) > PagedRecord.KEPT:
                del self._paging[next(iter(self._paging))]
        return kept.through(seq)

    def _forget_lost(self, where: str, seqs: list[int], why: str) -> list[list[Any]]:
        """Messages whose record cannot be read back are lost: dropped from the index (the
        journal keeps nothing of them a replay could apply), with one log line."""
        assert self._index is not None
        self._index_changed = True
        return forget_lost(self._index, where, seqs, why)

    def message_count(self, destination: Destination) -> int:
        try:
            return self._message_count(destination)
        except lmdb.Error as exc:
            self._rebuild_index(exc)
            return self._message_count(destination)

    def _message_count(self, destination: Destination) -> int:
        index = self._index
        assert index is not None
        self._catch_up()
        if destination.is_queue:
            return index.queue_count(str(destination))
        name = str(destination)
        return sum(1 for _, entry in index.messages() if entry[0] == name)

    def stored_message_ids(self) -> Iterator[str]:
        """Every live message's id, from the index's keys alone (store/producers.py)."""
        assert self._index is not None
        self._catch_up()
        return self._index.message_ids()

    # -- checkpoints: removing and compacting data files -------------------------------------

    def checkpoint(self) -> None:
        """Delete dead data files, oldest first (see FORMAT.md for why in order)."""
        files, index = self._files, self._index
        self._paging.clear()
        if files is None or index is None or len(files.file_ids) < 2:
            return  # only the file being written: nothing could be removed (the usual case)
        self._catch_up()
        counts = index.live_counts()
        for file_id in list(files.file_ids):
            if file_id == files.current_id or counts.get(file_id, (0, 0))[0] > 0:
                break
            files.delete(file_id)
            index.forget_file(file_id)
