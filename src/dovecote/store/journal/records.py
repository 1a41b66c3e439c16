"""Journal records and operations as bytes (see FORMAT.md): framing with length and CRC-32,
and the msgpack encoding of the store's operations and of messages."""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgpack

# zlib-ng's CRC-32 is zlib's, bit for bit, and many times faster (SIMD).
from zlib_ng.zlib_ng import crc32

from dovecote.core.appended_blocks import AppendedBlock, decode_appended
from dovecote.core.collector import NoCollections
from dovecote.core.destinations import Destination, parse_destination
from dovecote.core.message import Message
from dovecote.core.records import pickle_by_fields
from dovecote.store.api import (
    AckSubscription,
    AddMessage,
    AddSubscription,
    DurableSubscription,
    RemoveDestination,
    RemoveMessage,
    RemoveSubscription,
    StoreOp,
    UpdateRedelivery,
)
from dovecote.store.messagecodec import decode_message, encode_message

FILE_MAGIC: Final = b"DVCTJRNL"
FILE_VERSION: Final = 1
FILE_HEADER: Final = struct.Struct("<8sII")
RECORD_HEADER: Final = struct.Struct("<IIB")
BATCH: Final = 1
SMALL_BATCH_OPS: Final = 16
"""Batches of at most this many operations share a journal record with their group's others."""


@dataclass(slots=True, unsafe_hash=True, init=False)
class SequencedAdd:
    """An AddMessage with the store's sequence number, as the journal records it. One per
    message stored: built as core/records.py says, and as immutable."""

    seq: int
    message: Message

    def __init__(self, seq: int, message: Message) -> None:
        self.seq = seq
        self.message = message


JournalOp = (
    SequencedAdd
    | RemoveMessage
    | UpdateRedelivery
    | AddSubscription
    | (RemoveSubscription | AckSubscription | RemoveDestination)
)


def file_header(file_id: int) -> bytes:
    return FILE_HEADER.pack(FILE_MAGIC, FILE_VERSION, file_id)


def record_header(payload: bytes | memoryview, kind: int = BATCH) -> bytes:
    return RECORD_HEADER.pack(len(payload), crc32(payload, crc32(bytes((kind,)))), kind)


def parts_header(parts: Sequence[bytes | memoryview], kind: int = BATCH) -> bytes:
    """``record_header`` of the payload ``parts`` make together."""
    crc = crc32(bytes((kind,)))
    size = 0
    for part in parts:
        crc = crc32(part, crc)
        size += len(part)
    return RECORD_HEADER.pack(size, crc, kind)


def frame_record(payload: bytes, kind: int = BATCH) -> bytes:
    return record_header(payload, kind) + payload


def check_record(kind: int, crc: int, payload: bytes | memoryview) -> bool:
    return crc32(payload, crc32(bytes((kind,)))) == crc


RECORD_START: Final = re.compile(
    rb"\x01(?:[\x91-\x9f]|\xdc[\x00-\xff]{2}|\xdd[\x00-\xff]{4})[\x92-\x98]\xa1[ARUSXKDB]"
)
"""Where a batch record may start, from its type byte on: type 1, then a msgpack array of
operations whose first is an array beginning with a one-letter tag (``encode_op``). Damage
is skipped by searching for this and then checking the length and checksum (FORMAT.md)."""

_OP_START: Final = re.compile(rb"[\x92-\x98]\xa1[ARUSXKDB]")


def salvage(region: bytes) -> list[JournalOp]:
    """The operations that can still be decoded from damaged bytes: every place that reads
    as a whole encoded operation. A lower bound of what was lost there, for the log."""
    found: list[JournalOp] = []
    position = 0
    view = memoryview(region)
    while (match := _OP_START.search(region, position)) is not None:
        start = position = match.start()
        # A window that doubles while the operation runs past it: each candidate costs
        # about its own size, not the rest of the region (a whole file, perhaps).
        window = 4096
        while True:
            unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
            unpacker.feed(view[start : start + window])
            try:
                decode_into(unpacker.unpack(), found)
                position = start + unpacker.tell()
            except msgpack.OutOfData:
                if start + window < len(region):
                    window *= 2
                    continue
                position = start + 1
            except Exception:  # damaged bytes fail in any way msgpack and decode_op can
                position = start + 1
            break
    return found


# -- operations ----------------------------------------------------------------------------


