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
from itertools import accumulate
from typing import Final

from dovecote.core.destinations import Destination
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


def _fixed(code: str, values: Sequence[int]) -> bytes:
    """A fixed-width column. One value throughout (a block's priorities, expirations, often
    its timestamps) is repeated rather than converted once per message."""
    first = values[0] if values else 0
    if values.count(first) == len(values):
        return array(code, [first]).tobytes() * len(values)
    return array(code, values).tobytes()


def _strings(values: list[bytes]) -> tuple[array[int], bytes]:
    """A variable-length column: offsets and data."""
    return array("i", accumulate(map(len, values), initial=0)), b"".join(values)


def _optional(texts: list[str | None]) -> tuple[bytearray, array[int], bytes]:
    """A column of strings that may be missing: presence, offsets and data."""
    if texts.count(None) == len(texts):  # (the common case: a header nobody set)
        return bytearray(len(texts)), array("i", bytes(4 * (len(texts) + 1))), b""
    present = bytearray(text is not None for text in texts)
    offsets, data = _strings([text.encode() if text is not None else b"" for text in texts])
    return present, offsets, data


def _properties(
    messages: Sequence[Message], hidden: frozenset[str]
) -> tuple[array[int], list[bytes], list[bytes]]:
    """Where each message's entries start, and every key and value, as map<string, string>."""
    if not any(m.properties or m.redelivery_counter for m in messages):
        return array("i", bytes(4 * (len(messages) + 1))), [], []
    entries, keys, values = array("i", [0]), [], []
    for m in messages:
        for key, value in m.properties.items():
            if key not in hidden:
                keys.append(key.encode())
                values.append(str(value).encode())
        if m.redelivery_counter:  # as a JMS client lists it once a message is redelivered
            keys.append(b"JMSXDeliveryCount")
            values.append(str(m.redelivery_counter + 1).encode())
        entries.append(len(keys))
    return entries, keys, values


def encode_block(messages: Sequence[Message], hidden: frozenset[str] = frozenset()) -> bytes:
    """One block holding ``messages`` in order; properties named in ``hidden`` left out.
    Column by column: a few list comprehensions and joins, little work per message."""
    names: dict[Destination, bytes] = {}
    for d in {m.destination for m in messages}:
        names[d] = str(d).encode()
    fixed = [
        _fixed("q", [m.sequence for m in messages]),
        _fixed("q", [m.timestamp for m in messages]),
        _fixed("q", [m.expiration for m in messages]),
        _fixed("i", [m.priority for m in messages]),
        _fixed("B", [m.body_type for m in messages]),
        _fixed("i", [m.redelivery_counter for m in messages]),
    ]
    optional = [
        _optional([m.correlation_id for m in messages]),
        _optional([m.type for m in messages]),
        _optional([str(m.reply_to) if m.reply_to is not None else None for m in messages]),
    ]
    entries, keys, values = _properties(messages, hidden)
    raw: list[bytes] = fixed
    raw += [bytes(present) for present, _, _ in optional]
    columns = [
        _strings([m.message_id.encode() for m in messages]),
        _strings([names[m.destination] for m in messages]),
        *((offsets, data) for _, offsets, data in optional),
    ]
    for offsets, data in columns:
        raw += [offsets.tobytes(), data]
    # The bodies (most of a block) go into the block as they are: copied once, by the join
    # at the end, not first into a column of their own.
    bodies = [m.body for m in messages]
    body_offsets = array("i", accumulate(map(len, bodies), initial=0))
    raw += [body_offsets.tobytes()]
    key_offsets, key_data = _strings(keys)
    value_offsets, value_data = _strings(values)
    after_bodies = [entries.tobytes(), key_offsets.tobytes(), key_data]
    after_bodies += [value_offsets.tobytes(), value_data]
    lengths = [*map(len, raw), body_offsets[-1], *map(len, after_bodies)]
    head = HEADER.pack(MAGIC, len(messages), len(keys), len(lengths))
    head += struct.pack(f"<{len(lengths)}Q", *lengths)
    parts = [head, bytes(_pad(len(head)))]
    for r in raw:
        parts += [r, bytes(_pad(len(r)))]
    parts += [*bodies, bytes(_pad(body_offsets[-1]))]
    for r in after_bodies:
        parts += [r, bytes(_pad(len(r)))]
    return b"".join(parts)


def last_sequence(block: bytes) -> int:
    """The sequence number of a block's last message (0 for an empty block): where a read
    interrupted after it goes on."""
    magic, count, _, k = HEADER.unpack_from(block)
    if magic != MAGIC or k != len(BUFFERS):
        raise ValueError("not a dovecote stream block (or one of another version)")
    if count == 0:
        return 0
    start = HEADER.size + 8 * k
    start += _pad(start)  # the sequence column is the first buffer
    value: int = struct.unpack_from("<q", block, start + 8 * (count - 1))[0]
    return value


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
