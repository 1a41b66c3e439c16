"""Plain MessageAck frames read straight into the core's MessageAck (AckFrames) give exactly
what the general path (parse, then convert) gives; every other shape, and every damaged
frame, is left to the general path (None), never misread."""

from __future__ import annotations

from typing import Any

import pytest

from dovecote.core.ids import ConnectionId
from dovecote.protocol.openwire import Marshaller, Structure, Throwable
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.ack_frames import AckFrames
from dovecote.protocol.openwire.converter import OpenWireConverter

PRODUCER = Structure(t.PRODUCER_ID, {"connectionId": "ID:host-1-2-3:1", "sessionId": 1,
                                     "value": 1})  # fmt: skip
CONSUMER = Structure(t.CONSUMER_ID, {"connectionId": "ID:client-é-9", "sessionId": 2,
                                     "value": 7})  # fmt: skip


def message_id(sequence: int, text: str | None = "default") -> Structure:
    if text == "default":
        text = f"ID:host-1-2-3:1:1:1:{sequence}"
    fields = {"textView": text, "producerId": PRODUCER, "producerSequenceId": sequence}
    return Structure(t.MESSAGE_ID, {**fields, "brokerSequenceId": 99})


def ack(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "commandId": 12,
        "responseRequired": False,
        "destination": Structure(t.QUEUE, {"physicalName": "bench.ow"}),
        "consumerId": CONSUMER,
        "ackType": 2,
        "firstMessageId": message_id(5),
        "lastMessageId": message_id(9),
        "messageCount": 5,
    }
    fields.update(changes)
    return fields


READ_STRAIGHT = {
    "standard": ack(),
    "single, no first id": ack(ackType=4, firstMessageId=None, messageCount=1),
    "one message, named twice": ack(firstMessageId=message_id(9), messageCount=1),
    "delivered": ack(ackType=0),
    "topic, no destination": ack(destination=None),
    "text without ID: prefix": ack(lastMessageId=message_id(9, "host-1:1:1:9")),
    "no producer in the id": ack(lastMessageId=Structure(t.MESSAGE_ID, {"textView": "ID:x"})),
    # As ActiveMQ's broker dispatches (and dovecote's, when the parts spell the id).
    "id without text": ack(lastMessageId=message_id(9, None)),
    "ids without text": ack(firstMessageId=message_id(5, None), lastMessageId=message_id(9, None)),
    "one without text, named twice": ack(
        firstMessageId=message_id(9, None), lastMessageId=message_id(9, None), messageCount=1
    ),
}
GENERAL_PATH = {
    "response wanted": ack(responseRequired=True),
    "in a transaction": ack(transactionId=Structure(t.LOCAL_TRANSACTION_ID, {
        "connectionId": Structure(t.CONNECTION_ID, {"value": "ID:client-é-9"}), "value": 3})),
    "poison": ack(ackType=1, poisonCause=Throwable("java.lang.Exception", "bad")),
    "id with neither text nor producer": ack(lastMessageId=Structure(t.MESSAGE_ID, {})),
    "no last id": ack(lastMessageId=None),
    "no consumer": ack(consumerId=None),
}  # fmt: skip


def general(converter: OpenWireConverter, marshaller: Marshaller, body: bytes) -> Any:
    return converter.on_structure(marshaller.parse_body(body)).commands[0]


@pytest.mark.parametrize("version", [10, 11, 12])
@pytest.mark.parametrize("name", list(READ_STRAIGHT))
def test_a_plain_ack_reads_as_the_general_path_reads_it(version: int, name: str) -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-é-9"), "broker")
    marshaller = Marshaller(version=version)
    body = marshaller.frame(Structure(t.MESSAGE_ACK, READ_STRAIGHT[name]))[4:]
    acks = AckFrames(converter)
    expected = general(converter, marshaller, body)
    assert acks.read(body, version) == expected
    assert acks.read(body, version) == expected  # the second from the remembered head
    assert expected.sync is False


@pytest.mark.parametrize("name", list(GENERAL_PATH))
def test_other_acks_are_left_to_the_general_path(name: str) -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-é-9"), "broker")
    body = Marshaller().frame(Structure(t.MESSAGE_ACK, GENERAL_PATH[name]))[4:]
    assert AckFrames(converter).read(body, 12) is None


def test_version_9_ids_have_no_text_and_go_the_general_way() -> None:
    converter = OpenWireConverter(ConnectionId("ID:c"), "broker")
    body = Marshaller(version=9).frame(Structure(t.MESSAGE_ACK, ack()))[4:]
    assert AckFrames(converter).read(body, 9) is None


def test_damaged_frames_are_never_misread() -> None:
    """Every truncation, a byte too many and an unknown ack type: None (the general path
    then refuses the frame)."""
    converter = OpenWireConverter(ConnectionId("ID:c"), "broker")
    marshaller = Marshaller()
    body = marshaller.frame(Structure(t.MESSAGE_ACK, ack()))[4:]
    acks = AckFrames(converter)
    assert acks.read(body, 12) is not None
    for cut in range(1, len(body)):
        assert acks.read(body[:cut], 12) is None, cut
    assert acks.read(body + b"\x00", 12) is None
    unknown = marshaller.frame(Structure(t.MESSAGE_ACK, ack(ackType=99)))[4:]
    assert AckFrames(converter).read(unknown, 12) is None
    not_an_ack = marshaller.frame(Structure(t.KEEP_ALIVE_INFO, {"commandId": 1}))[4:]
    assert acks.read(not_an_ack, 12) is None
