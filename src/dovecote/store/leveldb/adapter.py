"""The LevelDB store (compatibility M5): the store contract in one LevelDB database through plyvel,
laid out as FORMAT.md beside this file says.

``write`` hands a batch to the group writer; every batch queued at that moment becomes one
WriteBatch, written with LevelDB's own log synced when any of them is waited for. Queues are
read back a page at a time (PagingStore), so a large backlog is not loaded at start. Start
opens the database, whose LOCK keeps a second broker waiting as a slave.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import plyvel

from dovecote.core.destinations import Destination, parse_destination
from dovecote.core.errors import StoreFailedError
from dovecote.core.message import Message
from dovecote.store.api import (
    DurableSubscription,
    PagedRecovery,
    QueuePage,
    QueuePosition,
    RecoveredState,
    RecoveredSubscription,
    StoredQueue,
    StoreOp,
)
from dovecote.store.groupcommit import GroupWriter, written
from dovecote.store.journal.datafiles import (
    INLINE_SYNC_LIMIT_S,
    INLINE_SYNC_MAX_BYTES,
    PROBE_ROOM,
)
from dovecote.store.journal.records import JournalOp, SequencedAdd, adds_to_store, sequence
from dovecote.store.leveldb.layout import (
    COUNT,
    COUNTS,
    LAYOUT_VERSION,
    PENDING,
    POSITION,
    QUEUE,
    QUEUE_ID,
    SEQ_KEY,
    SUBSCRIPTION,
    TOPIC,
    TOPIC_ID,
    U32,
    U64,
    VERSION_KEY,
    GroupChanges,
    SubscriptionKey,
    queue_key,
    queue_prefix,
    stored_message,
    unpack,
)

log = logging.getLogger("dovecote.store.leveldb")
R = TypeVar("R")

LOCK_POLL_S: Final = 0.5
PROBE_KEY: Final = b"mprobe"


def _reason(exc: BaseException) -> str:
    """plyvel's message as an operator reads it (it gives LevelDB's status as bytes)."""
    text = str(exc)
    if text[:2] in ("b'", 'b"') and text[-1:] == text[1]:
        text = text[2:-1]
    return text


def _locked(exc: plyvel.Error) -> bool:
    """Whether opening failed on LevelDB's LOCK: another broker (or this process) holds it."""
    text = _reason(exc)
    return "LOCK" in text and ("unavailable" in text or "already held" in text)


def _group_bytes(group: list[tuple[list[JournalOp], bool]]) -> int:
    return sum(op.message.size for ops, _ in group for op in ops if isinstance(op, SequencedAdd))


def _batch_adds(item: tuple[list[JournalOp], bool]) -> bool:
    return adds_to_store(item[0])


Changes = dict[bytes, bytes | None]
"""One group's puts and deletes (None: delete), as one WriteBatch writes them."""


class GroupObserver(Protocol):
    """Sees each group the store writes (the replicated store: it ships them to slaves)."""

    def prepare(self, changes: Changes) -> None:
        """Before the group is written (perhaps in a worker thread): may add keys of its own,
        or refuse the group by raising StoreFailedError."""

    async def written(self, changes: Changes, wanted: bool) -> None:
        """Once the group is written; its writers are answered when this returns (what it
        raises fails them). ``wanted``: some batch of the group is waited for."""


