"""When the journal's index catches up with the groups written, and in what slices.

The index is a view the journal can rebuild (FORMAT.md): a group's writers wake once it is
durable, and the index is brought up to date a moment later, for several groups in one
LMDB transaction (``JournalPersistenceAdapter._catch_up``). These say when, and how a large
catch-up shares the event loop.
"""

from __future__ import annotations

from typing import Final

from dovecote.store.journal.datafiles import Location
from dovecote.store.journal.records import JournalOp

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
CATCH_UP_SLICE_OPS: Final = 2048
"""The writer applies a catch-up of more operations than this a slice of about this many at
a time, the loop's other work between slices (still one transaction). A Spark batch's
commit removes 25,000 messages: applied whole, that held the loop ~0.1 s, and the next
batch's reads waited behind it."""

Records = list[tuple[Location, list[JournalOp]]]


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
