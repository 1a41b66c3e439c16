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
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import Marshaller, Structure
from dovecote.protocol.openwire.compiled import utf_field
from dovecote.protocol.openwire.converter import (
    MESSAGE_CODES,
    OpenWireConverter,
    consumer_structure,
    destination_structure,
    long_of,
    message_content,
    producer_structure,
    spells,
)
from dovecote.protocol.openwire.primitives import encode_map
from dovecote.protocol.openwire.straight import K, remember

_NULL: Final = b"\x00"
_MESSAGE_ID: Final = b"\x01\x6e"  # not null, MessageId
_MESSAGE_ID_WITHOUT_TEXT: Final = _MESSAGE_ID + _NULL  # textView null
_COMMAND_HEAD: Final = b"\x00\x00\x00\x00\x00"  # commandId 0, responseRequired false
_FRAME_HEAD: Final = struct.Struct(">ib")  # size, type
_I: Final = struct.Struct(">i")
_Q: Final = struct.Struct(">q")
_QQ: Final = struct.Struct(">qq")
_PERSISTENT_EXPIRATION_PRIORITY: Final = struct.Struct(">?qb")
_COMPRESSED_REDELIVERY: Final = struct.Struct(">?i")
# transactionId null (after the destination), originalDestination comes between them.
# After the body and properties: dataStructure, targetConsumerId null; then compressed and
# the redelivery counter; then brokerPath null, arrival 0.
_AFTER_PROPERTIES: Final = b"\x00\x00"
_BROKER_PATH_ARRIVAL: Final = b"\x00" + bytes(8)
# After userID: recievedByDFBridge, droppable, cluster (null), brokerInTime, brokerOutTime.
_TAIL_V9: Final = b"\x00\x00\x00" + bytes(16)
_TAIL_V10: Final = _TAIL_V9 + b"\x00"  # ...and jMSXGroupFirstForConsumer (since v10)


class DispatchFrames:
    """Writes one connection's MessageDispatch frames; ``frame`` is its only entry point."""

    def __init__(self, converter: OpenWireConverter, marshaller: Marshaller) -> None:
        self.converter = converter
        self.marshaller = marshaller
        self._version = 0
        # Ids and destinations, each encoded once (per protocol version).
        self._consumers: dict[ConsumerId, bytes] = {}
        self._destinations: dict[Destination, bytes] = {}
        self._producers: dict[str, bytes] = {}
        self._spelled: dict[str, bool] = {}  # producer text -> its structure gives it back

    def frame(self, dispatch: MessageDispatch) -> bytes:
        m = dispatch.message
        if m is None or m.data_structure is not None:
            return self.marshaller.frame(self.converter.on_dispatch(dispatch))
        version = self.marshaller.version
        if version != self._version:
            self._version = version
            self._consumers.clear()
            self._destinations.clear()
            self._producers.clear()
            self._spelled.clear()
        destination = self._destination(m.destination)
        producer_text, _, sequence_text = m.message_id.rpartition(":")
        sequence = long_of(sequence_text)
        producer = self._producer(producer_text) if sequence is not None else _NULL
        if producer == _NULL:
            sequence = 0  # as message_id_structure: no producer, no producer sequence
        # The textView (from version 10) only when the producer id and sequence do not
        # spell the id.
        if version < 10:
            message_id = _MESSAGE_ID
        elif producer != _NULL and self._spells(producer_text) and str(sequence) == sequence_text:
            message_id = _MESSAGE_ID_WITHOUT_TEXT
        else:
            message_id = _MESSAGE_ID + utf_field(m.message_id)
        content = message_content(m)
        properties = encode_map(dict(m.properties)) if m.properties else None
        parts = [
            b"",  # the frame head, once the size is known
            _COMMAND_HEAD,
            self._consumer(dispatch.consumer_id),
            destination,
            b"\x01",
            bytes((MESSAGE_CODES[m.body_type],)),
            _COMMAND_HEAD,
            producer,
            destination,
            _NULL,  # transactionId
            self._destination_or_null(m.original_destination),
            message_id,
            producer,
            _QQ.pack(sequence, dispatch.sequence),
            _NULL,  # originalTransactionId
            _string_or_null(m.group_id),
            _I.pack(m.group_seq),
            _string_or_null(m.correlation_id),
            _PERSISTENT_EXPIRATION_PRIORITY.pack(m.persistent, m.expiration, m.priority),
            self._destination_or_null(m.reply_to),
            _Q.pack(m.timestamp),
            _string_or_null(m.type),
            *_bytes_or_null(content),
            *_bytes_or_null(properties),
            _AFTER_PROPERTIES,
            _COMPRESSED_REDELIVERY.pack(False, m.redelivery_counter),
            _BROKER_PATH_ARRIVAL,
            _string_or_null(m.user_id),
            _TAIL_V10 if version >= 10 else _TAIL_V9,
            _I.pack(m.redelivery_counter),  # the dispatch's own redeliveryCounter
        ]
        size = sum(map(len, parts)) + 1  # the type byte counts
        parts[0] = _FRAME_HEAD.pack(size, t.MESSAGE_DISPATCH)
        return b"".join(parts)

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
        raw = self._producers.get(text)
        if raw is None:
            structure = producer_structure(text)
            if structure is None:
                raw = self._producers[text] = _NULL
            else:
                raw = self._remember(self._producers, text, structure)
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


def _string_or_null(text: str | None) -> bytes:
    return _NULL if text is None else utf_field(text)


def _bytes_or_null(data: bytes | None) -> tuple[bytes, ...]:
    return (_NULL,) if data is None else (b"\x01", _I.pack(len(data)), data)
