"""Messages as the application sees them, and the acknowledgement modes (SPEC K1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from dovecote.core.destinations import Destination
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.primitives import (
    encode_map,
    encode_stream_body,
    encode_text_body,
)

if TYPE_CHECKING:
    from dovecote.client.consumer import MessageConsumer
    from dovecote.client.session import Session


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
    object bodies stay opaque unless the application trusts and decodes them (SPEC K1)."""
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
    _ack_id: Structure | None = field(default=None, repr=False)
    _consumer: MessageConsumer | None = field(default=None, repr=False)

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
        if self._session.ack_mode is AckMode.INDIVIDUAL_ACKNOWLEDGE and self._consumer:
            self._session.acknowledge_one(self._consumer, self._ack_id)
        else:
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
