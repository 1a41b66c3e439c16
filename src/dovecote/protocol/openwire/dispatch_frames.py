"""MessageDispatch frames written straight from the message: the OpenWire twin of
stomp/message_frames.py. A dispatch runs once per message delivered; building its Structure
(a dict per message, another per message id) and walking the generic field writer cost
about two thirds of the time an OpenWire consumer's message took. The bytes are exactly those
of ``Marshaller.frame(converter.on_dispatch(dispatch))`` (a table test holds them equal for
every protocol version from 9 to 12); whatever this writer does not cover (browse ends, a
message carrying a DestinationInfo advisory) takes that general path.

Loose encoding without the marshal cache (what dovecote negotiates), field by field in the
order of schema.py: a null is one 0 byte; a string is 1, a u16 length and modified UTF-8;
bytes are 1, an i32 length and the bytes; a nested structure is 1, its type and its fields.
"""

from __future__ import annotations

import struct
from typing import Final

from dovecote.core.commands import MessageDispatch
from dovecote.core.destinations import Destination
from dovecote.core.ids import ConsumerId
from dovecote.core.message import BROKER_PATH_PROPERTY
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import Marshaller, Structure
from dovecote.protocol.openwire.compiled import utf_field
from dovecote.protocol.openwire.converter import (
    MESSAGE_CODES,
    OpenWireConverter,
    message_content,
)
from dovecote.protocol.openwire.primitives import encode_map
from dovecote.protocol.openwire.straight import K, remember
from dovecote.protocol.openwire.structures import (
    consumer_structure,
    destination_structure,
    long_of,
    producer_structure,
    spells,
)

_NULL: Final = b"\x00"
_MESSAGE_ID: Final = b"\x01\x6e"  # not null, MessageId
_MESSAGE_ID_WITHOUT_TEXT: Final = _MESSAGE_ID + _NULL  # textView null
_COMMAND_HEAD: Final = b"\x00\x00\x00\x00\x00"  # commandId 0, responseRequired false
_PERSISTENT_EXPIRATION_PRIORITY: Final = struct.Struct(">?qb")
# transactionId null (after the destination), originalDestination comes between them.
# After the body and properties: dataStructure, targetConsumerId null; then compressed and
# the redelivery counter; then brokerPath null, arrival 0.
_AFTER_PROPERTIES: Final = b"\x00\x00"
_BROKER_PATH_ARRIVAL: Final = b"\x00" + bytes(8)
# After userID: recievedByDFBridge, droppable, cluster (null), brokerInTime, brokerOutTime.
_TAIL_V9: Final = b"\x00\x00\x00" + bytes(16)
_TAIL_V10: Final = _TAIL_V9 + b"\x00"  # ...and jMSXGroupFirstForConsumer (since v10)
# The bytes of a frame whatever its message: its type byte, the dispatch's command head and
# transactionId; the message's originalTransactionId, producer and broker sequences,
# groupSequence, persistent, expiration, priority and timestamp, dataStructure and
# targetConsumerId, compressed and redeliveryCounter, brokerPath and arrival; the dispatch's
# redeliveryCounter.
_FIXED_SIZE: Final = 1 + 5 + 1 + 1 + 8 + 8 + 4 + 10 + 8 + 2 + 5 + 9 + 4
# Values most messages share, made once.
_ZERO_I: Final = bytes(4)
_NOT_REDELIVERED: Final = bytes(5)  # compressed false, redeliveryCounter 0
_NO_EXPIRATION: Final = [
    [_PERSISTENT_EXPIRATION_PRIORITY.pack(persistent, 0, priority) for priority in range(10)]
    for persistent in (False, True)
]
# The message's not-null flag, its type and its command head, by body type.
_MESSAGE_TYPE_HEADS: Final = {
    body_type: b"\x01" + bytes((code,)) + _COMMAND_HEAD for body_type, code in MESSAGE_CODES.items()
}


LARGE_CONTENT: Final = 64 * 1024
"""From this size on, a message's content goes to the socket as it is, beside its frame's
other bytes (``frame_parts``), not copied into a frame of its own."""


