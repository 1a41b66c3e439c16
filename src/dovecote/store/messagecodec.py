"""Messages as msgpack values, for every store that keeps them as bytes."""

from __future__ import annotations

from typing import Any

import msgpack

from dovecote.core.destinations import Destination, parse_destination
from dovecote.core.message import BodyType, Message


def _dest(d: Destination | None) -> str | None:
    return None if d is None else str(d)


def _undest(text: str | None) -> Destination | None:
    return None if text is None else parse_destination(text)


def encode_message(m: Message) -> list[Any]:
    return [
        m.message_id, str(m.destination), m.body, int(m.body_type), m.persistent, m.priority,
        m.timestamp, m.expiration, m.correlation_id, _dest(m.reply_to), m.type, m.group_id,
        m.group_seq, m.producer_id, m.connection_id, m.user_id, m.redelivery_counter,
        _dest(m.original_destination), dict(m.properties), m.sequence,
    ]  # fmt: skip


def decode_message(f: list[Any]) -> Message:
    return Message(
        message_id=f[0], destination=parse_destination(f[1]), body=f[2],
        body_type=BodyType(f[3]), persistent=f[4], priority=f[5], timestamp=f[6],
        expiration=f[7], correlation_id=f[8], reply_to=_undest(f[9]), type=f[10],
        group_id=f[11], group_seq=f[12], producer_id=f[13], connection_id=f[14],
        user_id=f[15], redelivery_counter=f[16], original_destination=_undest(f[17]),
        properties=f[18], sequence=f[19] if len(f) > 19 else 0,
    )  # fmt: skip


def pack_message(message: Message) -> bytes:
    return bytes(msgpack.packb(encode_message(message), use_bin_type=True))


def unpack_message(data: bytes) -> Message:
    return decode_message(msgpack.unpackb(data, raw=False, strict_map_key=False))
