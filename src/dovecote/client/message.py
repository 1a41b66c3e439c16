"""Messages as the application sees them, and the acknowledgement modes (compatibility K1).

Property values keep their Java type both ways: a Python ``int`` travels as a Java long and
``float`` as a double; ``JavaInt``, ``JavaShort``, ``JavaByte`` and ``JavaFloat`` (ints and
floats still) say int, short, byte and float, ``JavaChar`` (a one-character str) a char,
and a received value comes back as the wrapper of its type. ``JMSXGroupID`` and
``JMSXGroupSeq`` travel in the message's group fields, as the Java client sends them
(``JMSXUserID`` stays a property, as there; a received message's user id, when the broker
set one, is its ``JMSXUserID``); a redelivered message also has ``JMSXDeliveryCount``, and
every received one its ``delivery_count``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from dovecote.core.destinations import Destination
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.primitives import (
    JavaByte,
    JavaChar,
    JavaFloat,
    JavaInt,
    JavaShort,
    decode_map,
    decode_stream_body,
    decode_text_body,
    encode_map,
    encode_stream_body,
    encode_text_body,
)
from dovecote.protocol.openwire.structures import destination_of, message_id_text

if TYPE_CHECKING:
    from dovecote.client.consumer import MessageConsumer
    from dovecote.client.session import Session

__all__ = ["AckMode", "JavaByte", "JavaChar", "JavaFloat", "JavaInt", "JavaShort", "Message"]

GROUP_ID, GROUP_SEQ, DELIVERY_COUNT = "JMSXGroupID", "JMSXGroupSeq", "JMSXDeliveryCount"
USER_ID = "JMSXUserID"


class AckMode(IntEnum):
    SESSION_TRANSACTED = 0
    AUTO_ACKNOWLEDGE = 1
    CLIENT_ACKNOWLEDGE = 2
    DUPS_OK_ACKNOWLEDGE = 3
    INDIVIDUAL_ACKNOWLEDGE = 4


@dataclass
class Message:
    """A received or to-be-sent message. ``body`` is text for text messages, bytes else."""

    body: str | bytes | dict[str, Any] | list[Any] = b""
    """str: a TextMessage; bytes: a BytesMessage (an ObjectMessage's serialized bytes when
    ``object_body``); dict: a MapMessage; list: a StreamMessage."""
    object_body: bool = False
    """The bytes are a serialized Java object. They are passed on, never deserialized here:
    object bodies stay opaque unless the application trusts and decodes them (compatibility K1)."""
    properties: dict[str, Any] = field(default_factory=dict)
    correlation_id: str | None = None
    type: str | None = None
    reply_to: Destination | None = None
    priority: int = 4
    persistent: bool = True
    message_id: str | None = None
    destination: Destination | None = None
    timestamp: int = 0
    expiration: int = 0
    redelivered: bool = False
    redelivery_counter: int = 0
    _session: Session | None = field(default=None, repr=False)
    _dispatch: Structure | None = field(default=None, repr=False)
    _consumer: MessageConsumer | None = field(default=None, repr=False)

    @property
    def delivery_count(self) -> int:
        """JMSXDeliveryCount: 1 on the first delivery, one more for each redelivery."""
        return self.redelivery_counter + 1

    @property
    def text(self) -> str:
        if isinstance(self.body, dict | list):
            raise TypeError("a map or stream message has no text")
        return self.body if isinstance(self.body, str) else self.body.decode("utf-8")

    def acknowledge(self) -> None:
        """CLIENT mode: acknowledge every message delivered so far in the session;
        INDIVIDUAL mode: this message only."""
        if self._session is None:
            return
        mode = self._session.ack_mode
        if mode is AckMode.INDIVIDUAL_ACKNOWLEDGE and self._consumer and self._dispatch:
            self._consumer.acknowledge_one(self._dispatch)
        elif mode is AckMode.CLIENT_ACKNOWLEDGE:
            self._session.acknowledge()


def _content(body: str | bytes | dict[str, Any] | list[Any]) -> bytes | None:
    if isinstance(body, str):
        return encode_text_body(body)
    if isinstance(body, dict):
        return encode_map(body) if body else None
    if isinstance(body, list):
        return encode_stream_body(body) if body else None
    return body or None


def _message_type(message: Message) -> int:
    body = message.body
    if isinstance(body, str):
        return t.TEXT_MESSAGE
    if isinstance(body, dict):
        return t.MAP_MESSAGE
    if isinstance(body, list):
        return t.STREAM_MESSAGE
    return t.OBJECT_MESSAGE if message.object_body else t.BYTES_MESSAGE


def header_fields(message: Message) -> dict[str, Any]:
    """The group fields and marshalled properties of a message to send: the JMSX names the
    Java client keeps in fields are taken out of the properties."""
    properties = dict(message.properties)
    group_id = properties.pop(GROUP_ID, None)
    group_seq = properties.pop(GROUP_SEQ, None)
    properties.pop(DELIVERY_COUNT, None)  # set by the receiving client, never sent
    return {
        "groupID": None if group_id is None else str(group_id),
        "groupSequence": int(group_seq or 0),
        "marshalledProperties": encode_map(properties) if properties else None,
    }


def received_message(dispatch: Structure, session: Session, consumer: MessageConsumer) -> Message:
    m = dispatch["message"]
    content = m["content"] or b""
    body: str | bytes | dict[str, Any] | list[Any]
    if m.type == t.TEXT_MESSAGE:
        body = decode_text_body(content) if content else ""
    elif m.type == t.MAP_MESSAGE:
        body = decode_map(content) if content else {}
    elif m.type == t.STREAM_MESSAGE:
        body = decode_stream_body(content) if content else []
    else:
        body = content
    counter = m.get("redeliveryCounter", 0) or 0
    properties: dict[str, Any] = (
        decode_map(m["marshalledProperties"]) if m["marshalledProperties"] else {}
    )
    if m["groupID"] is not None:
        properties[GROUP_ID] = m["groupID"]
        properties[GROUP_SEQ] = JavaInt(m.get("groupSequence", 0) or 0)
    if m["userID"] is not None:  # the field wins over a property, as in Java's getter
        properties[USER_ID] = m["userID"]
    if counter:  # as Java's getPropertyNames: listed once redelivered (delivery_count always)
        properties[DELIVERY_COUNT] = JavaInt(counter + 1)
    return Message(
        body=body, object_body=m.type == t.OBJECT_MESSAGE, properties=properties,
        correlation_id=m["correlationId"], type=m["type"],
        reply_to=destination_of(m["replyTo"]), priority=m.get("priority", 4),
        persistent=bool(m["persistent"]), message_id=message_id_text(m["messageId"]),
        destination=destination_of(m["destination"]), timestamp=m.get("timestamp", 0),
        expiration=m.get("expiration", 0), redelivered=counter > 0, redelivery_counter=counter,
        _session=session, _dispatch=dispatch, _consumer=consumer,
    )  # fmt: skip
