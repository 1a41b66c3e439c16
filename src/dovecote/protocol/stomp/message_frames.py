"""MESSAGE frames: the headers a message is delivered with, and its encoding for STOMP 1.1
and 1.2 written straight from the message."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from dovecote.core.destinations import Destination
from dovecote.core.message import BROKER_PATH_PROPERTY, BodyType, Message, PropertyValue
from dovecote.protocol.stomp.frames import escape_header

NameOf = Callable[[Destination], str]
"""How a connection names a destination in STOMP (its own temporary ones by its names)."""


def message_headers(
    sub_id: str, message: Message, version: str, name_of: NameOf, acked: bool = True
) -> Iterator[tuple[str, str]]:
    """A MESSAGE frame's headers as ActiveMQ writes them (``acked``: the subscription's
    client acks it, so STOMP 1.2 names what to ack). The group is no header there."""
    yield "subscription", sub_id
    if version == "1.2" and acked:
        yield "ack", message.message_id
    yield "message-id", message.message_id
    yield "destination", name_of(message.destination)
    if message.persistent:
        yield "persistent", "true"
    yield "priority", str(message.priority)
    yield "timestamp", str(message.timestamp)
    yield "expires", str(message.expiration)
    if message.redelivery_counter:
        yield "redelivered", "true"
    if message.correlation_id is not None:
        yield "correlation-id", message.correlation_id
    if message.type is not None:
        yield "type", message.type
    if message.reply_to is not None:
        yield "reply-to", name_of(message.reply_to)
    if message.original_destination is not None:
        yield "original-destination", name_of(message.original_destination)
    for key, value in message.properties.items():
        if key == BROKER_PATH_PROPERTY or key == "content-length":
            continue  # (where a network forwarded it: internal, as ActiveMQ shows nothing)
        text = _property_text(value)
        if version == "1.0" and ("\n" in text or "\n" in key):
            # STOMP 1.0 cannot escape a line feed (say, from an OpenWire property).
            key, text = key.replace("\n", " "), text.replace("\n", " ")
        yield key, text
    if message.body_type == BodyType.BYTES:
        yield "content-length", str(len(message.body))


Tail = tuple[bytes, bytes, bytes]
"""A MESSAGE frame after its subscription header, in parts: the other headers and the blank
line, the body, the NUL. Never joined: the connection's writer hands its parts to the socket
as they are (the body is copied only into the kernel)."""


def message_tail(message: Message, version: str, name_of: NameOf, destination: str) -> Tail:
    """A MESSAGE frame after its subscription header, as ``message_headers`` and
    ``encode_frame`` would write it for STOMP 1.1 or 1.2 (written straight from the message:
    no Frame, no header tuples, as this runs once per message delivered). ``destination``
    is the destination header's value as written: ``name_of(message.destination)``,
    escaped (the caller keeps the last one)."""
    ids = "message-id:" + escape_header(message.message_id, version)
    persistent = "\npersistent:true" if message.persistent else ""
    # The headers every message has, in one f-string (compiled: one native build, where a
    # line each was a concatenation each and a join).
    lines = [
        f"{ids}\ndestination:{destination}{persistent}\npriority:{_number(message.priority)}"
        f"\ntimestamp:{message.timestamp}\nexpires:{_number(message.expiration)}"
    ]
    if message.redelivery_counter:
        lines.append("redelivered:true")
    if message.correlation_id is not None:
        lines.append("correlation-id:" + escape_header(message.correlation_id, version))
    if message.type is not None:
        lines.append("type:" + escape_header(message.type, version))
    if message.reply_to is not None:
        lines.append("reply-to:" + escape_header(name_of(message.reply_to), version))
    if message.original_destination is not None:
        original = name_of(message.original_destination)
        lines.append("original-destination:" + escape_header(original, version))
    for key, value in message.properties.items():
        if key == BROKER_PATH_PROPERTY or key == "content-length":
            continue
        lines.append(
            escape_header(key, version) + ":" + escape_header(_property_text(value), version)
        )
    body = stomp_body(message)
    if message.body_type == BodyType.BYTES or b"\x00" in body:
        lines.append(f"content-length:{len(body)}")
    lines.append("\n")
    return "\n".join(lines).encode("utf-8"), body, b"\x00"


def stomp_body(message: Message) -> bytes:
    """The body a STOMP client is sent, as ActiveMQ sends it: a text or bytes message's
    own; nothing of a map, object or stream message (its Java encoding means nothing to a
    STOMP client). Only a bytes message, or a text that holds a NUL, has a content-length."""
    if message.body_type == BodyType.TEXT or message.body_type == BodyType.BYTES:
        return message.body
    return b""


_SMALL_NUMBERS: Final = [str(n) for n in range(10)]


def _number(n: int) -> str:
    """``str(n)``, made once for a priority or a zero."""
    return _SMALL_NUMBERS[n] if 0 <= n < 10 else str(n)


def _property_text(value: PropertyValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.hex()
    return "" if value is None else str(value)


class TailCache:
    """Messages encoded lately, each with its frame after the first header, for the other
    subscribers of a topic message. A subscription is dispatched a batch of messages at a
    time, so the next subscriber asks for the first of them after all the others: the
    cache keeps a few batches' worth (and at most MAX_BYTES), and starts again when full."""

    __slots__ = ("_bytes", "_tails")
    SIZE = 2048
    MAX_BYTES = 4 * 1024 * 1024

    def __init__(self) -> None:
        # By id(): messages hash by value. The message is kept to know the id is its own.
        self._tails: dict[int, tuple[Message, str, Tail]] = {}
        self._bytes = 0

    def get(self, message: Message, version: str) -> Tail | None:
        found = self._tails.get(id(message))
        if found is not None and found[0] is message and found[1] == version:
            return found[2]
        return None

    def put(self, message: Message, version: str, tail: Tail) -> None:
        if len(self._tails) >= self.SIZE or self._bytes > self.MAX_BYTES:
            self._tails.clear()
            self._bytes = 0
        self._tails[id(message)] = (message, version, tail)
        self._bytes += len(tail[0]) + len(message.body)


tail_cache = TailCache()


def has_temporary(message: Message) -> bool:
    if message.destination.is_temporary:
        return True
    reply_to, original = message.reply_to, message.original_destination
    return (reply_to is not None and reply_to.is_temporary) or (
        original is not None and original.is_temporary
    )