class LevelDBPersistenceAdapter:
    def __init__(self, directory: Path, disk_syncs: bool = True) -> None:
        self.directory = directory
        self.disk_syncs = disk_syncs
        self._db: Any = None
        self._subscriptions: dict[SubscriptionKey, Destination] = {}
        self._next_seq = 1
        self._writer = GroupWriter(self._write_group, adds=_batch_adds)
        self._writer.probe = self._probe
        self._refusing: str | None = None
        """Why writes fail until the database is opened again (see ``_write``)."""
        self.write_cost_s = 0.0
        """A moving average of how long a synced write takes here (inline or in a thread)."""
        self.observer: GroupObserver | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        waiting = False
        while True:
            try:
                self._open()
                break
            except plyvel.Error as exc:
                if not _locked(exc):
                    raise StoreFailedError(
                        f"the LevelDB store at {self.directory} cannot be opened: {_reason(exc)}"
                    ) from None
            if not waiting:
                log.info("store %s is locked by another broker; waiting as a slave", self.directory)
                waiting = True
            await asyncio.sleep(LOCK_POLL_S)
        if waiting:
            log.info("store %s lock acquired; this broker is now the master", self.directory)
        self._load()
        self._writer.start()

    def _open(self) -> None:
        self._db = plyvel.DB(str(self.directory), create_if_missing=True)

    def _load(self) -> None:
        db = self._db
        version = db.get(VERSION_KEY)
        if version is None:
            db.put(VERSION_KEY, U32.pack(LAYOUT_VERSION), sync=self.disk_syncs)
        elif U32.unpack(version)[0] != LAYOUT_VERSION:
            found = U32.unpack(version)[0]
            self._close()
            raise StoreFailedError(
                f"the LevelDB store at {self.directory} has layout {found}; this dovecote "
                f"reads layout {LAYOUT_VERSION}"
            )
        seq = db.get(SEQ_KEY)
        self._next_seq = (0 if seq is None else U64.unpack(seq)[0]) + 1
        self._subscriptions = {
            bytes(key[1:]): parse_destination(unpack(value)[0])
            for key, value in db.iterator(prefix=SUBSCRIPTION)
        }

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()  # which releases LevelDB's LOCK
            self._db = None

    async def stop(self) -> None:
        await self._writer.stop()
        self._close()

    # -- writing ---------------------------------------------------------------------------

    def write(
        self, batch: Sequence[StoreOp], sync: bool = True, lazy: bool = False
    ) -> Awaitable[None]:
        if not batch:
            return written()
        ops, self._next_seq = sequence(batch, self._next_seq)
        return self._writer.submit((ops, sync), urgent=not lazy)

    async def _write_group(self, group: list[tuple[list[JournalOp], bool]]) -> None:
        sync = self.disk_syncs and any(wanted for _, wanted in group)
        batches = [ops for ops, _ in group]
        started = time.perf_counter()
        # As the journal's fsyncs: a fast write in the loop (a thread's hand-off would cost
        # more), a slow one, or a large group, in a thread so the loop goes on meanwhile.
        if not sync or (
            self.write_cost_s < INLINE_SYNC_LIMIT_S and _group_bytes(group) <= INLINE_SYNC_MAX_BYTES
        ):
            changes = self._write(batches, sync)
        else:
            loop = asyncio.get_running_loop()
            changes = await loop.run_in_executor(None, self._write, batches, sync)
        if sync:
            cost = time.perf_counter() - started
            self.write_cost_s = 0.9 * self.write_cost_s + 0.1 * cost
        self._subscriptions = changes.subscriptions
        if self.observer is not None:
            await self.observer.written(changes.changes, any(wanted for _, wanted in group))

    def _write(self, batches: list[list[JournalOp]], sync: bool) -> GroupChanges:
        """Build the group's changes and write them as one WriteBatch (the subscriptions in
        what it returns are as the group leaves them)."""
        db = self._db
        if db is None or self._refusing is not None:
            raise StoreFailedError(self._refusing or "the store could not write: it is closed")
        try:
            changes = GroupChanges(db, self._subscriptions)
            for ops in batches:
                for op in ops:
                    changes.apply(op)
            if changes.top_seq:
                changes.put(SEQ_KEY, U64.pack(changes.top_seq))
            if self.observer is not None:
                self.observer.prepare(changes.changes)
            self._write_changes(db, changes.changes, sync)
        except plyvel.Error as exc:  # the disk's failure (full, an I/O error): not ours
            # A log record cut short (or a failed sync) must not have later records after it
            # in the same log: no write until the probe has opened the database again.
            self._refusing = f"the store could not write: {_reason(exc)}"
            raise StoreFailedError(self._refusing) from None
        return changes

    @staticmethod
    def _write_changes(db: Any, changes: Changes, sync: bool) -> None:
        with db.write_batch(transaction=True, sync=sync) as batch:
            for key, value in changes.items():
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)

    # -- for the replicated store: a slave writes the master's groups as they come ---------

    def apply(self, changes: Changes, sync: bool) -> None:
        """Write a group another store built (a slave's copy of its master's), as is."""
        if self._db is None:
            raise StoreFailedError("the store could not write: it is closed")
        try:
            self._write_changes(self._db, changes, sync)
        except plyvel.Error as exc:
            raise StoreFailedError(f"the store could not write: {_reason(exc)}") from None

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._reading(lambda db: db.get(key))
        return value

    def snapshot(self) -> Any:
        """A consistent read view (plyvel's snapshot: ``iterator``, ``get``, ``close``)."""
        return self._reading(lambda db: db.snapshot())

    def empty(self) -> None:
        """Drop every key (a slave about to receive a full copy): the database is destroyed
        and made again, faster than deleting key by key."""
        self._close()
        plyvel.destroy_db(str(self.directory))
        self._open()
        self._load()

    def reload(self) -> None:
        """Read the sequence and subscriptions again, after groups were applied."""
        self._load()

    async def _probe(self) -> None:
        """While writes fail (every 2 s, and after a send that got through): whether the
        disk has room, and then the database opened again (LevelDB starts a new log, its
        old one recovered without the cut record) takes a synced write."""
        free = shutil.disk_usage(self.directory).free
        if free < PROBE_ROOM:
            raise StoreFailedError(f"the store's disk has {free >> 10} KiB free")
        if self._refusing is None and self._db is not None:
            return
        self._close()
        try:
            self._open()
            self._db.put(PROBE_KEY, b"", sync=True)
        except plyvel.Error as exc:
            self._close()
            raise StoreFailedError(f"the store cannot write yet: {_reason(exc)}") from None
        self._refusing = None
        log.info("store %s opened again after a failed write", self.directory)

    @property
    def degraded(self) -> str | None:
        """Why the store is in degraded mode (store/health.py), or None."""
        return self._writer.degraded

    def checkpoint(self) -> None:
        """LevelDB flushes its memtable and compacts on its own: nothing to do."""

    # -- reading ---------------------------------------------------------------------------

    def _reading(self, read: Callable[..., R], *args: Any) -> R:
        """``read(db, *args)``; LevelDB's failures (a damaged block, whose checksum reads
        verify; an I/O error) as a StoreFailedError naming them: the paging broker then
        leaves the queue's stored messages waiting, as for the journal."""
        if self._db is None:
            raise StoreFailedError("the store cannot be read: its database is closed")
        try:
            return read(self._db, *args)
        except plyvel.Error as exc:
            raise StoreFailedError(f"the store could not read: {_reason(exc)}") from None

    def recover(self) -> RecoveredState:
        return self._reading(self._recover)

    def _recover(self, db: Any) -> RecoveredState:
        state = RecoveredState()
        for key, value in db.iterator(prefix=QUEUE, verify_checksums=True):
            destination = parse_destination(bytes(key[1 : -POSITION.size - 1]).decode())
            state.queues.setdefault(destination, []).append(stored_message(value))
        state.subscriptions = self._recover_subscriptions(db)
        return state

    def _recover_subscriptions(self, db: Any) -> list[RecoveredSubscription]:
        recovered = []
        for key, value in db.iterator(prefix=SUBSCRIPTION, verify_checksums=True):
            client_id, name = bytes(key[1:]).decode().split("\0", 1)
            destination, selector, no_local = unpack(value)
            sub = DurableSubscription(
                client_id, name, parse_destination(destination), selector, no_local
            )
            pending: list[Message] = []
            prefix = PENDING + bytes(key[1:]) + b"\0"
            for pending_key in db.iterator(
                prefix=prefix, include_value=False, verify_checksums=True
            ):
                stored = db.get(TOPIC + bytes(pending_key[len(prefix) :]), verify_checksums=True)
                if stored is not None:
                    pending.append(stored_message(stored))
            recovered.append(RecoveredSubscription(sub, pending))
        return recovered

    def recover_paged(self) -> PagedRecovery:
        """Each queue's count and bytes from its ``c`` key (the broker pages its messages in
        with ``read_queue``); durable subscriptions as ``recover`` gives them."""
        return self._reading(self._recover_paged)

    def _recover_paged(self, db: Any) -> PagedRecovery:
        state = PagedRecovery(subscriptions=self._recover_subscriptions(db))
        for key, value in db.iterator(prefix=COUNT, verify_checksums=True):
            destination = parse_destination(bytes(key[1:]).decode())
            if not destination.is_queue:
                continue
            count, size = COUNTS.unpack(value)
            last = 0
            for last_key in db.iterator(
                prefix=queue_prefix(destination), reverse=True, include_value=False
            ):
                last = POSITION.unpack(bytes(last_key[-POSITION.size :]))[0]
                break
            state.queues[destination] = StoredQueue(count, size, last)
        return state

    def read_queue(self, destination: Destination, start: QueuePosition, limit: int) -> QueuePage:
        """Up to ``limit`` stored messages of a queue from ``start`` on, whole, in order."""
        return self._reading(self._read_queue, destination, start, limit)

    def _read_queue(
        self, db: Any, destination: Destination, start: QueuePosition, limit: int
    ) -> QueuePage:
        messages: list[Message] = []
        position = start
        first = queue_key(destination, POSITION.pack(max(start[0], 0), max(start[1], 0)))
        end = queue_prefix(destination)[:-1] + b"\1"
        for key, value in db.iterator(start=first, stop=end, verify_checksums=True):
            if len(messages) >= limit:
                break
            messages.append(stored_message(value))
            sequence_number, seq = POSITION.unpack(bytes(key[-POSITION.size :]))
            position = (sequence_number, seq + 1)
        return QueuePage(messages, position)

    def stored_message_ids(self) -> list[str]:
        """Every stored message's id, from the keys alone (store/producers.py)."""
        return self._reading(self._stored_message_ids)

    @staticmethod
    def _stored_message_ids(db: Any) -> list[str]:
        queued = db.iterator(prefix=QUEUE_ID, include_value=False)  # i<queue>\0<id>
        ids = [bytes(key).split(b"\0", 1)[1].decode() for key in queued]
        topics = db.iterator(prefix=TOPIC_ID, include_value=False)  # j<id>
        return ids + [bytes(key[1:]).decode() for key in topics]

    def message_count(self, destination: Destination) -> int:
        raw = self._reading(lambda db: db.get(COUNT + str(destination).encode()))
        count: int = 0 if raw is None else COUNTS.unpack(raw)[0]
        return count
