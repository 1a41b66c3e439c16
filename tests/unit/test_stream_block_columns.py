"""Stream blocks' fixed-width columns (core/stream_blocks.py): a column with one value
throughout is made by repetition, the others value by value; both read back the same."""

from __future__ import annotations

import struct
from array import array

import pytest

from dovecote.core.destinations import queue
from dovecote.core.message import BodyType, Message
from dovecote.core.stream_blocks import BUFFERS, FIXED_COLUMNS, HEADER, encode_block


def fixed_columns(block: bytes) -> dict[str, list[int]]:
    _, count, _, k = HEADER.unpack_from(block)
    lengths = struct.unpack_from(f"<{k}Q", block, HEADER.size)
    position = HEADER.size + 8 * k
    position += -position % 8
    columns: dict[str, list[int]] = {}
    for name, length in zip(BUFFERS, lengths, strict=True):
        code = dict(FIXED_COLUMNS).get(name)
        if code is not None:
            column = array(code, block[position : position + length])
            assert len(column) == count
            columns[name] = column.tolist()
        position += length + (-length % 8)
    return columns


def messages(vary: bool) -> list[Message]:
    return [
        Message(
            message_id=f"ID:p-1:1:1:{i}",
            destination=queue("q"),
            body=b"x",
            body_type=BodyType.TEXT if vary and i % 2 else BodyType.BYTES,
            priority=i % 10 if vary else 7,
            timestamp=1_700_000_000_000 + (i if vary else 0),
            expiration=1_800_000_000_000 + (i if vary else 0),
            redelivery_counter=i % 3 if vary else 2,
            sequence=5_000_000_000 + i,
        )
        for i in range(1, 101)
    ]


@pytest.mark.parametrize("vary", [False, True])
def test_fixed_columns_read_back_as_written(vary: bool) -> None:
    sent = messages(vary)
    columns = fixed_columns(encode_block(sent))
    assert columns == {
        "sequence": [m.sequence for m in sent],
        "timestamp": [m.timestamp for m in sent],
        "expiration": [m.expiration for m in sent],
        "priority": [m.priority for m in sent],
        "body_type": [int(m.body_type) for m in sent],
        "redelivery_counter": [m.redelivery_counter for m in sent],
    }


def test_a_block_of_one_message() -> None:
    sent = messages(vary=False)[:1]
    assert fixed_columns(encode_block(sent))["priority"] == [7]
