"""MessageAck frames read straight into the core's MessageAck: the acks a JMS consumer sends,
one per message, in the common shape (no transaction, no response wanted, no poison cause,
protocol version 10 or later). The general path (parse every field into Structures, then
convert) took about as long as a whole dispatch; here the part of an ack that repeats for a
consumer (destination, consumer id, ack type) is read once and found again by its bytes,
and so is a message id's producer when the id comes without its text. Anything else, a
malformed frame included, returns None and goes the general way, which answers or refuses
it as before.
"""

from __future__ import annotations

from dovecote.core.commands import AckType, MessageAck
from dovecote.core.ids import ConsumerId
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.bigendian import i32
from dovecote.protocol.openwire.straight import (
    ByBytes,
    StraightReader,
    Unusual,
    value_end,
)


class AckFrames(StraightReader[MessageAck]):
    """Reads one connection's plain MessageAck frames (see the module's docstring)."""

    TYPES = frozenset((t.MESSAGE_ACK,))

    def _use(self, version: int) -> None:
        super()._use(version)
        self._heads: ByBytes[tuple[ConsumerId, AckType]] = ByBytes()

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
            found = self._heads.keep(head, self._head(body[consumer_at:pos], body[pos]))
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
        count = i32(body, pos)
        pos += 4
        if body[pos] or pos + 1 != len(body):
            raise Unusual  # a poison cause, or fields we do not know
        return MessageAck(consumer_id, ack_type, last, first, count, sync=False)

    def _head(self, consumer: bytes, ack_type: int) -> tuple[ConsumerId, AckType]:
        """The consumer and ack type of the bytes before the message ids, read once."""
        if consumer == b"\x00" or consumer[1] != t.CONSUMER_ID:
            raise Unusual  # no consumer id: the general path refuses the ack
        return self.converter.consumer_id_of(self._value(consumer)), AckType(ack_type)
