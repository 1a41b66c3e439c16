"""The journal's block operation (FORMAT.md, ``B``): an Append request's block, enqueued by the
broker as it came, is written as the request brought it (not a message encoded) and reads
back, in every way the journal reads records (replay, paging, salvage of damage, compaction),
as the adds it stands for; adds that are not exactly the block's messages are encoded one by
one as before."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import msgpack
import pytest
from contract import Q

from dovecote.core.appended_blocks import AppendedBlock
from dovecote.core.destinations import queue
from dovecote.core.message import BodyType, Message
from dovecote.core.stream_blocks import encode_block
from dovecote.store.api import AddMessage, RemoveMessage, StoreOp
from dovecote.store.journal import JournalPersistenceAdapter
from dovecote.store.journal.datafiles import next_good_record
from dovecote.store.journal.records import (
    BatchEncoder,
    BlockStarts,
    JournalOp,
    PagedRecord,
    SequencedAdd,
    check_record,
    decode_batch,
    salvage,
    sequence,
)


def appended(first: int, count: int, target: Message | None = None) -> AppendedBlock:
    """A block of ``count`` messages as an Append request brings it, read as the broker does."""
    sent = [
        Message(
            f"ID:append:1:1:{i + 1}",
            queue("ignored"),
            f"body {i}".encode() * (i % 5 + 1),
            BodyType.TEXT if i % 2 else BodyType.BYTES,
            priority=i % 10,
            timestamp=1_700_000_000_000 + i,
            expiration=1_800_000_000_000 if i % 7 == 3 else 0,
            correlation_id=f"c{i}" if i % 3 else None,
            type="kind" if i % 4 == 1 else None,
            reply_to=queue("answers") if i % 6 == 2 else None,
            properties={"n": str(i)} if i % 2 else {},
        )
        for i in range(first, first + count)
    ]
    return AppendedBlock(encode_block(sent), Q, True, "ID:append:1:0", "ID:append:1")


def enqueued(block: AppendedBlock, first_sequence: int) -> list[StoreOp]:
    """The adds the broker makes of a block's messages: routed copies, numbered in order, the
    first naming the block."""
    return [
        AddMessage(message.routed(Q, first_sequence + i), block if i == 0 else None)
        for i, message in enumerate(block.messages)
    ]


def record(ops: list[JournalOp], blocks: BlockStarts) -> tuple[bytes, bytes]:
    """``ops``' record as the journal writes it: the header, and the payload's parts joined."""
    encoder = BatchEncoder()
    header, *payload = encoder.parts(ops, blocks)
    try:
        return bytes(header), b"".join(bytes(part) for part in payload)
    finally:
        encoder.release()


def tags(payload: bytes) -> list[str]:
    return [op[0] for op in msgpack.unpackb(payload, raw=False, strict_map_key=False)]


def test_a_block_enqueued_as_it_came_is_written_as_it_came_and_reads_back_as_its_adds() -> None:
    first, second = appended(0, 40), appended(40, 25)
    other = AddMessage(Message("ID:solo:1", queue("other"), b"solo", persistent=True, sequence=5))
    batch = [
        RemoveMessage(queue("other"), "ID:gone"),
        *enqueued(first, 100),
        other,
        *enqueued(second, 140),
    ]
    blocks: BlockStarts = {}
    ops, next_seq = sequence(batch, 7, blocks)
    assert next_seq == 7 + 66 and len(blocks) == 2
    header, payload = record(ops, blocks)
    assert not blocks  # taken by the encoder
    assert check_record(1, int.from_bytes(header[4:8], "little"), payload)
    assert int.from_bytes(header[:4], "little") == len(payload)
    assert tags(payload) == ["R", "B", "A", "B"]
    assert first.block in payload and second.block in payload
    assert decode_batch(payload) == ops  # every field, seqs and sequence numbers included
    paged = PagedRecord(payload)
    adds = [op for op in ops if isinstance(op, SequencedAdd)]
    assert paged.through(7 + 30) == {op.seq: op.message for op in adds[:40]}  # the block's
    assert paged.through(10**9) == {op.seq: op.message for op in adds}


@pytest.mark.parametrize(
    "change",
    [
        "a message changed on its way",
        "a message left out",
        "a gap in the sequence numbers",
        "another destination",
        "the block's messages in another order",
    ],
)
def test_adds_that_are_not_the_blocks_messages_as_it_came_are_encoded_each(change: str) -> None:
    block = appended(0, 12)
    adds = enqueued(block, 100)
    assert isinstance(adds[5], AddMessage) and isinstance(adds[6], AddMessage)
    match change:
        case "a message changed on its way":
            adds[5] = AddMessage(replace(adds[5].message, body=b"other"))
        case "a message left out":
            del adds[5]
        case "a gap in the sequence numbers":
            adds[5] = AddMessage(replace(adds[5].message, sequence=1000))
        case "another destination":
            adds[5] = AddMessage(replace(adds[5].message, destination=queue("elsewhere")))
        case "the block's messages in another order":
            adds[5], adds[6] = adds[6], adds[5]
    blocks: BlockStarts = {}
    ops, _ = sequence(adds, 1, blocks)
    _, payload = record(ops, blocks)
    assert set(tags(payload)) == {"A"}
    assert decode_batch(payload) == ops


def test_damage_near_a_block_record_is_skipped_to_it_and_its_adds_are_counted() -> None:
    block = appended(0, 30)
    blocks: BlockStarts = {}
    ops, _ = sequence(enqueued(block, 1), 1, blocks)
    header, payload = record(ops, blocks)
    data = b"\x00garbage" * 5 + header + payload
    assert next_good_record(data, 0) == 40  # found by how a batch of block ops begins
    # Damaged (its array header gone): what still decodes is every add the block stands for.
    assert salvage(b"\xff" * 7 + payload[1:] + b"\xff" * 7) == ops
    assert salvage(payload[:-1]) == []  # (cut short, the block does not decode)


async def test_a_stored_block_survives_restarts_paging_and_consumption(tmp_path: Path) -> None:
    blocks = [appended(0, 300), appended(300, 200)]
    store = JournalPersistenceAdapter(tmp_path, index_delay_s=0)
    await store.start()
    await store.write([*enqueued(blocks[0], 1), *enqueued(blocks[1], 301)])
    await store.write([RemoveMessage(Q, "ID:append:1:1:1")])
    assert not store._blocks  # written: the blocks are let go of (the messages hold theirs)
    await store.stop()
    journal = b"".join(path.read_bytes() for path in sorted(tmp_path.glob("db-*.log")))
    assert blocks[0].block in journal and blocks[1].block in journal
    expected = [m.routed(Q, 1 + i) for i, m in enumerate(blocks[0].messages + blocks[1].messages)]
    for rebuild in (False, True):
        if rebuild:  # replay: every record read back from the journal
            for path in (tmp_path / "index").iterdir():
                path.unlink()
        store = JournalPersistenceAdapter(tmp_path, index_delay_s=0)
        await store.start()
        assert store.recover_paged().queues[Q].count == 499
        page = store.read_queue(Q, (0, 0), 150)
        rest = store.read_queue(Q, page.next, 1000)
        assert page.messages + rest.messages == expected[1:]
        await store.stop()
