"""Plain message frames read straight into the core's SendMessage (SendFrames) give exactly
what the general path (parse, then convert) gives; every other shape, and every damaged
frame, is left to the general path (None), never misread."""

from __future__ import annotations

from typing import Any

import pytest

from dovecote.core.ids import ConnectionId
from dovecote.protocol.openwire import Marshaller, Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import OpenWireConverter
from dovecote.protocol.openwire.primitives import encode_map, encode_text_body
from dovecote.protocol.openwire.send_frames import SendFrames, command_id

PRODUCER = Structure(t.PRODUCER_ID, {"connectionId": "ID:host-1-2-3:1", "sessionId": 1,
                                     "value": 4})  # fmt: skip
QUEUE = Structure(t.QUEUE, {"physicalName": "bench.ow"})


def message_id(sequence: int, text: str | None = None, producer: Any = PRODUCER) -> Structure:
    fields = {"textView": text, "producerId": producer, "producerSequenceId": sequence}
    return Structure(t.MESSAGE_ID, {**fields, "brokerSequenceId": 0})


def message(code: int = t.BYTES_MESSAGE, **changes: Any) -> Structure:
    fields: dict[str, Any] = {
        "commandId": 7,
        "responseRequired": False,
        "producerId": PRODUCER,
        "destination": QUEUE,
        "messageId": message_id(12),
        "persistent": False,
        "priority": 4,
        "timestamp": 1_700_000_000_123,
        "content": b"x" * 1024,
    }
    fields.update(changes)
    return Structure(code, fields)


READ_STRAIGHT = {
    "bytes": message(),
    "empty": message(content=None),
    "text": message(t.TEXT_MESSAGE, content=encode_text_body("héllo 😀")),
    "empty text": message(t.TEXT_MESSAGE, content=None),
    "plain message": message(t.MESSAGE, content=None),
    "map": message(t.MAP_MESSAGE, content=encode_map({"a": 1})),
    "every field": message(
        persistent=True,
        priority=9,
        expiration=1_800_000_000_000,
        correlationId="corr-ü",
        replyTo=Structure(t.TEMP_QUEUE, {"physicalName": "ID:x-1:1:1"}),
        originalDestination=Structure(t.TOPIC, {"physicalName": "origin"}),
        type="kind",
        groupID="g",
        groupSequence=3,
        userID="alice",
        redeliveryCounter=2,
        arrival=5,
        brokerInTime=6,
        brokerOutTime=7,
        droppable=True,
        marshalledProperties=encode_map({"s": "v", "flag": True, "n": 7, "f": 1.5}),
    ),
    "id with its own text": message(messageId=message_id(3, "ID:custom-1")),
    "id text without ID:": message(messageId=message_id(3, "custom-2")),
    "negative priority": message(priority=-2),
    # Each number at its type's edges: the straight reader takes them byte by byte.
    "numbers at their limits": message(
        messageId=message_id(2**63 - 1),
        priority=-128,
        expiration=-1,
        timestamp=-(2**63),
        groupID="g",
        groupSequence=-(2**31),
        redeliveryCounter=2**31 - 1,
    ),
    "negative numbers": message(
        messageId=message_id(-5),
        priority=127,
        expiration=2**63 - 1,
        timestamp=-2,
        groupID="g",
        groupSequence=-1,
        redeliveryCounter=-7,
    ),
    "sequence past the short integers": message(messageId=message_id(2**62 + 3)),
    "in a transaction": message(transactionId=Structure(t.LOCAL_TRANSACTION_ID, {
        "connectionId": Structure(t.CONNECTION_ID, {"value": "ID:c"}), "value": 3})),
    # A synchronous send: read straight too, answered by the transport (command_id).
    "response wanted": message(responseRequired=True),
    "persistent, response wanted": message(persistent=True, responseRequired=True),
    "in a transaction, response wanted": message(responseRequired=True, transactionId=Structure(
        t.LOCAL_TRANSACTION_ID, {"connectionId": Structure(t.CONNECTION_ID, {"value": "ID:c"}),
                                 "value": 4})),
    # A network bridge's forwarded send: the brokers it came through.
    "broker path": message(persistent=True, responseRequired=True, brokerPath=[
        Structure(t.BROKER_ID, {"value": "ID:a"}), None,
        Structure(t.BROKER_ID, {"value": "ID:b"})]),
}  # fmt: skip
GENERAL_PATH = {
    "compressed": message(compressed=True),
    "cluster": message(cluster=[Structure(t.BROKER_ID, {"value": "b"})]),
    "no producer": message(producerId=None),
    "no message id": message(messageId=None),
    "id without producer or text": message(messageId=message_id(3, None, None)),
    "no destination": message(destination=None),
    "target consumer": message(targetConsumerId=Structure(t.CONSUMER_ID, {
        "connectionId": "c", "sessionId": 1, "value": 1})),
    "blob": message(t.BLOB_MESSAGE),
    "in an XA transaction": message(transactionId=Structure(t.XA_TRANSACTION_ID, {
        "formatId": 1, "globalTransactionId": b"g", "branchQualifier": b"b"})),
}  # fmt: skip


def general(converter: OpenWireConverter, marshaller: Marshaller, body: bytes) -> Any:
    return converter.on_structure(marshaller.parse_body(body)).commands[0]


