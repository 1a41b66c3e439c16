"""Core values as OpenWire structures and back: destinations, message ids (with and
without their text view), producer and consumer ids. Shared by the converter, the frame
writers and readers, the client and the network bridge; structures built here are shared
between uses and only read once built."""

from __future__ import annotations

from typing import Any, Final

from dovecote.core.destinations import Destination, DestinationType
from dovecote.core.errors import InvalidDestinationError, RemoteProtocolError
from dovecote.core.ids import ConsumerId
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import Structure

_DEST_TYPES: Final = {
    t.QUEUE: DestinationType.QUEUE,
    t.TOPIC: DestinationType.TOPIC,
    t.TEMP_QUEUE: DestinationType.TEMP_QUEUE,
    t.TEMP_TOPIC: DestinationType.TEMP_TOPIC,
}
_DEST_CODES: Final = {v: k for k, v in _DEST_TYPES.items()}


def destination_of(s: Structure | None) -> Destination | None:
    if s is None:
        return None
    kind = _DEST_TYPES.get(s.type)
    name = s.fields.get("physicalName")
    if kind is None or not name:
        raise InvalidDestinationError(f"not a destination: OpenWire type {s.type}")
    return Destination(kind, name)


def destination_structure(d: Destination | None) -> Structure | None:
    if d is None:
        return None
    # Shared between dispatches: structures are only read once built.
    found = _DEST_STRUCTURES.get(d)
    if found is None:
        if len(_DEST_STRUCTURES) >= 4096:
            _DEST_STRUCTURES.clear()
        found = _DEST_STRUCTURES[d] = Structure(_DEST_CODES[d.type], {"physicalName": d.name})
    return found


_DEST_STRUCTURES: dict[Destination, Structure] = {}


def message_id_text(s: Structure | None) -> str:
    if s is None:
        raise RemoteProtocolError("a message id is missing")
    f = s.fields
    text: str | None = f.get("textView")
    if text:
        return id_from_text(text)
    producer = f.get("producerId") or Structure(t.PRODUCER_ID)
    return f"{message_id_prefix(producer)}:{f.get('producerSequenceId')}"


def id_from_text(text: str) -> str:
    """A message id from a MessageId's own text (textView), which may lack the ID: prefix."""
    return text if text.startswith("ID:") else "ID:" + text


def message_id_prefix(producer: Structure) -> str:
    """What comes before the sequence in the text of a message id without one of its own."""
    p = producer.fields
    return f"{p.get('connectionId')}:{p.get('sessionId')}:{p.get('value')}"


def message_id_structure(text: str, broker_sequence: int = 0) -> Structure:
    """The MessageId of a message id's text. When its producer id and sequence spell the
    text exactly, it goes without a textView, as ActiveMQ's clients and broker send the ids
    they make: the receiver rebuilds the same text from them (``message_id_text``), and each
    dispatch and ack is ~45 bytes shorter, with no string for a Java client to decode and
    encode again in its ack."""
    fields: dict[str, Any] = {"brokerSequenceId": broker_sequence}
    producer_text, _, sequence_text = text.rpartition(":")
    sequence = long_of(sequence_text)
    producer = producer_structure(producer_text) if sequence is not None else None
    if producer is None:
        fields["textView"] = text
    else:
        fields["producerId"] = producer
        fields["producerSequenceId"] = sequence
        if not spells(producer, producer_text) or str(sequence) != sequence_text:
            fields["textView"] = text
    return Structure(t.MESSAGE_ID, fields)


def long_of(text: str) -> int | None:
    """The Java long ``text`` spells in ASCII digits (a leading minus allowed), or None."""
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def spells(producer: Structure, text: str) -> bool:
    """Whether ``producer`` (parsed from ``text``) gives ``text`` back as its text form."""
    return message_id_prefix(producer) == text


def producer_structure(text: str) -> Structure | None:
    """The ProducerId structure of ``<connection>:<session>:<value>``, or None when the text
    is not one. A producer sends many messages: its structure is built once and shared."""
    if text in _PRODUCER_STRUCTURES:
        return _PRODUCER_STRUCTURES[text]
    parts = text.rsplit(":", 2)
    found = None
    if len(parts) == 3:
        session, value = long_of(parts[1]), long_of(parts[2])
        if session is not None and value is not None:
            found = Structure(t.PRODUCER_ID, {"connectionId": parts[0], "sessionId": session,
                                              "value": value})  # fmt: skip
    if len(_PRODUCER_STRUCTURES) >= 4096:
        _PRODUCER_STRUCTURES.clear()
    _PRODUCER_STRUCTURES[text] = found
    return found


_PRODUCER_STRUCTURES: dict[str, Structure | None] = {}


def consumer_structure(consumer_id: ConsumerId) -> Structure:
    """A ConsumerId structure for an id the client did not name itself."""
    return Structure(t.CONSUMER_ID, {"connectionId": str(consumer_id.connection_id),
                                     "sessionId": consumer_id.session_id.value,
                                     "value": consumer_id.value})  # fmt: skip
