"""An Append request's block (core/stream_blocks.py's format) read back as the broker's
messages: by the broker when the request comes (broker/appends.py), and by the journal when it
replays a block it kept as it came (``AppendedBlock``; store/journal/FORMAT.md).

The block is read column by column: its fixed-width columns as whole arrays, its strings
sliced from their buffers by offsets, so the only Python objects made per message are the
broker's own ``Message`` and its body."""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise

from dovecote.core.destinations import Destination, parse_destination
from dovecote.core.errors import BrokerError
from dovecote.core.message import BodyType, Message, PropertyValue
from dovecote.core.records import pickle_by_fields
from dovecote.core.stream_blocks import BUFFERS, HEADER, MAGIC

_INDEX = {name: i for i, name in enumerate(BUFFERS)}
_BODY_TYPES = {int(kind): kind for kind in BodyType}
_NO_PROPERTIES: Mapping[str, PropertyValue] = {}


def _buffers(block: bytes) -> tuple[int, int, list[memoryview]]:
    """The message count, the property count and each buffer, checked against the block."""
    if len(block) < HEADER.size:
        raise BrokerError("an Append request's body is not a stream block")
    magic, count, properties, k = HEADER.unpack_from(block)
    if magic != MAGIC or k != len(BUFFERS):
        raise BrokerError("an Append request's body is not a stream block of this version")
    lengths = struct.unpack_from(f"<{k}Q", block, HEADER.size)
    position = HEADER.size + 8 * k
    position += -position % 8
    view = memoryview(block)
    parts: list[memoryview] = []
    for length in lengths:
        if position + length > len(block):
            raise BrokerError("an Append request's stream block is cut short")
        parts.append(view[position : position + length])
        position += length + (-length % 8)
    return count, properties, parts


def _fixed(parts: list[memoryview], name: str, code: str, count: int) -> list[int]:
    values = array(code)
    column = parts[_INDEX[name]]
    if len(column) != count * values.itemsize:
        raise BrokerError(f"an Append request's {name} column has the wrong length")
    values.frombytes(column)
    if sys.byteorder == "big":  # (the block is little-endian)
        values.byteswap()
    return values.tolist()


_OFFSETS = {"keys": "key_offsets", "values": "value_offsets", "": "entries"}


def _offsets(parts: list[memoryview], name: str, count: int, data_length: int) -> list[int]:
    offsets = _fixed(parts, _OFFSETS.get(name, f"{name}_offsets"), "i", count + 1)
    if offsets[0] != 0 or offsets[-1] != data_length:
        raise BrokerError(f"an Append request's {name or 'properties'} offsets do not fit")
    return offsets


def _bytes_column(parts: list[memoryview], name: str, count: int) -> list[bytes]:
    data = parts[_INDEX[name]].tobytes()
    offsets = _offsets(parts, name, count, len(data))
    return [data[a:b] for a, b in pairwise(offsets)]


def _text_column(parts: list[memoryview], name: str, count: int) -> list[str]:
    data = parts[_INDEX[name]].tobytes()
    offsets = _offsets(parts, name, count, len(data))
    try:
        return [data[a:b].decode() for a, b in pairwise(offsets)]
    except UnicodeDecodeError:
        raise BrokerError(f"an Append request's {name} column is not UTF-8") from None


def _optional(parts: list[memoryview], name: str, count: int) -> list[str | None]:
    present = parts[_INDEX[f"{name}_present"]]
    if len(present) != count:
        raise BrokerError(f"an Append request's {name} column has the wrong length")
    if not any(present):
        _offsets(parts, name, count, len(parts[_INDEX[name]]))  # (checked all the same)
        return [None] * count
    texts = _text_column(parts, name, count)
    return [t if p else None for t, p in zip(texts, present.tolist(), strict=True)]


def _properties(
    parts: list[memoryview], count: int, entry_count: int
) -> list[Mapping[str, PropertyValue]]:
    """Each message's properties, as strings (the block's map<string, string>)."""
    keys = _text_column(parts, "keys", entry_count)
    values = _text_column(parts, "values", entry_count)
    entries = _offsets(parts, "", count, entry_count)
    if not entry_count:
        return [_NO_PROPERTIES] * count
    return [
        dict(zip(keys[a:b], values[a:b], strict=True)) if b > a else _NO_PROPERTIES
        for a, b in pairwise(entries)
    ]


def decode_appended(
    block: bytes,
    target: Destination,
    persistent: bool,
    producer_id: str,
    connection_id: str,
    first_sequence: int = 0,
) -> list[Message]:
    """The messages an Append request's block holds, to ``target``, in order; with
    ``first_sequence``, numbered from it on (as the broker enqueued them). A block that does
    not read whole is refused (BrokerError), and nothing of it is taken."""
    count, entry_count, parts = _buffers(block)
    timestamps = _fixed(parts, "timestamp", "q", count)
    expirations = _fixed(parts, "expiration", "q", count)
    priorities = _fixed(parts, "priority", "i", count)
    body_types = _fixed(parts, "body_type", "B", count)
    if not set(body_types) <= _BODY_TYPES.keys():
        raise BrokerError("an Append request's block has an unknown body type")
    if priorities and not 0 <= min(priorities) <= max(priorities) <= 9:
        raise BrokerError("an Append request's block has a priority outside 0-9")
    message_ids = _text_column(parts, "message_id", count)
    if len(set(message_ids)) != count:
        raise BrokerError("an Append request's block repeats a message id")
    correlation_ids = _optional(parts, "correlation_id", count)
    types = _optional(parts, "type", count)
    reply_tos = [
        parse_destination(text) if text is not None else None
        for text in _optional(parts, "reply_to", count)
    ]
    bodies = _bytes_column(parts, "body", count)
    properties = _properties(parts, count, entry_count)
    kinds = [_BODY_TYPES[kind] for kind in body_types]
    # Compiled, a loop calls Message's native constructor: map (or an interpreted loop)
    # went through its Python entry, which parses a tuple of 21 arguments per message.
    messages: list[Message] = []
    for i in range(count):
        messages.append(
            Message(
                message_ids[i], target, bodies[i], kinds[i], persistent, priorities[i],
                timestamps[i], expirations[i], correlation_ids[i], reply_tos[i], types[i],
                None, 0, producer_id, connection_id, None, 0, None, properties[i], None,
                first_sequence + i if first_sequence else 0,
            )
        )  # fmt: skip
    return messages


@dataclass(slots=True, init=False, eq=False)
class AppendedBlock:
    """An Append request's block with what its messages were decoded with (``messages``,
    in the block's order). Where they are stored together, one after another, as the broker
    enqueued them, a store may keep the block instead of encoding each message, and read them
    back with ``decode_appended`` (their sequence numbers from the first's on)."""

    block: bytes
    target: Destination
    persistent: bool
    producer_id: str
    connection_id: str
    messages: list[Message] = field(init=False)

    def __init__(
        self,
        block: bytes,
        target: Destination,
        persistent: bool,
        producer_id: str,
        connection_id: str,
    ) -> None:
        self.block = block
        self.target = target
        self.persistent = persistent
        self.producer_id = producer_id
        self.connection_id = connection_id
        self.messages = decode_appended(block, target, persistent, producer_id, connection_id)


pickle_by_fields(__name__)
