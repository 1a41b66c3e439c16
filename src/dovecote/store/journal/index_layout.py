"""The journal's index in LMDB (index.py): its tables, and how their keys and entries are
encoded.

Named databases (keys are bytes; ``\\0`` separates parts; seqs are 8-byte big-endian so
LMDB's key order is send order):

- ``meta``: ``applied`` -> the journal position the index is up to date with; ``seq`` -> the
  highest sequence number given out; ``version`` -> ``INDEX_VERSION``, the layout below (an
  index of another version is rebuilt by replay).
- ``msgs``: seq -> [destination, message id, file, offset, redelivery counter, refs,
  priority, expiration, sequence, size], where refs counts the durable subscriptions still
  waiting for a topic message (-1 for queues) and sequence is the broker's.
- ``qids``: destination \\0 message id -> seq, for queue messages.
- ``qseq``: destination \\0 sequence seq (8 bytes each) -> size: each queue's messages in
  the broker's order, which the broker pages in from a position a window at a time.
- ``qstat``: destination -> (message count, bytes) of each queue that holds messages, as of
  ``exact_totals_at`` in ``meta``. The counts live in memory and are written at a clean close
  only (a write per batch would cost every message); when that is not ``applied``
  (a crash came after it), opening counts them again from ``qseq``. In memory, a write
  transaction's changes to them are held apart and taken in only once it commits
  (``begin``/``commit``/``abort``): a failed commit, retried, must not count twice.
- ``tids``: message id -> seq, for topic messages.
- ``subs``: client id \\0 name -> [destination, selector, no_local, file].
- ``pend``: client id \\0 name \\0 seq -> empty: what a durable subscription still needs.
- ``files``: file id -> (how many live messages and subscriptions it holds, the messages'
  sizes summed): what compaction would have to write again to free the file.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import lmdb
import msgpack

SEQ: Final = struct.Struct(">Q")
FILE: Final = struct.Struct(">I")
POS: Final = struct.Struct(">II")
QPOS: Final = struct.Struct(">QQ")
QSTAT: Final = struct.Struct(">QQ")
LIVE: Final = struct.Struct(">QQ")
INDEX_VERSION: Final = 3
"""1: no ``qseq``, ``qstat``, ``msgs`` entries of six fields; 2: ``files`` hold counts alone."""
MAP_SIZE: Final = 16 << 30  # address space only; LMDB files grow as needed
TOTALS_AT: Final = b"exact_totals_at"
"""Where ``qstat`` is true (see there). Once ``totals_at``: counts written by a dovecote that
counted a failed commit's records again on each retry could be inflated, so an index with
only the old key counts its queues again, once."""
CLEAN_MARK: Final = "closed-cleanly"
"""A file in the index's directory while the index is closed after a synced close: without
it (a crash; the index is not synced as it goes) every page is read once in another process
before this one maps the file (``damage.index_walk_problem``)."""


_PACKER: Final = msgpack.Packer(use_bin_type=True)
"""One packer for every index entry: ``msgpack.packb`` is an interpreted wrapper that makes
a new packer (and its buffer) per call, once per message the index takes. The index
is only ever used from the event loop's thread."""


def pack_entry(value: Any) -> bytes:
    packed: bytes = _PACKER.pack(value)
    return packed


def unpack_entry(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


def get_value(txn: lmdb.Transaction, key: bytes, db: Any) -> bytes | None:
    value = txn.get(key, db=db)
    return None if value is None else bytes(value)


def pop_value(txn: lmdb.Transaction, key: bytes, db: Any) -> bytes | None:
    value = txn.pop(key, db=db)
    return None if value is None else bytes(value)


def joined_key(*parts: str) -> bytes:
    return "\0".join(parts).encode()


def queue_key(prefix: bytes, sequence: int, seq: bytes) -> bytes:
    """A queue message's key in ``qseq``; ``prefix``: its queue's, ``joined_key(queue, "")``."""
    return prefix + SEQ.pack(max(sequence, 0)) + seq