def encode_op(op: JournalOp) -> list[Any]:
    match op:
        case SequencedAdd(seq, message):
            return ["A", seq, encode_message(message)]
        case RemoveMessage(d, mid):
            return ["R", str(d), mid]
        case UpdateRedelivery(d, mid, counter):
            return ["U", str(d), mid, counter]
        case AddSubscription(s):
            return ["S", s.client_id, s.name, str(s.destination), s.selector, s.no_local]
        case RemoveSubscription(d, client_id, name):
            return ["X", str(d), client_id, name]
        case AckSubscription(d, client_id, name, mid):
            return ["K", str(d), client_id, name, mid]
        case RemoveDestination(d):
            return ["D", str(d)]


def decode_op(f: list[Any]) -> JournalOp:
    """One operation (not a block's adds: ``decode_into``)."""
    tag = f[0]
    if tag == "A":
        return SequencedAdd(f[1], decode_message(f[2]))
    if tag == "R":
        return RemoveMessage(parse_destination(f[1]), f[2])
    if tag == "U":
        return UpdateRedelivery(parse_destination(f[1]), f[2], f[3])
    if tag == "S":
        return AddSubscription(DurableSubscription(f[1], f[2], parse_destination(f[3]), f[4], f[5]))
    if tag == "X":
        return RemoveSubscription(parse_destination(f[1]), f[2], f[3])
    if tag == "K":
        return AckSubscription(parse_destination(f[1]), f[2], f[3], f[4])
    if tag == "D":
        return RemoveDestination(parse_destination(f[1]))
    raise ValueError(f"unknown journal operation {tag!r}")


BLOCK_FIELDS: Final = 8


def block_op_head(add: SequencedAdd, block: AppendedBlock) -> list[Any]:
    """An Append block's adds as one operation, from ``add`` (its first) on: all of it but
    the block, whose bytes follow (msgpack bin 32) as the request brought them."""
    return [
        "B", add.seq, add.message.sequence, str(block.target), block.persistent,
        block.producer_id, block.connection_id,
    ]  # fmt: skip


def block_adds(f: list[Any]) -> list[SequencedAdd]:
    """The adds a block operation (``block_op_head``) stands for, in its order."""
    _, first_seq, first_sequence, target, persistent, producer_id, connection_id, block = f
    messages = decode_appended(
        block, parse_destination(target), persistent, producer_id, connection_id, first_sequence
    )
    return [SequencedAdd(first_seq + i, message) for i, message in enumerate(messages)]


def decode_into(f: list[Any], ops: list[JournalOp]) -> None:
    """Add an encoded operation's operations to ``ops``: one, or a block's adds (nothing,
    when it does not decode)."""
    if f[0] == "B":
        ops.extend(block_adds(f))
    else:
        ops.append(decode_op(f))


def block_run(ops: Sequence[JournalOp], start: int, block: AppendedBlock) -> int:
    """How many adds from ``ops[start]`` on ``block`` stands for: all of its messages, as
    the broker enqueued them (in order, on its destination, their seqs and sequence numbers
    one after another); 0 when they are not that (then each is encoded)."""
    originals = block.messages
    count = len(originals)
    if not count or start + count > len(ops):
        return 0
    first = ops[start]
    if not isinstance(first, SequencedAdd) or first.message.sequence <= 0:
        return 0
    seq, sequence, target = first.seq, first.message.sequence, block.target
    for i in range(count):
        op = ops[start + i]
        if not isinstance(op, SequencedAdd):
            return 0
        message, original = op.message, originals[i]
        if (
            op.seq != seq + i
            or message.sequence != sequence + i
            # (a routed copy of the block's message shares its id and body)
            or message.message_id is not original.message_id
            or message.body is not original.body
            or message.persistent != block.persistent
            or (message.destination is not target and message.destination != target)
        ):
            return 0
    return count


def encode_batch(ops: Sequence[JournalOp]) -> bytes:
    return frame_record(msgpack.packb([encode_op(op) for op in ops], use_bin_type=True))


