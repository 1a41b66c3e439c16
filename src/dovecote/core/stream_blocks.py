"""Stream blocks: many messages of a range in one compact, columnar body (docs/streams.md).

The broker's ``Blocks`` stream request answers with these instead of a copy per message, so
that a reader (the Spark source's executors) gets a range in a few large replies and can
turn each into Arrow arrays without a Python object per message. Plain Python on the writing
side (the broker needs neither numpy nor pyarrow); dovecote.spark.blocks reads them.

Layout, little-endian: ``MAGIC``, then u32 message count ``n``, u32 property count ``m``,
u32 buffer count, a u64 length per buffer, then the buffers in ``BUFFERS`` order, each padded
to 8 bytes. Arrow's layouts: int32 offsets (n + 1, or m + 1) before each variable-length
column's data, one byte per message for presence and for flags.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from typing import Final

from dovecote.core.message import Message

MAGIC: Final = b"DVB1"
HEADER: Final = struct.Struct("<4sIII")

# The columns, in the order their buffers follow the header.
FIXED_COLUMNS: Final = (
    ("sequence", "q"),
    ("timestamp", "q"),  # ms since the epoch, 0: none
    ("expiration", "q"),  # ms since the epoch, 0: never
    ("priority", "i"),
    ("body_type", "B"),  # BodyType
    ("redelivery_counter", "i"),
)
OPTIONAL_STRINGS: Final = ("correlation_id", "type", "reply_to")
"""Strings that may be missing: a presence byte per message before their offsets and data."""
STRINGS: Final = ("message_id", "destination", *OPTIONAL_STRINGS, "body")
PROPERTY_BUFFERS: Final = ("entries", "key_offsets", "keys", "value_offsets", "values")
"""Properties as Arrow's map<string, string>: where each message's entries start (n + 1),
then every key and every value (text as ``str(value)``)."""

BUFFERS: Final = (
    *(name for name, _ in FIXED_COLUMNS),
    *(f"{name}_present" for name in OPTIONAL_STRINGS),
    *(part for name in STRINGS for part in (f"{name}_offsets", name)),
    *PROPERTY_BUFFERS,
)
DEFAULT_BLOCK_BYTES: Final = 4 << 20
"""About how much body a block holds before the next one starts."""


def _pad(n: int) -> int:
    return -n % 8


class _Strings:
    """One variable-length column as it is built: offsets and data."""

    __slots__ = ("data", "offsets")

    def __init__(self) -> None:
        self.offsets = array("i", [0])
        self.data = bytearray()

    def add(self, value: bytes) -> None:
        self.data += value
        self.offsets.append(len(self.data))


def encode_block(messages: Sequence[Message], hidden: frozenset[str] = frozenset()) -> bytes:
    """One block holding ``messages`` in order; properties named in ``hidden`` left out."""
    fixed = {name: array(code) for name, code in FIXED_COLUMNS}
    present = {name: bytearray() for name in OPTIONAL_STRINGS}
    strings = {name: _Strings() for name in STRINGS}
    entries, keys, values = array("i", [0]), _Strings(), _Strings()
    sequence, timestamp, expiration = fixed["sequence"], fixed["timestamp"], fixed["expiration"]
    priority, body_type = fixed["priority"], fixed["body_type"]
    counter = fixed["redelivery_counter"]
    message_id, destination, body = strings["message_id"], strings["destination"], strings["body"]
    for m in messages:
        sequence.append(m.sequence)
        timestamp.append(m.timestamp)
        expiration.append(m.expiration)
        priority.append(m.priority)
        body_type.append(int(m.body_type))
        counter.append(m.redelivery_counter)
        message_id.add(m.message_id.encode())
        destination.add(str(m.destination).encode())
        reply_to = str(m.reply_to) if m.reply_to is not None else None
        for name, text in (("correlation_id", m.correlation_id), ("type", m.type),
                           ("reply_to", reply_to)):  # fmt: skip
            present[name].append(text is not None)
            strings[name].add(text.encode() if text is not None else b"")
        body.add(m.body)
        count = entries[-1]
        for key, value in m.properties.items():
            if key not in hidden:
                keys.add(key.encode())
                values.add(str(value).encode())
                count += 1
        if m.redelivery_counter:  # as a JMS client lists it once a message is redelivered
            keys.add(b"JMSXDeliveryCount")
            values.add(str(m.redelivery_counter + 1).encode())
            count += 1
        entries.append(count)
    buffers: list[bytearray | array[int]] = [fixed[name] for name, _ in FIXED_COLUMNS]
    buffers += [present[name] for name in OPTIONAL_STRINGS]
    for name in STRINGS:
        buffers += [strings[name].offsets, strings[name].data]
    buffers += [entries, keys.offsets, keys.data, values.offsets, values.data]
    raw = [bytes(b) if isinstance(b, bytearray) else b.tobytes() for b in buffers]
    head = HEADER.pack(MAGIC, len(messages), entries[-1], len(raw))
    head += struct.pack(f"<{len(raw)}Q", *(len(r) for r in raw))
    out = bytearray(head + bytes(_pad(len(head))))
    for r in raw:
        out += r
        out += bytes(_pad(len(r)))
    return bytes(out)


def cut_blocks(messages: Sequence[Message], block_bytes: int) -> list[Sequence[Message]]:
    """``messages`` in runs of about ``block_bytes`` of body each (at least one message)."""
    runs: list[Sequence[Message]] = []
    start, size = 0, 0
    for i, m in enumerate(messages):
        size += len(m.body) + 64
        if size >= block_bytes:
            runs.append(messages[start : i + 1])
            start, size = i + 1, 0
    if start < len(messages):
        runs.append(messages[start:])
    return runs
