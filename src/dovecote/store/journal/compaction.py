"""Compaction of the journal store: when a few live things pin the oldest of several data
files, they are written again at the head so that the file can go (FORMAT.md: Checkpoints
and compaction). Runs in the group writer, between groups, rarely."""

from __future__ import annotations

import logging
from typing import Final

from dovecote.core.message import Message
from dovecote.store.api import AddSubscription
from dovecote.store.journal.datafiles import DamagedRecordError, DataFiles, Location
from dovecote.store.journal.index import Index
from dovecote.store.journal.records import JournalOp, SequencedAdd, added_messages
from dovecote.store.journal.recovery import Forget

log = logging.getLogger("dovecote.store.journal")

COMPACT_AFTER_FILES: Final = 3
"""Compaction waits until the journal has this many data files."""
COMPACT_LIVE_SHARE: Final = 0.25
"""... and moves the oldest file's live messages only while they are at most this share of
a file's length, or everything live is at most this share of the journal: each byte written
again then frees about three more."""


def compaction_ops(
    files: DataFiles, index: Index, live_limit: int, max_file_length: int, forget: Forget
) -> list[JournalOp]:
    """When a few live things pin the oldest of several data files, the operations that
    write them again at the head, keeping their seqs. A subscription moves with every
    message it still waits for, so that a rebuild by replay finds them after it.

    Few means by count, and by bytes: a small share of the file, or of a journal that is
    mostly dead. A backlog nobody has taken yet fills its files and the journal: moving
    it would free nothing (it fills the new files as it filled the old) but write it
    again, after every group, and slow the backlog to a crawl. Messages that
    fill the oldest file but are a small part of a journal consumed around them (a DLQ,
    say) would pin every newer file for ever: they move, about once per three times
    their size of traffic."""
    if len(files.file_ids) < COMPACT_AFTER_FILES:
        return []
    oldest = files.file_ids[0]
    usage = index.live_counts()
    live, live_bytes = usage.get(oldest, (0, 0))
    if not 0 < live <= live_limit:
        return []
    if live_bytes > max_file_length * COMPACT_LIVE_SHARE:
        journal_bytes = (len(files.file_ids) - 1) * max_file_length + files.position
        all_live_bytes = sum(size for _, size in usage.values())
        if all_live_bytes > journal_bytes * COMPACT_LIVE_SHARE:
            return []
    entries = dict(index.messages())
    ops: list[JournalOp] = []
    moved: set[int] = set()
    for sub, sub_file, pending in index.subscriptions():
        if sub_file == oldest:
            ops.append(AddSubscription(sub))
            moved.update(pending)
    moved.update(seq for seq, entry in entries.items() if entry[2] == oldest)
    # A record is decoded once for all the live messages it holds (a transaction's record
    # may hold 100k of them: decoded once per message, that was a stall of minutes).
    decoded: dict[Location, dict[int, Message]] = {}
    for seq in sorted(moved):
        _, _, entry_file, offset, counter, *_ = entries[seq]
        location = Location(entry_file, offset)
        try:
            message = read_message(files, seq, location, decoded)
        except (DamagedRecordError, OSError, ValueError) as exc:
            where = f"db-{location.file_id}.log record at offset {location.offset}"
            forget(where, [seq], str(exc))
            continue
        ops.append(SequencedAdd(seq, message.with_redelivery(counter)))
    log.info("journal db-%d.log: moving %d live records to the head", oldest, len(ops))
    return ops


def read_message(
    files: DataFiles,
    seq: int,
    location: Location,
    decoded: dict[Location, dict[int, Message]] | None = None,
) -> Message:
    """Message ``seq`` of the record at ``location`` (``decoded`` keeps records read)."""
    kept = decoded.get(location) if decoded is not None else None
    if kept is None:
        kept = added_messages(files.read_payload(location))
        if decoded is not None:
            decoded[location] = kept
    message = kept.get(seq)
    if message is None:
        raise OSError(f"journal record at {location} has no message {seq}")
    return message
