"""The MessageDispatch frames written straight from a message (DispatchFrames) are byte for
byte the frames on_dispatch builds and the general writer marshals, for every field a
message can carry, both body kinds and every protocol version the broker speaks."""

from __future__ import annotations

import pytest

from dovecote.core.commands import ConsumerInfo, DestinationInfo, MessageDispatch
from dovecote.core.destinations import Destination, DestinationType, queue, topic
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from dovecote.core.message import BodyType, Message
from dovecote.protocol.openwire import Marshaller, Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import OpenWireConverter
from dovecote.protocol.openwire.dispatch_frames import DispatchFrames
from dovecote.protocol.openwire.structures import message_id_text

PRODUCER = "ID:host-4242-1700000000000-1:1:1:1"
MESSAGES = {
    "plain": Message(f"{PRODUCER}:1", queue("a"), b"body", BodyType.BYTES),
    "empty bytes": Message(f"{PRODUCER}:2", queue("a"), b"", BodyType.BYTES),
    "text": Message(f"{PRODUCER}:3", queue("a"), "héllo 😀".encode(), BodyType.TEXT),
    "empty text": Message(f"{PRODUCER}:4", queue("a"), b"", BodyType.TEXT),
    "no body": Message(f"{PRODUCER}:5", topic("t"), b"", BodyType.MESSAGE),
    "every field": Message(
        f"{PRODUCER}:6",
        queue("a.b"),
        b"\x00binary\x00",
        BodyType.BYTES,
        persistent=True,
        priority=9,
        timestamp=1_700_000_000_000,
        expiration=1_800_000_000_000,
        correlation_id="corr:ü",
        reply_to=Destination(DestinationType.TEMP_QUEUE, "ID:x-1:1:1"),
        type="kind",
        group_id="group-1",
        group_seq=3,
        user_id="alice",
        redelivery_counter=2,
        original_destination=queue("origin"),
    ),
    "properties": Message(
        f"{PRODUCER}:7",
        topic("t"),
        b"x",
        BodyType.MAP,
        properties={"s": "v", "flag": True, "n": 7, "f": 1.5, "raw": b"\x01", "none": None},
    ),
    "id from STOMP": Message("ID:dovecote-1-2-3", queue("a"), b"x", BodyType.BYTES),
    "id ending in a number, no producer": Message("ID:abc:7", queue("a"), b"x", BodyType.BYTES),
    "sequence with a leading zero": Message(f"{PRODUCER}:007", queue("a"), b"x", BodyType.BYTES),
    "producer with a leading zero": Message(
        "ID:host-4242-1700000000000-1:1:01:1:7", queue("a"), b"x", BodyType.BYTES
    ),
    "sequence beyond a long": Message(f"{PRODUCER}:{2**63}", queue("a"), b"x", BodyType.BYTES),
    "sequence in other digits": Message(
        f"{PRODUCER}:\u0661\u00b2", queue("a"), b"x", BodyType.BYTES
    ),
    "negative sequence": Message(f"{PRODUCER}:-5", queue("a"), b"x", BodyType.BYTES),
    "persistent, no expiry, lowest priority": Message(
        f"{PRODUCER}:8", queue("a"), b"x", BodyType.BYTES, persistent=True, priority=0
    ),
    "priority past 9, negative numbers": Message(
        f"{PRODUCER}:9",
        queue("a"),
        b"x",
        BodyType.BYTES,
        priority=10,
        group_id="g",
        group_seq=-1,
        redelivery_counter=-3,
        timestamp=-5,
    ),
    "sequence of 19 digits": Message(f"{PRODUCER}:{10**18}", queue("a"), b"x", BodyType.BYTES),
    "sequence of 0": Message(f"{PRODUCER}:0", queue("a"), b"x", BodyType.BYTES),
    "negative priority, huge sequence": Message(
        f"{PRODUCER}:{2**62}", queue("a"), b"x", BodyType.BYTES, priority=-1
    ),
}
OWN_ID = ConsumerId(SessionId(ConnectionId("ID:client-7"), 3), 5)


def registered(converter: OpenWireConverter) -> ConsumerId:
    """A consumer the client announced with its own ConsumerInfo."""
    consumer_id = Structure(t.CONSUMER_ID, {"connectionId": "ID:client-7", "sessionId": 3,
                                            "value": 5})  # fmt: skip
    info = Structure(t.CONSUMER_INFO, {"commandId": 4, "consumerId": consumer_id,
                                       "destination": Structure(t.QUEUE, {"physicalName": "a"}),
                                       "prefetchSize": 10})  # fmt: skip
    request = converter.on_structure(info)
    command = request.commands[0]
    assert isinstance(command, ConsumerInfo)
    return command.consumer_id


@pytest.mark.parametrize("version", [9, 10, 11, 12])
@pytest.mark.parametrize("name", list(MESSAGES))
def test_a_dispatch_written_from_the_message_is_the_marshalled_structure(
    version: int, name: str
) -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-7"), "broker")
    marshaller = Marshaller(version=version)
    frames = DispatchFrames(converter, marshaller)
    for consumer_id in (registered(converter), ConsumerId(SessionId(ConnectionId("c"), 1), 2)):
        for sequence in (0, 41):
            dispatch = MessageDispatch(consumer_id, MESSAGES[name], sequence)
            expected = marshaller.frame(converter.on_dispatch(dispatch))
            # Twice: the second from the ids and destinations it encoded the first time.
            assert frames.frame(dispatch) == expected
            assert frames.frame(dispatch) == expected
            assert b"".join(frames.frame_parts(dispatch)) == expected
            parsed = marshaller.parse_body(expected[4:])
            assert parsed.type == t.MESSAGE_DISPATCH


