"""The MESSAGE frames the converter writes straight from a message (encode_dispatch) are
byte for byte the frames on_dispatch builds and encode_frame writes, for every header a
message can carry and every STOMP version."""

from __future__ import annotations

import pytest

from dovecote.core.commands import MessageDispatch
from dovecote.core.destinations import Destination, DestinationType, queue, topic
from dovecote.core.ids import ConnectionId
from dovecote.core.message import BodyType, Message
from dovecote.protocol.stomp import Frame, encode_frame
from dovecote.protocol.stomp.converter import StompConverter

MESSAGES = {
    "plain": Message("ID:p-1:1:1:1", queue("a"), b"body"),
    "empty body": Message("ID:p-1:1:1:2", queue("a"), b"", BodyType.TEXT),
    "every header": Message(
        "ID:p-1:1:1:3",
        queue("a.b"),
        b"\x00binary\x00",
        persistent=True,
        priority=9,
        timestamp=1_700_000_000_000,
        expiration=1_800_000_000_000,
        correlation_id="corr:with\\colon\nand line",
        reply_to=topic("replies"),
        type="kind\r1",
        group_id="group:1",
        group_seq=3,
        redelivery_counter=2,
        original_destination=queue("origin"),
    ),
    "properties": Message(
        "ID:p-1:1:1:4",
        topic("t"),
        b"x",
        properties={"a:b": "c\nd", "flag": True, "n": 7, "f": 1.5, "raw": b"\x01", "none": None},
    ),
    "content-length property": Message(
        "ID:p-1:1:1:5", queue("a"), b"xyz", properties={"content-length": "3"}
    ),
    "numbers outside 0-9": Message(
        "ID:p-1:1:1:7", queue("a"), b"x", priority=-1, expiration=10, timestamp=-3
    ),
    "lowest priority, 1.2 ack": Message("ID:p-1:1:1:8", queue("a"), b"x", priority=0),
    "composite destination": Message(
        "ID:p-1:1:1:6", Destination(DestinationType.QUEUE, "a,b"), b"x"
    ),
}


def subscribed(version: str, sub_id: str, ack: str) -> StompConverter:
    converter = StompConverter(ConnectionId("ID:test-1"))
    converter.on_frame(Frame("CONNECT", (("accept-version", version),)))
    converter.on_frame(
        Frame("SUBSCRIBE", (("destination", "/queue/a"), ("id", sub_id), ("ack", ack)))
    )
    return converter


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize("name", list(MESSAGES))
def test_encoded_dispatch_is_the_encoded_frame(version: str, name: str) -> None:
    message = MESSAGES[name]
    if version == "1.0":
        # STOMP 1.0 cannot carry a line feed in a header: the general path copes with it.
        message = Message(message.message_id, message.destination, message.body)
    frames = []
    for sub_id in ("1", "sub:with\\escapes"):
        converter = subscribed(version, sub_id, "client")
        consumer_id = next(iter(converter._subs_by_consumer))
        dispatch = MessageDispatch(consumer_id, message, 1)
        frame = converter.on_dispatch(dispatch)
        assert frame is not None
        expected = encode_frame(frame, version)
        # Twice: the second comes from the shared encoding of the same message.
        assert converter.encode_dispatch(dispatch) == expected
        assert converter.encode_dispatch(dispatch) == expected
        frames.append(expected)
    assert frames[0] != frames[1]


def test_encoded_dispatch_remembers_what_a_client_must_ack() -> None:
    converter = subscribed("1.2", "1", "client-individual")
    consumer_id = next(iter(converter._subs_by_consumer))
    message = MESSAGES["plain"]
    assert converter.encode_dispatch(MessageDispatch(consumer_id, message, 1)) is not None
    ack = converter.on_frame(Frame("ACK", (("id", message.message_id),)))
    assert [type(c).__name__ for c in ack.commands] == ["MessageAck"]


def test_a_dispatch_for_a_closed_subscription_encodes_to_nothing() -> None:
    converter = subscribed("1.2", "1", "auto")
    consumer_id = next(iter(converter._subs_by_consumer))
    converter.on_frame(Frame("UNSUBSCRIBE", (("id", "1"),)))
    assert converter.encode_dispatch(MessageDispatch(consumer_id, MESSAGES["plain"], 1)) is None


def test_each_message_is_written_with_its_own_destination() -> None:
    # The converter keeps the last destination's header value: messages from several
    # destinations in turn, and a temporary queue of the connection's own made meanwhile.
    converter = subscribed("1.2", "1", "auto")
    consumer_id = next(iter(converter._subs_by_consumer))
    reply = converter.on_frame(
        Frame("SEND", (("destination", "/queue/a"), ("reply-to", "/temp-queue/r")), b"q")
    )
    temporary = reply.commands[-1].message.reply_to  # type: ignore[attr-defined]
    assert temporary is not None
    sequence = [queue("a"), queue("b:c"), queue("b:c"), queue("a"), temporary, queue("a")]
    for n, destination in enumerate(sequence):
        message = Message(f"ID:p-1:1:1:{n}", destination, b"x")
        dispatch = MessageDispatch(consumer_id, message, 1)
        frame = converter.on_dispatch(dispatch)
        assert frame is not None
        assert converter.encode_dispatch(dispatch) == encode_frame(frame, "1.2")
    assert frame.get("destination") == "/queue/a"