class DispatchFrames:
    """Writes one connection's MessageDispatch frames: ``frame``, or for a message of
    ``LARGE_CONTENT`` or more ``frame_parts``."""

    def __init__(self, converter: OpenWireConverter, marshaller: Marshaller) -> None:
        self.converter = converter
        self.marshaller = marshaller
        self._version = 0
        # Ids and destinations, each encoded once (per protocol version).
        self._consumers: dict[ConsumerId, bytes] = {}
        self._destinations: dict[Destination, bytes] = {}
        self._producers: dict[str, bytes] = {}
        self._spelled: dict[str, bool] = {}  # producer text -> its structure gives it back
        self._last_producer: str | None = None
        self._last_producer_bytes = _NULL
        self._content_apart = b""
        self._content_at = 0

    def frame_parts(self, dispatch: MessageDispatch) -> list[bytes]:
        """The frame's bytes as [before the content, the content, after it], which written
        one after the other are ``frame``'s (a Spark read's 4 MiB block is not copied)."""
        if _general(dispatch):
            return [self.marshaller.frame(self.converter.on_dispatch(dispatch))]
        frame = self.frame(dispatch, content_apart=True)
        content, self._content_apart = self._content_apart, b""  # (not kept past its frame)
        at = self._content_at
        return [frame[:at], content, frame[at:]]

    def frame(self, dispatch: MessageDispatch, content_apart: bool = False) -> bytes:
        """The frame; with ``content_apart``, without the content's bytes (for
        ``frame_parts``, which finds them and their place in ``_content_apart`` and
        ``_content_at``)."""
        if _general(dispatch):
            return self.marshaller.frame(self.converter.on_dispatch(dispatch))
        m = dispatch.message
        assert m is not None
        version = self.marshaller.version
        if version != self._version:
            self._version = version
            self._consumers.clear()
            self._destinations.clear()
            self._producers.clear()
            self._spelled.clear()
            self._last_producer = None
        destination = self._destination(m.destination)
        producer_text, _, sequence_text = m.message_id.rpartition(":")
        sequence = _canonical_long(sequence_text)
        if sequence is None:
            sequence = long_of(sequence_text)
            canonical = sequence is not None and str(sequence) == sequence_text
        else:
            canonical = True
        producer = _NULL if sequence is None else self._producer(producer_text)
        if sequence is None or producer == _NULL:
            sequence = 0  # as message_id_structure: no producer, no producer sequence
        # The textView (from version 10) only when the producer id and sequence do not
        # spell the id.
        if version < 10:
            message_id = _MESSAGE_ID
        elif producer != _NULL and canonical and self._spells(producer_text):
            message_id = _MESSAGE_ID_WITHOUT_TEXT
        else:
            message_id = _MESSAGE_ID + utf_field(m.message_id)
        content = message_content(m)
        properties = encode_map(dict(m.properties)) if m.properties else None
        consumer = self._consumer(dispatch.consumer_id)
        type_head = _MESSAGE_TYPE_HEADS[m.body_type]
        original = self._destination_or_null(m.original_destination)
        producer_sequence = _long(sequence)
        broker_sequence = _long(dispatch.sequence)
        group_id = _string_or_null(m.group_id)
        group_seq = _int(m.group_seq)
        correlation_id = _string_or_null(m.correlation_id)
        flags = _persistent_expiration_priority(m.persistent, m.expiration, m.priority)
        reply_to = self._destination_or_null(m.reply_to)
        timestamp = _long(m.timestamp)
        kind = _string_or_null(m.type)
        content_head = _bytes_head(content)
        content_bytes = content or b""
        content_size = len(content_bytes)
        if content_apart:
            self._content_apart = content_bytes
            content_bytes = b""
        properties_head = _bytes_head(properties)
        properties_bytes = properties or b""
        redelivered = m.redelivery_counter
        redelivery = _NOT_REDELIVERED if redelivered == 0 else _redelivery(redelivered)
        user_id = _string_or_null(m.user_id)
        tail = _TAIL_V10 if version >= 10 else _TAIL_V9
        counter = _int(redelivered)  # the dispatch's own redeliveryCounter
        # Each part's length by name, then one bytes %-format: compiled, both are native
        # (the format is a single copy of each part into the result), where a list summed
        # with sum(map(len, ...)) and joined was a large share of the broker's cost per
        # message. A part left out of either shows in the table test as different bytes.
        size = (
            _FIXED_SIZE
            + len(consumer)
            + 2 * len(destination)
            + len(type_head)
            + 2 * len(producer)
            + len(original)
            + len(message_id)
            + len(group_id)
            + len(correlation_id)
            + len(reply_to)
            + len(kind)
            + len(content_head)
            + content_size
            + len(properties_head)
            + len(properties_bytes)
            + len(user_id)
            + len(tail)
        )
        head = ((size << 8) | t.MESSAGE_DISPATCH).to_bytes(5, "big")
        if content_apart:
            self._content_at = 4 + size - content_size - (
                len(properties_head) + len(properties_bytes) + len(_AFTER_PROPERTIES)
                + len(redelivery) + len(_BROKER_PATH_ARRIVAL) + len(user_id) + len(tail)
                + len(counter)
            )  # fmt: skip
        return b"%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b" % (
            head,
            _COMMAND_HEAD,
            consumer,
            destination,
            type_head,
            producer,
            destination,
            _NULL,  # transactionId
            original,
            message_id,
            producer,
            producer_sequence,
            broker_sequence,
            _NULL,  # originalTransactionId
            group_id,
            group_seq,
            correlation_id,
            flags,
            reply_to,
            timestamp,
            kind,
            content_head,
            content_bytes,
            properties_head,
            properties_bytes,
            _AFTER_PROPERTIES,
            redelivery,
            _BROKER_PATH_ARRIVAL,
            user_id,
            tail,
            counter,
        )

    # -- values, encoded once ---------------------------------------------------------------

    def _consumer(self, consumer_id: ConsumerId) -> bytes:
        raw = self._consumers.get(consumer_id)
        if raw is None:
            known = self.converter.consumer_structures.get(consumer_id)
            raw = self._remember(self._consumers, consumer_id,
                                 known or consumer_structure(consumer_id))  # fmt: skip
        return raw

    def _destination(self, destination: Destination) -> bytes:
        raw = self._destinations.get(destination)
        if raw is None:
            structure = destination_structure(destination)
            assert structure is not None
            raw = self._remember(self._destinations, destination, structure)
        return raw

    def _destination_or_null(self, destination: Destination | None) -> bytes:
        return _NULL if destination is None else self._destination(destination)

    def _producer(self, text: str) -> bytes:
        # The last producer's first, by comparing the text: each message's is a new string
        # (split from its id), which a dictionary lookup would hash first.
        if text == self._last_producer:
            return self._last_producer_bytes
        raw = self._producers.get(text)
        if raw is None:
            structure = producer_structure(text)
            if structure is None:
                raw = self._producers[text] = _NULL
            else:
                raw = self._remember(self._producers, text, structure)
        self._last_producer = text
        self._last_producer_bytes = raw
        return raw

    def _spells(self, producer_text: str) -> bool:
        spelled = self._spelled.get(producer_text)
        if spelled is None:
            structure = producer_structure(producer_text)
            gives_back = structure is not None and spells(structure, producer_text)
            spelled = remember(self._spelled, producer_text, gives_back)
        return spelled

    def _remember(self, cache: dict[K, bytes], key: K, structure: Structure) -> bytes:
        # The general writer's bytes for the value, less the frame's size prefix.
        return remember(cache, key, b"\x01" + self.marshaller.frame(structure)[4:])


