"""The broker's reading of an Append request's block (core/appended_blocks.py): the messages a
block holds come back as the broker's messages to the request's destination, field by field,
and a block that does not read whole is refused, naming what is wrong."""

from __future__ import annotations

import struct

import pytest

from dovecote.core.appended_blocks import decode_appended
from dovecote.core.destinations import queue, topic
from dovecote.core.errors import BrokerError
from dovecote.core.message import BodyType, Message
from dovecote.core.stream_blocks import BUFFERS, HEADER, encode_block

TARGET = queue("orders")


def messages(count: int) -> list[Message]:
    return [
        Message(
            f"ID:c:1:1:{i + 1}",
            queue("ignored"),
            f"body {i}".encode(),
            BodyType.TEXT if i % 2 else BodyType.BYTES,
            priority=i % 10,
            timestamp=1_700_000_000_000 + i,
            expiration=(1_800_000_000_000 if i == 3 else 0),
            correlation_id=f"c{i}" if i % 3 else None,
            type="kind" if i == 1 else None,
            reply_to=topic("answers") if i == 2 else None,
            properties={"region": f"r{i}"} if i % 4 else {},
        )
        for i in range(count)
    ]


def test_a_block_reads_back_as_the_messages_it_holds() -> None:
    sent = messages(12)
    got = decode_appended(encode_block(sent), TARGET, True, "ID:c:0:0", "ID:c")
    assert len(got) == 12
    for a, b in zip(sent, got, strict=True):
        assert b.destination == TARGET and b.persistent
        assert b.producer_id == "ID:c:0:0" and b.connection_id == "ID:c"
        assert (b.message_id, b.body, b.body_type, b.priority, b.timestamp, b.expiration) == (
            a.message_id, a.body, a.body_type, a.priority, a.timestamp, a.expiration,
        )  # fmt: skip
        assert (b.correlation_id, b.type, b.reply_to) == (a.correlation_id, a.type, a.reply_to)
        assert dict(b.properties) == dict(a.properties)
    assert decode_appended(encode_block([]), TARGET, False, "p", "c") == []


def _with_buffer(block: bytes, name: str, content: bytes) -> bytes:
    """``block`` with one buffer's bytes replaced (same length)."""
    count = len(BUFFERS)
    lengths = struct.unpack_from(f"<{count}Q", block, HEADER.size)
    position = HEADER.size + 8 * count
    position += -position % 8
    for buffer, length in zip(BUFFERS, lengths, strict=True):
        if buffer == name:
            assert len(content) == length
            return block[:position] + content + block[position + length :]
        position += length + (-length % 8)
    raise KeyError(name)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda b: b[: len(b) // 2], "cut short"),
        (lambda b: b"DVB9" + b[4:], "not a stream block"),
        (lambda b: b"xx", "not a stream block"),
        (lambda b: _with_buffer(b, "priority", struct.pack("<3i", 4, 11, 4)), "priority"),
        (lambda b: _with_buffer(b, "body_type", bytes([1, 9, 1])), "body type"),
        (lambda b: _with_buffer(b, "body_offsets", struct.pack("<4i", 0, 6, 12, 99)), "offsets"),
        (lambda b: b.replace(b"ID:c:1:1:2", b"ID:c:1:1:1"), "repeats a message id"),
    ],
)
def test_a_block_that_does_not_read_whole_is_refused(damage, why) -> None:  # type: ignore[no-untyped-def]
    block = encode_block(messages(3))
    with pytest.raises(BrokerError, match=why):
        decode_appended(damage(block), TARGET, True, "p", "c")
