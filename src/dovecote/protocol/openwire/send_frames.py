"""Message frames read straight into the core's SendMessage: a producer's sends in the common
shape (nothing compressed, no embedded structure, and either a response asked
for or no producer window; protocol version 10 or later). A send that asks for a response
(a synchronous send: ``SendMessage.sync``) is answered by the transport with a Response to
its command id (``command_id``), as the general path's converter answers it. The general path
parses about thirty fields into a Structure with nested Structures for its ids and
destinations, then converts; here the fields go straight into the Message, and the ids and
destinations, which repeat from one message to the next, are read once and found again by
their bytes. Anything else, a malformed frame included, returns None and goes the general
way, which converts or refuses it as before.
"""

from __future__ import annotations

from typing import Final

from dovecote.core.commands import SendMessage
from dovecote.core.destinations import Destination
from dovecote.core.ids import TransactionId
from dovecote.core.message import BROKER_PATH_PROPERTY, BodyType, Message
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.bigendian import i8, i32, i64, u16
from dovecote.protocol.openwire.converter import BODY_TYPES
from dovecote.protocol.openwire.primitives import decode_map, decode_text_body
from dovecote.protocol.openwire.straight import (
    ByBytes,
    StraightReader,
    Unusual,
    string,
    value_end,
)
from dovecote.protocol.openwire.structures import destination_of

# After userID: recievedByDFBridge, droppable, cluster (null), brokerInTime, brokerOutTime,
# jMSXGroupFirstForConsumer. Only cluster is checked (null); the rest the core does not keep.
_TAIL_SIZE: Final = 1 + 1 + 1 + 8 + 8 + 1


class SendFrames(StraightReader[SendMessage]):
    """Reads one connection's plain message frames (see the module's docstring)."""

    TYPES = frozenset(code for code in BODY_TYPES if code != t.BLOB_MESSAGE)

    def _use(self, version: int) -> None:
        super()._use(version)
        # Ids and destinations by their bytes (the flag and type byte included).
        self._destinations: ByBytes[Destination] = ByBytes()
        self._producers: ByBytes[str] = ByBytes()  # -> the producer id's text
        self._transactions: ByBytes[TransactionId] = ByBytes()

    def _read(self, body: bytes) -> SendMessage:
        body_type = BODY_TYPES[body[0]]
        answered = body[5] != 0  # responseRequired: synced, then answered (command_id)
        end = value_end(body, 6, self._tails)
        producer_text = self._producer(body[6:end])
        if not answered and self.converter.windowed(producer_text):
            raise Unusual  # the general path sends its ProducerAck
        pos = end
        end = value_end(body, pos, self._tails)
        destination = self._destination(body[pos:end])
        if destination is None:
            raise Unusual
        pos = end
        # A LocalTransactionId: its number, then its ConnectionId (a string id).
        end = value_end(body, pos + 10, self._tails) if body[pos] else pos + 1
        transaction = self._transaction(body[pos:end])
        pos = end
        end = value_end(body, pos, self._tails)
        original = self._destination(body[pos:end])
        message_id, pos = self._message_id(body, end)
        if body[pos]:
            raise Unusual  # originalTransactionId
        group_id, pos = string(body, pos + 1)
        group_seq = i32(body, pos)
        correlation_id, pos = string(body, pos + 4)
        persistent = body[pos] != 0
        expiration = i64(body, pos + 1)
        priority = i8(body, pos + 9)
        pos += 10
        end = value_end(body, pos, self._tails)
        reply_to = self._destination(body[pos:end])
        timestamp = i64(body, end)
        kind, pos = string(body, end + 8)
        content, pos = _bytes(body, pos)
        marshalled, pos = _bytes(body, pos)
        if body[pos] or body[pos + 1]:
            raise Unusual  # dataStructure, targetConsumerId
        compressed = body[pos + 2] != 0
        redelivery_counter = i32(body, pos + 3)
        pos += 7
        if compressed:
            raise Unusual
        path, pos = _broker_path(body, pos)  # (a network bridge's send has one)
        user_id, pos = string(body, pos + 8)  # (after the arrival time)
        if body[pos + 2] or pos + _TAIL_SIZE != len(body):
            raise Unusual  # a cluster, or fields we do not know
        properties = decode_map(marshalled) if marshalled else {}
        if path:
            properties[BROKER_PATH_PROPERTY] = path  # as the general path keeps it
        message_body = content or b""
        if body_type is BodyType.TEXT and message_body:
            message_body = decode_text_body(message_body).encode("utf-8")
        message = Message(
            message_id=message_id,
            destination=destination,
            body=message_body,
            body_type=body_type,
            persistent=persistent,
            priority=priority,
            timestamp=timestamp,
            expiration=expiration,
            correlation_id=correlation_id,
            reply_to=reply_to,
            type=kind,
            group_id=group_id,
            group_seq=group_seq,
            producer_id=producer_text,
            connection_id=self.converter.connection_text,
            user_id=user_id,
            redelivery_counter=redelivery_counter,
            original_destination=original,
            properties=properties,  # type: ignore[arg-type]
        )
        return SendMessage(message, transaction, sync=answered)

    # -- ids and destinations, read once ------------------------------------------------------

    def _destination(self, raw: bytes) -> Destination | None:
        if raw == b"\x00":
            return None
        found = self._destinations.get(raw)
        if found is None:
            found = destination_of(self._value(raw))  # (refuses what is not one)
            if found is None:
                raise Unusual
            self._destinations.keep(raw, found)
        return found

    def _transaction(self, raw: bytes) -> TransactionId | None:
        # (The Spark writer's sends: one transaction each partition, read here, not parsed
        # and converted each, which was a quarter of the broker's time per send.)
        if raw == b"\x00":
            return None
        found = self._transactions.get(raw)
        if found is None:
            if raw[1] != t.LOCAL_TRANSACTION_ID:
                raise Unusual
            found = self.converter._transaction(self._value(raw))
            assert found is not None
            self._transactions.keep(raw, found)
        return found

    def _producer(self, raw: bytes) -> str:
        found = self._producers.get(raw)
        if found is None:
            if raw == b"\x00" or raw[1] != t.PRODUCER_ID:
                raise Unusual
            found = self._producers.keep(raw, self.converter.producer_text(self._value(raw)))
        return found


def command_id(body: bytes) -> int:
    """The command id of a frame's body (after its type byte): what its Response answers."""
    return i32(body, 1)


def _broker_path(body: bytes, pos: int) -> tuple[str | None, int]:
    """A nullable array of BrokerIds at ``pos``, their values joined as the general path
    joins them, and where it ends."""
    if not body[pos]:
        return None, pos + 1
    ids: list[str] = []
    count = u16(body, pos + 1)
    pos += 3
    for _ in range(count):
        if not body[pos]:
            pos += 1
            continue
        if body[pos + 1] != t.BROKER_ID:
            raise Unusual
        value, pos = string(body, pos + 2)
        if value:
            ids.append(value)
    return ",".join(ids), pos


def _bytes(body: bytes, pos: int) -> tuple[bytes | None, int]:
    """A nullable byte field at ``pos`` and where it ends."""
    if not body[pos]:
        return None, pos + 1
    n = i32(body, pos + 1)
    end = pos + 5 + n
    if n < 0 or end > len(body):
        raise Unusual
    return body[pos + 5 : end], end