def _general(dispatch: MessageDispatch) -> bool:
    """What the direct writer does not cover: the marshalled structure's general path (a
    message forwarded by a network has its brokerPath on the wire)."""
    m = dispatch.message
    return (
        m is None
        or m.data_structure is not None
        or bool(m.properties and BROKER_PATH_PROPERTY in m.properties)
    )


def _string_or_null(text: str | None) -> bytes:
    return _NULL if text is None else utf_field(text)


def _bytes_head(data: bytes | None) -> bytes:
    """What precedes a nullable byte field's bytes: null, or 1 and the length."""
    return _NULL if data is None else b"\x01" + len(data).to_bytes(4, "big")


# Numbers by int.to_bytes, which compiled is a native operation (struct's pack is a call
# through a bound method).
def _long(n: int) -> bytes:
    return n.to_bytes(8, "big", signed=True)


def _int(n: int) -> bytes:
    return _ZERO_I if n == 0 else n.to_bytes(4, "big", signed=True)


def _redelivery(counter: int) -> bytes:
    """``compressed`` (false) and the message's redeliveryCounter."""
    return b"\x00" + counter.to_bytes(4, "big", signed=True)


def _persistent_expiration_priority(persistent: bool, expiration: int, priority: int) -> bytes:
    if expiration == 0 and 0 <= priority < 10:
        return _NO_EXPIRATION[persistent][priority]
    return _PERSISTENT_EXPIRATION_PRIORITY.pack(persistent, expiration, priority)


def _canonical_long(text: str) -> int | None:
    """The number ``text`` spells when it is how Java prints a long from 0 to 10**18 - 1
    (ASCII digits, no sign, no leading zero): what a producer sequence nearly always is.
    None for anything else, which ``long_of`` reads. (Digit by digit: compiled, native
    arithmetic, where str methods and int() are calls.)"""
    n = len(text)
    if n == 0 or n > 18 or (n > 1 and text[0] == "0"):
        return None
    value = 0
    for char in text:
        digit = ord(char) - 48
        if digit < 0 or digit > 9:
            return None
        value = value * 10 + digit
    return value
