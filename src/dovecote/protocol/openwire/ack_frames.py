"""MessageAck frames read straight into the core's MessageAck: the acks a JMS consumer sends,
one per message, in the common shape (no transaction, no response wanted, no poison cause,
message ids with their text, protocol version 10 or later). The general path (parse every
field into Structures, then convert) took about as long as a whole dispatch; here the part
of an ack that repeats for a consumer (destination, consumer id, ack type) is read once and
found again by its bytes, and the message ids are taken from their text. Anything else, a
malformed frame included, returns None and goes the general way, which answers or refuses
it as before.
"""

from __future__ import annotations

import struct
from typing import Final

from dovecote.core.commands import AckType, MessageAck
from dovecote.core.ids import ConsumerId
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import Structure
from dovecote.protocol.openwire.compiled import value_tails
from dovecote.protocol.openwire.converter import OpenWireConverter
from dovecote.protocol.openwire.straight import CACHE_SIZE, I32, Unusual, string, value_end

_QQ: Final = struct.Struct(">qq").unpack_from
_FIRST_VERSION: Final = 10  # MessageId carries its text (textView) from version 10


class AckFrames:
    """Reads one connection's plain MessageAck frames (see the module's docstring)."""

    def __init__(self, converter: OpenWireConverter, version: int = 12) -> None:
        self.converter = converter
        self._tails = value_tails(version)
        self._version = version
        self._heads: dict[bytes, tuple[ConsumerId, AckType]] = {}

    def read(self, body: bytes, version: int) -> MessageAck | None:
        """The ack a frame's type byte and body hold, or None for the general path."""
        if version < _FIRST_VERSION or body[0] != t.MESSAGE_ACK:
            return None
        if version != self._version:
            self._tails, self._version = value_tails(version), version
            self._heads.clear()
        try:
            return self._read(body)
        except (Unusual, IndexError, struct.error, ValueError, UnicodeDecodeError):
            return None

    def _read(self, body: bytes) -> MessageAck:
        if body[5]:
            raise Unusual  # responseRequired: the general path answers it
        pos = value_end(body, 6, self._tails)  # destination
        if body[pos]:
            raise Unusual  # transactionId
        consumer_at = pos + 1
        pos = value_end(body, consumer_at, self._tails)
        head = body[6 : pos + 1]  # through the ack type
        found = self._heads.get(head)
        if found is None:
            found = self._head(body, consumer_at, pos)
            if len(self._heads) >= CACHE_SIZE:
                self._heads.clear()
            self._heads[head] = found
        consumer_id, ack_type = found
        pos += 1
        if body[pos]:
            start = pos
            first, pos = self._message_id(body, pos)
            # An ack of one message names it twice, byte for byte: read once.
            end = pos + pos - start
            if body[pos:end] == body[start:pos]:
                last, pos = first, end
            else:
                last, pos = self._message_id(body, pos)
        else:
            first = None
            last, pos = self._message_id(body, pos + 1)
        (count,) = I32(body, pos)
        pos += 4
        if body[pos] or pos + 1 != len(body):
            raise Unusual  # a poison cause, or fields we do not know
        return MessageAck(consumer_id, ack_type, last, first, count, sync=False)

    def _head(self, body: bytes, consumer_at: int, ack_type_at: int) -> tuple[ConsumerId, AckType]:
        """The consumer and ack type of the bytes before the message ids, read once."""
        if not body[consumer_at] or body[consumer_at + 1] != t.CONSUMER_ID:
            raise Unusual  # no consumer id: the general path refuses the ack
        connection, numbers_at = string(body, consumer_at + 2)
        if connection is None:
            raise Unusual
        if numbers_at + 16 != ack_type_at:
            raise Unusual
        session, value = _QQ(body, numbers_at)
        structure = Structure(t.CONSUMER_ID, {"connectionId": connection, "sessionId": session,
                                              "value": value})  # fmt: skip
        return self.converter.consumer_id_of(structure), AckType(body[ack_type_at])

    def _message_id(self, body: bytes, pos: int) -> tuple[str, int]:
        """A MessageId's text (as converter.message_id_text reads it) and where it ends."""
        if body[pos] != 1 or body[pos + 1] != t.MESSAGE_ID or not body[pos + 2]:
            raise Unusual  # null, or no text: the general path works it out
        text, pos = string(body, pos + 2)
        if not text:
            raise Unusual
        pos = value_end(body, pos, self._tails)  # the producer id
        pos += 16  # producer and broker sequence ids
        if pos > len(body):
            raise Unusual
        return (text if text.startswith("ID:") else "ID:" + text), pos
