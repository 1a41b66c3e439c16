"""Reading the journal store back whole: ``recover`` (every message, for a broker that does
not page), and the messages durable subscriptions wait for at a paged start. Each message is
found by its index entry, each data file read whole once (messages lie in about the order
of their seqs); what cannot be read back is reported lost by ``forget``. And bringing the
index up to date with the journal at start (``replay``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from dovecote.core.message import Message
from dovecote.store.api import RecoveredState, RecoveredSubscription
from dovecote.store.journal.damage import LostInReplay
from dovecote.store.journal.datafiles import DamagedRecordError, DataFiles, Location
from dovecote.store.journal.index import Index
from dovecote.store.journal.index_layout import INDEX_VERSION
from dovecote.store.journal.records import (
    RECORD_HEADER,
    added_messages,
    decode_batch,
    with_counter,
)

log = logging.getLogger("dovecote.store.journal")

REPLAY_TXN_RECORDS: Final = 1000

Forget = Callable[[str, list[int], str], object]
"""Drops messages that cannot be read back (where, their seqs, why), with a log line."""


def read_back(files: DataFiles, index: Index, queues: bool, forget: Forget) -> RecoveredState:
    """Every stored message (queues' only if ``queues``) with what durable subscriptions
    wait for, as the index has them (caught up by the caller)."""
    cache: dict[Location, dict[int, Message]] = {}
    # Messages lie in the files in about the order of their seqs: each file is read
    # whole, once, instead of two small reads per message.
    file_data: dict[int, bytes] = {}

    # What cannot be read back, by where ("db-N.log" for a file that cannot be read at
    # all, one log line for it) -> why, and the messages lost there.
    damaged: dict[str, str] = {}
    lost: dict[str, list[int]] = {}

    def load(seq: int, file_id: int, offset: int, counter: int) -> Message | None:
        location = Location(file_id, offset)
        where = f"db-{file_id}.log"
        if where not in damaged:
            where = f"db-{file_id}.log record at offset {offset}"
        adds = cache.get(location)
        if adds is None and where not in damaged:
            if len(cache) > 64:
                cache.clear()
            data = file_data.get(file_id)
            try:
                if data is None:
                    if len(file_data) >= 2:
                        file_data.clear()
                    data = file_data[file_id] = files.read_file(file_id)
            except OSError as exc:
                where = f"db-{file_id}.log"
                damaged[where] = str(exc)
            else:
                try:
                    adds = cache[location] = added_messages(files.payload_in(data, location))
                # (ValueError: bytes that are no batch, whatever their checksum says.)
                except (DamagedRecordError, ValueError) as exc:
                    damaged[where] = str(exc)
        message = None if adds is None else adds.get(seq)
        if message is None:
            damaged.setdefault(where, f"it has no message {seq}")
            lost.setdefault(where, []).append(seq)
            return None
        return with_counter(message, counter)

    state = RecoveredState()
    topic_entries: dict[int, tuple[int, int, int]] = {}
    for seq, (_, _, file_id, offset, counter, refs, *_) in index.messages():
        if refs < 0:
            if not queues:
                continue
            message = load(seq, file_id, offset, counter)
            if message is not None:
                state.queues.setdefault(message.destination, []).append(message)
        else:
            topic_entries[seq] = (file_id, offset, counter)
    for sub, _, pending in index.subscriptions():
        messages: list[Message] = []
        for seq in pending:
            if seq in topic_entries:
                message = load(seq, *topic_entries[seq])
                if message is not None:
                    messages.append(message)
        state.subscriptions.append(RecoveredSubscription(sub, messages))
    for where, seqs in lost.items():
        forget(where, sorted(set(seqs)), damaged[where])
    return state


def index_matches(files: DataFiles, index: Index) -> bool:
    """Whether ``index`` can be brought up to date by replaying the journal's tail."""
    applied = index.applied()
    if applied is None:
        return True  # a new index: replay everything
    if index.version() != INDEX_VERSION:
        return False  # laid out by an older dovecote
    if applied.file_id not in files.file_ids:
        return False
    return applied.offset <= files.path(applied.file_id).stat().st_size


def replay(files: DataFiles, index: Index) -> None:
    """Apply the journal after the index's ``applied`` position (all of it for a new
    index) through the same path live writes take."""
    start = index.applied()
    count = 0
    lost = LostInReplay(files.damage)
    txn = index.begin()
    try:
        for file_id in files.file_ids:
            index.note_file(txn, file_id)
        for location, payload in files.scan(start):
            ops = decode_batch(payload)
            lost.applying(ops)
            index.apply(txn, ops, location)
            end = location.offset + RECORD_HEADER.size + len(payload)
            index.mark_applied(txn, Location(location.file_id, end))
            count += 1
            if count % REPLAY_TXN_RECORDS == 0:
                index.commit(txn)
                txn = index.begin()
        index.commit(txn)
    except BaseException:
        index.abort(txn)
        raise
    lost.report()
    if count:
        log.info("journal replay applied %d records after the last checkpoint", count)