class BatchEncoder:
    """``encode_batch`` for the hot path: the record as its header and its payload in parts,
    to be written together (``os.pwritev``). The payload, message bodies and all, is not
    copied out of the packer nor joined to its header: two copies fewer per record. An Append
    block is not encoded at all: its bytes, as the request brought them, are a part."""

    def __init__(self) -> None:
        self._packer = msgpack.Packer(autoreset=False, use_bin_type=True)
        self._heads = msgpack.Packer(use_bin_type=True)
        self._payload: memoryview | None = None

    def parts(
        self, ops: Sequence[JournalOp], blocks: BlockStarts | None = None
    ) -> list[bytes | memoryview]:
        """The header and payload parts of ``ops``' record, valid until ``release`` (a
        method pair, not a context manager: contextlib's is interpreted, and this runs once
        per record). Adds that begin a block in ``blocks`` are taken out of it, and the
        block stands for its adds where they follow (``block_run``)."""
        self.release()
        # (A failure inside pack leaves the packer empty: msgpack resets it.)
        with NoCollections():
            if not blocks:
                self._packer.pack([encode_op(op) for op in ops])
                payload = self._payload = self._packer.getbuffer()
                return [record_header(payload), payload]
            return self._with_blocks(ops, blocks)

    def _with_blocks(
        self, ops: Sequence[JournalOp], blocks: BlockStarts
    ) -> list[bytes | memoryview]:
        packer = self._packer
        packer.reset()
        payload: list[bytes | memoryview] = []
        count = i = 0
        packed = False  # (ops in the packer since its last part)
        while i < len(ops):
            op = ops[i]
            start = blocks.pop(id(op), None)
            run = block_run(ops, i, start[1]) if start is not None and start[0] is op else 0
            if start is not None and run:
                block = start[1].block
                packer.pack_array_header(BLOCK_FIELDS)
                for field in block_op_head(start[0], start[1]):
                    packer.pack(field)
                payload += [packer.bytes() + b"\xc6" + len(block).to_bytes(4, "big"), block]
                packer.reset()
                packed = False
                i += run
            else:
                packer.pack(encode_op(op))
                packed = True
                i += 1
            count += 1
        if packed:
            payload.append(packer.bytes())
            packer.reset()
        payload.insert(0, self._heads.pack_array_header(count))
        return [parts_header(payload), *payload]

    def release(self) -> None:
        """Let go of the last payload (the packer's buffer is then reused)."""
        if self._payload is not None:
            self._payload.release()
            self._payload = None
            self._packer.reset()


def decode_batch(payload: bytes) -> list[JournalOp]:
    ops: list[JournalOp] = []
    for f in msgpack.unpackb(payload, raw=False, strict_map_key=False):
        decode_into(f, ops)
    return ops


def group_records(batches: list[list[JournalOp]]) -> Iterator[list[JournalOp]]:
    """A group's batches as journal records: the small ones (a sync send, a consumer's
    removal) together in one record (one encoding, one checksum, one write; applied all or
    nothing, as each of them was), a large one alone (a record is read back whole to page a
    message in)."""
    small: list[JournalOp] = []
    for ops in batches:
        if len(ops) > SMALL_BATCH_OPS:
            if small:
                yield small
                small = []
            yield ops
        else:
            small.extend(ops)
    if small:
        yield small


def message_bytes(group: list[tuple[list[JournalOp], bool]]) -> int:
    """About the bytes a group's records take: its messages'."""
    return sum(op.message.size for ops, _ in group for op in ops if isinstance(op, SequencedAdd))


def batch_adds(item: tuple[list[JournalOp], bool]) -> bool:
    """``adds_to_store`` of a group writer's item (a batch, and whether it is synced)."""
    return adds_to_store(item[0])


BlockStarts = dict[int, tuple[SequencedAdd, AppendedBlock]]
"""Adds that begin an Append block (AddMessage.block), with it, by their id."""


def forget_blocks(blocks: BlockStarts, keys: list[int], _: object) -> None:
    """Once a batch's record is written (the encoder took its blocks) or refused, its
    blocks are let go of either way."""
    for key in keys:
        blocks.pop(key, None)


def sequence(
    batch: Sequence[StoreOp], next_seq: int, blocks: BlockStarts | None = None
) -> tuple[list[JournalOp], int]:
    """Give each AddMessage the store's next sequence number (the adds that begin an Append
    block go into ``blocks``, given one)."""
    ops: list[JournalOp] = []
    for op in batch:
        if isinstance(op, AddMessage):
            add = SequencedAdd(next_seq, op.message)
            ops.append(add)
            next_seq += 1
            if op.block is not None and blocks is not None:
                blocks[id(add)] = (add, op.block)
        else:
            ops.append(op)
    return ops, next_seq