def test_dispatches_of_one_connection_from_many_producers_and_destinations() -> None:
    """One writer for all the messages in turn, twice: what it remembers of the message
    before (its producer, destinations, consumer) is not taken for the next one's."""
    converter = OpenWireConverter(ConnectionId("ID:client-7"), "broker")
    marshaller = Marshaller()
    frames = DispatchFrames(converter, marshaller)
    consumer_id = registered(converter)
    for message in [*MESSAGES.values()] * 2:
        dispatch = MessageDispatch(consumer_id, message, 5)
        assert frames.frame(dispatch) == marshaller.frame(converter.on_dispatch(dispatch))


def test_a_new_protocol_version_is_written_as_that_version() -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-7"), "broker")
    marshaller = Marshaller(version=12)
    frames = DispatchFrames(converter, marshaller)
    dispatch = MessageDispatch(registered(converter), MESSAGES["plain"], 1)
    assert frames.frame(dispatch) == marshaller.frame(converter.on_dispatch(dispatch))
    marshaller.version = 9
    v9 = frames.frame(dispatch)
    assert v9 == marshaller.frame(converter.on_dispatch(dispatch))
    assert b"ID:host-4242" in v9 and MESSAGES["plain"].message_id.encode() not in v9


@pytest.mark.parametrize(
    "message",
    [None, Message(f"{PRODUCER}:9", topic("ActiveMQ.Advisory.Queue"), b"", BodyType.MESSAGE,
                   data_structure=DestinationInfo(ConnectionId("ID:c"), queue("q"), add=True))],
)  # fmt: skip
def test_what_the_direct_writer_does_not_cover_takes_the_general_path(
    message: Message | None,
) -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-7"), "broker")
    marshaller = Marshaller()
    dispatch = MessageDispatch(registered(converter), message, 3)
    expected = marshaller.frame(converter.on_dispatch(dispatch))
    assert DispatchFrames(converter, marshaller).frame(dispatch) == expected


# Ids whose producer id and sequence give their text back: sent without a textView, as
# ActiveMQ sends the ids its clients make.
SPELLED = {"plain", "empty bytes", "text", "empty text", "no body", "every field",
           "properties", "negative sequence", "negative priority, huge sequence",
           "persistent, no expiry, lowest priority", "priority past 9, negative numbers",
           "sequence of 19 digits", "sequence of 0"}  # fmt: skip


@pytest.mark.parametrize("name", list(MESSAGES))
def test_the_id_reads_back_whole_and_carries_its_text_only_when_its_parts_do_not_spell_it(
    name: str,
) -> None:
    converter = OpenWireConverter(ConnectionId("ID:client-7"), "broker")
    marshaller = Marshaller(version=12)
    dispatch = MessageDispatch(registered(converter), MESSAGES[name], 1)
    parsed = marshaller.parse_body(DispatchFrames(converter, marshaller).frame(dispatch)[4:])
    message_id = parsed["message"]["messageId"]
    assert message_id_text(message_id) == MESSAGES[name].message_id
    assert (message_id.get("textView") is None) == (name in SPELLED)


def test_a_large_content_is_handed_out_apart_from_the_rest_of_its_frame() -> None:
    """frame_parts: the very bytes object of the content between the frame's other bytes
    (not copied), for a large body as for the general path's messages (one part)."""
    converter = OpenWireConverter(ConnectionId("ID:client-7"), "broker")
    marshaller = Marshaller()
    frames = DispatchFrames(converter, marshaller)
    consumer_id = registered(converter)
    block = bytes(range(256)) * 1024
    text = "é, 😀 and so on. ".encode() * 4096
    for body, body_type in ((block, BodyType.BYTES), (text, BodyType.TEXT)):
        message = Message(f"{PRODUCER}:10", queue("a"), body, body_type, properties={"n": 1})
        dispatch = MessageDispatch(consumer_id, message, 3)
        parts = frames.frame_parts(dispatch)
        assert b"".join(parts) == marshaller.frame(converter.on_dispatch(dispatch))
        assert len(parts) == 3 and len(parts[0]) + len(parts[2]) < 400
    assert parts[1] is not text  # (a text goes as its Java form, made for the frame)
    message = Message(f"{PRODUCER}:11", queue("a"), block, BodyType.BYTES)
    assert frames.frame_parts(MessageDispatch(consumer_id, message, 5))[1] is block
    advisory = Message(
        "ID:advisory:1",
        topic("ActiveMQ.Advisory.Queue"),
        b"",
        data_structure=DestinationInfo(ConnectionId("ID:c"), queue("q"), add=True),
    )
    dispatch = MessageDispatch(consumer_id, advisory, 4)
    assert frames.frame_parts(dispatch) == [marshaller.frame(converter.on_dispatch(dispatch))]
