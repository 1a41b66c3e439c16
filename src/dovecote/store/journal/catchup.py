"""When the journal's index catches up with the groups written, and in what slices.

The index is a view the journal can rebuild (FORMAT.md): a group's writers wake once it is
durable, and the index is brought up to date a moment later, for several groups in one
LMDB transaction (``JournalPersistenceAdapter._catch_up``). These say when (the settings,
and ``WaitingRecords``, which keeps the groups written meanwhile), and how a large catch-up
shares the event loop.
"""

from __future__ import annotations

from typing import Final

from dovecote.store.api import RemoveMessage
from dovecote.store.journal.datafiles import Location
from dovecote.store.journal.records import JournalOp, SequencedAdd

INDEX_DELAY_S: Final = 0.02
"""How long written groups may wait for the index to catch up with them. Each catch-up is
an LMDB transaction whose cost is mostly fixed: at a few ms a lone sync producer paid one
every few messages (docs/performance.md)."""
INDEX_DELAY_OPS: Final = 256
"""... or how many operations: past this many the writer applies them at once (kept small:
a larger catch-up's pause shows in transacted batches' p99)."""
INDEX_AT_ONCE_BYTES: Final = 64 * 1024
"""A group whose records are larger than this is applied at once if mostly bodies: ..."""
INDEX_AT_ONCE_BYTES_PER_ADD: Final = 16 * 1024
"""... more than this many bytes per message added. A commit of a hundred 1 KiB messages is
as large, but its adds are index work that waits, and one consumed before the catch-up never
reaches the index (applied at once, the index took much of transacted batches' cost)."""
INDEX_HOLD_ADDS: Final = 10_000
"""A group adding this many messages or more (a bulk load: a Spark partition's write) holds
the catch-up back: such messages are mostly consumed within seconds (a Spark stream's
batches), and then neither their adds nor their removals reach the index, where both were
most of the broker's work for them (FORMAT.md)."""
INDEX_HOLD_S: Final = 15.0
"""How long after the last such group the index waits (a read of it ends the wait, and so
do as many removals as the records waiting add: their consumers are done)."""
INDEX_HOLD_BYTES: Final = 128 * 1024 * 1024
"""... and for how many bytes of records at most: they keep their messages in memory, and a
crash replays them. Past it, the records before the latest large group are applied."""
CATCH_UP_SLICE_OPS: Final = 2048
"""The writer applies a catch-up of more operations than this a slice of about this many at
a time, the loop's other work between slices (still one transaction). A Spark batch's
commit removes 25,000 messages: applied whole, that held the loop ~0.1 s, and the next
batch's reads waited behind it."""

Records = list[tuple[Location, list[JournalOp]]]

APPLY_NOW: Final = 0
HOLD: Final = 1
WAIT: Final = 2


class WaitingRecords:
    """The records written (durable) that the index has not caught up with, and when it is
    to: ``delay_s`` after the first of them or at INDEX_DELAY_OPS, at once for a group that is
    mostly bodies, and for a bulk load as ``hold`` says ((adds, seconds, bytes): the
    INDEX_HOLD_* above). Times are the event loop's."""

    def __init__(self, delay_s: float, hold: tuple[int, float, int]) -> None:
        self.delay_s = delay_s
        self.hold_adds, self.hold_s, self.hold_bytes = hold
        self.records: Records = []
        self.ops = 0
        self.size = 0
        self.head: Location | None = None
        """The journal's head after the last of them: ``applied`` once they all are."""
        self.due = 0.0
        self.hold_from: int | None = None
        """While a bulk load holds the catch-up back, where its records start (else None)."""
        self._held_before = 0
        """... and the bytes of the records before them."""
        self._adds = 0
        self._removals = 0
        """Messages added and removed by the records (a hold ends when they are as many)."""

    def note(self, written: Records, size: int, head: Location, now: float) -> int:
        """A group written (``size`` bytes of records): APPLY_NOW, HOLD (the catch-up is now
        due later, at ``due``) or WAIT (at ``due``)."""
        if not self.records:
            self.due = now + self.delay_s
        start, before = len(self.records), self.size
        self.records.extend(written)
        self.ops += sum(len(ops) for _, ops in written)
        self.size += size
        self.head = head
        adds, removals = _adds_and_removals(written)
        self._adds += adds
        self._removals += removals
        if adds and size > INDEX_AT_ONCE_BYTES and size > INDEX_AT_ONCE_BYTES_PER_ADD * adds:
            # Mostly message bodies: little index work beside its fsync, and deferred it
            # costs more than it saves. (Many removals are index work: they wait.)
            return APPLY_NOW
        if adds >= self.hold_adds and self.hold_s > 0:
            self.hold_from, self._held_before = start, before
            self.due = now + self.hold_s
            return HOLD
        if self.hold_from is not None and self._removals >= self._adds:
            # Consumed (a Spark stream's last batch committed): waiting saves nothing more,
            # and the catch-up, cheap now, frees the records' memory and their files.
            self.due = now
        return WAIT

    def is_due(self, now: float) -> bool:
        """Whether the index is to catch up now (with ``due_count`` of the records)."""
        if self.head is None:
            return False
        if self.due <= now:
            return True
        if self.hold_from is not None:
            return self.size > self.hold_bytes
        return self.ops >= INDEX_DELAY_OPS

    def due_count(self, now: float) -> int:
        """How many of the records the catch-up due applies: all, but for a hold past its
        size, which goes on holding its latest bulk load (if that fits alone)."""
        held = self.hold_from
        if held and self.due > now and self.size - self._held_before <= self.hold_bytes:
            return held
        return len(self.records)

    def end_of(self, count: int) -> Location:
        """Where the index is up to date once the first ``count`` records are applied."""
        assert self.head is not None
        return self.records[count][0] if count < len(self.records) else self.head

    def applied(self, count: int) -> None:
        """The first ``count`` records were applied: all of them, or a hold's records before
        its latest bulk load (the hold goes on with the rest)."""
        if count >= len(self.records):
            self.clear()
            return
        assert count == self.hold_from
        self.ops -= sum(len(ops) for _, ops in self.records[:count])
        adds, removals = _adds_and_removals(self.records[:count])
        self._adds -= adds
        self._removals -= removals
        del self.records[:count]
        self.size -= self._held_before
        self.hold_from, self._held_before = 0, 0

    def clear(self) -> None:
        self.records = []
        self.ops = self.size = self._held_before = self._adds = self._removals = 0
        self.head = self.hold_from = None


def _adds_and_removals(records: Records) -> tuple[int, int]:
    adds = removals = 0
    for _, ops in records:
        for op in ops:
            if isinstance(op, SequencedAdd):
                adds += 1
            elif isinstance(op, RemoveMessage):
                removals += 1
    return adds, removals


def slices(records: Records, ops_per_slice: int) -> list[Records]:
    """``records`` in order, in slices of at most ``ops_per_slice`` operations (or one
    record's, when it has none), a record with more cut into several, each part with the
    record's location. Applied one after the other in one transaction, the slices leave the
    index as the whole would: each operation is applied once, in the same order."""
    if ops_per_slice <= 0:
        return [records]
    out: list[Records] = []
    piece: Records = []
    size = 0
    for location, ops in records:
        parts = [ops[i : i + ops_per_slice] for i in range(0, len(ops), ops_per_slice)]
        for part in parts or [ops]:
            if piece and size + len(part) > ops_per_slice:
                out.append(piece)
                piece, size = [], 0
            piece.append((location, part))
            size += len(part)
    if piece:
        out.append(piece)
    return out