def added_messages(payload: bytes) -> dict[int, Message]:
    """The messages a journal record adds, by seq."""
    return {op.seq: op.message for op in decode_batch(payload) if isinstance(op, SequencedAdd)}


class PagedRecord:
    """The messages a record adds, decoded only as far as the pages read from it ask: a page
    at a time through one big transaction's record (100k messages, ~100 MB) is then never
    one long decode on the broker's loop, nor one decode of the whole record per page."""

    KEPT: Final = 4
    """Records the journal keeps while pages are read from them (queues paged by turns)."""

    def __init__(self, payload: bytes) -> None:
        self._ops = msgpack.Unpacker(io.BytesIO(payload), raw=False, strict_map_key=False)
        self._left: int = self._ops.read_array_header()
        self.adds: dict[int, Message] = {}
        self.last = 0
        """The last seq decoded so far."""

    def through(self, seq: int) -> dict[int, Message]:
        """``adds``, decoded up to ``seq`` (or to the end, when it is not there)."""
        ops: list[JournalOp] = []  # (one list for all: a page is read message by message)
        while self._left and seq not in self.adds:
            self._left -= 1
            ops.clear()
            try:
                decode_into(self._ops.unpack(), ops)
            except msgpack.OutOfData:
                raise ValueError("a record cut short") from None
            for op in ops:
                if isinstance(op, SequencedAdd):
                    self.adds[op.seq] = op.message
                    self.last = op.seq
        return self.adds

    def read_past(self, seq: int) -> bool:
        """Whether pages have gone past all of it (it may be let go)."""
        return not self._left and seq > self.last


def with_counter(message: Message, counter: int) -> Message:
    """A stored message with the redelivery counter the index keeps for it."""
    return message if message.redelivery_counter == counter else message.with_redelivery(counter)


def adds_to_store(ops: list[JournalOp]) -> bool:
    """Whether a batch stores something new (a message or a subscription): what a degraded
    store refuses, where it still tries removals and acks."""
    return any(isinstance(op, SequencedAdd | AddSubscription) for op in ops)


class PassingThrough:
    """Finds each new queue message added and then removed within the operations fed to it
    (in order), as its add and its removal (``pairs``): what ``apply_records`` may leave out.
    New: its seq is above ``indexed_top`` (a compaction's move re-adds an indexed seq and must
    be applied). A message whose id is named by anything else in between (an update, a
    destination removal, another add of the same id) is not one of them, so that applying the
    rest in order gives the index exactly what applying everything would; the removal of a
    destination, only for the messages added to it (a client's temporary queue goes at
    every disconnect). (Keyed by id alone: it runs over every operation, and hashing
    destinations cost more.) Fed a slice at a time, it finds pairs any number of slices
    apart."""

    def __init__(self, indexed_top: int) -> None:
        self.indexed_top = indexed_top
        self.pairs: list[tuple[SequencedAdd, RemoveMessage]] = []
        self._latest: dict[str, SequencedAdd] = {}
        self._mixed: set[str] = set()
        self._queues: set[Destination] = set()
        """Every queue an add in ``_latest`` went to (and some whose adds are gone)."""

    def feed(self, ops: list[JournalOp]) -> None:
        latest, mixed, pairs, top = self._latest, self._mixed, self.pairs, self.indexed_top
        queues = self._queues
        last: Destination | None = None
        for op in ops:
            if isinstance(op, SequencedAdd):
                destination = op.message.destination
                if op.seq > top and destination.is_queue:
                    if destination is not last:  # (a bulk load's adds share one)
                        queues.add(destination)
                        last = destination
                    message_id = op.message.message_id
                    if message_id in latest or message_id in mixed:
                        latest.pop(message_id, None)
                        mixed.add(message_id)
                    else:
                        latest[message_id] = op
            elif isinstance(op, RemoveMessage):
                add = latest.get(op.message_id)
                if add is not None and add.message.destination == op.destination:
                    del latest[op.message_id]
                    pairs.append((add, op))
            elif isinstance(op, UpdateRedelivery):
                if op.message_id in latest:
                    del latest[op.message_id]
                    mixed.add(op.message_id)
            elif isinstance(op, RemoveDestination) and op.destination in queues:
                removed = op.destination
                gone = [i for i, add in latest.items() if add.message.destination == removed]
                for message_id in gone:
                    del latest[message_id]
                mixed.update(gone)
                queues.discard(removed)
                last = None


pickle_by_fields(__name__)