@pytest.mark.parametrize("version", [10, 11, 12])
@pytest.mark.parametrize("name", list(READ_STRAIGHT))
def test_a_plain_send_reads_as_the_general_path_reads_it(version: int, name: str) -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-9"), "broker")
    marshaller = Marshaller(version=version)
    body = marshaller.frame(READ_STRAIGHT[name])[4:]
    sends = SendFrames(converter)
    expected = general(converter, marshaller, body)
    assert sends.read(body, version) == expected
    assert sends.read(body, version) == expected  # the second from the remembered ids


def test_sends_that_change_producer_and_destination_read_as_the_general_path_reads_them() -> None:
    """The ids and destinations remembered from earlier frames (the last one, and the ones
    before it) are found again for the frame that names them, not another's."""
    converter = OpenWireConverter(ConnectionId("ID:client-9"), "broker")
    marshaller = Marshaller()
    other_producer = Structure(t.PRODUCER_ID, {"connectionId": "ID:host-1-2-3:1",
                                               "sessionId": 1, "value": 5})  # fmt: skip
    other_queue = Structure(t.QUEUE, {"physicalName": "bench.other"})
    frames = [
        message(),
        message(destination=other_queue, messageId=message_id(13)),
        message(producerId=other_producer, messageId=message_id(1, producer=other_producer)),
        message(messageId=message_id(14)),
        message(
            destination=other_queue,
            producerId=other_producer,
            messageId=message_id(2, producer=other_producer),
        ),
    ]
    sends = SendFrames(converter)
    for structure in frames * 2:
        body = marshaller.frame(structure)[4:]
        assert sends.read(body, 12) == general(converter, marshaller, body)


@pytest.mark.parametrize("name", list(GENERAL_PATH))
def test_other_sends_are_left_to_the_general_path(name: str) -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-9"), "broker")
    body = Marshaller().frame(GENERAL_PATH[name])[4:]
    assert SendFrames(converter).read(body, 12) is None


def test_a_producer_with_a_window_goes_the_general_way() -> None:
    """Its sends are answered with ProducerAcks, which only the general path writes."""
    converter = OpenWireConverter(ConnectionId("ID:client-9"), "broker")
    info = Structure(t.PRODUCER_INFO, {"commandId": 2, "producerId": PRODUCER,
                                       "destination": QUEUE, "windowSize": 65536})  # fmt: skip
    converter.on_structure(info)
    body = Marshaller().frame(message())[4:]
    assert SendFrames(converter).read(body, 12) is None


def test_version_9_goes_the_general_way() -> None:
    converter = OpenWireConverter(ConnectionId("ID:c"), "broker")
    body = Marshaller(version=9).frame(message())[4:]
    assert SendFrames(converter).read(body, 9) is None


def test_damaged_frames_are_never_misread() -> None:
    converter = OpenWireConverter(ConnectionId("ID:c"), "broker")
    marshaller = Marshaller()
    body = marshaller.frame(message(content=b"abc", correlationId="c"))[4:]
    sends = SendFrames(converter)
    assert sends.read(body, 12) is not None
    for cut in range(1, len(body)):
        assert sends.read(body[:cut], 12) is None, cut
    assert sends.read(body + b"\x00", 12) is None


def test_only_sends_that_want_a_response_ask_for_a_synced_store_write() -> None:
    """As KahaDB: a persistent send is synced before its response; one nobody waits for is
    written and left to the next sync, whichever path reads it."""
    converter = OpenWireConverter(ConnectionId("ID:client-9"), "broker")
    marshaller = Marshaller()
    answered = general(converter, marshaller, marshaller.frame(message(
        persistent=True, responseRequired=True))[4:])  # fmt: skip
    unanswered = general(converter, marshaller, marshaller.frame(message(persistent=True))[4:])
    straight = SendFrames(converter).read(marshaller.frame(message(persistent=True))[4:], 12)
    assert (answered.sync, unanswered.sync) == (True, False)
    assert straight is not None and straight.sync is False
    # A producer with a window: answered by a ProducerAck, not a response.
    info = Structure(t.PRODUCER_INFO, {"commandId": 2, "producerId": PRODUCER,
                                       "destination": QUEUE, "windowSize": 65536})  # fmt: skip
    converter.on_structure(info)
    windowed = converter.on_structure(message(persistent=True))
    assert windowed.producer_ack is not None and windowed.commands[0].sync is False


def test_a_synchronous_send_is_read_straight_with_the_command_id_its_response_answers() -> None:
    """Also from a producer with a window: a send that asks for a response gets that, not a
    ProducerAck, on either path."""
    converter = OpenWireConverter(ConnectionId("ID:client-9"), "broker")
    info = Structure(t.PRODUCER_INFO, {"commandId": 2, "producerId": PRODUCER,
                                       "destination": QUEUE, "windowSize": 65536})  # fmt: skip
    converter.on_structure(info)
    marshaller = Marshaller()
    body = marshaller.frame(message(persistent=True, responseRequired=True, commandId=41))[4:]
    straight = SendFrames(converter).read(body, 12)
    assert straight is not None and straight.sync is True
    assert straight == general(converter, marshaller, body)
    assert command_id(body) == 41
    answer = converter.response(command_id(body))
    assert (answer.type, answer["correlationId"]) == (t.RESPONSE, 41)
