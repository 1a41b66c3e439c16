"""The replication protocol's frames as bytes (PROTOCOL.md): pure, no I/O.

A frame is ``length u32 | type u8 | msgpack body``; ``encode`` makes one from a message,
``decode`` a message from a frame's type and body, raising ProtocolError for anything that
is not one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

import msgpack

VERSION: Final = 1
HEADER: Final = struct.Struct(">IB")
MAX_FRAME: Final = 256 << 20
"""The largest frame a peer takes (a group of sends, or a chunk of a copy, is far smaller)."""

Change = tuple[bytes, bytes | None]


class ProtocolError(Exception):
    """What a peer sent is not a frame of this protocol."""


@dataclass(frozen=True, slots=True)
class Hello:
    version: int
    node_id: str
    epoch: int
    position: int


@dataclass(frozen=True, slots=True)
class Welcome:
    version: int
    node_id: str
    epoch: int
    position: int
    mode: str  # "stream" or "snapshot"


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: str


@dataclass(frozen=True, slots=True)
class Record:
    position: int
    epoch: int
    disk: bool
    changes: list[Change]


@dataclass(frozen=True, slots=True)
class Snapshot:
    position: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Chunk:
    items: list[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class SnapshotEnd:
    position: int


@dataclass(frozen=True, slots=True)
class Ack:
    applied: int
    synced: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    pass


Message = Hello | Welcome | Refuse | Record | Snapshot | Chunk | SnapshotEnd | Ack | Heartbeat

TYPES: Final[dict[type, int]] = {
    Hello: 1,
    Welcome: 2,
    Refuse: 3,
    Record: 4,
    Snapshot: 5,
    Chunk: 6,
    SnapshotEnd: 7,
    Ack: 8,
    Heartbeat: 9,
}
MODES: Final = ("stream", "snapshot")


def _body(message: Message) -> list[Any]:
    match message:
        case Hello(version, node_id, epoch, position):
            return [version, node_id, epoch, position]
        case Welcome(version, node_id, epoch, position, mode):
            return [version, node_id, epoch, position, mode]
        case Refuse(reason):
            return [reason]
        case Record(position, epoch, disk, changes):
            return [position, epoch, disk, [[key, value] for key, value in changes]]
        case Snapshot(position, epoch):
            return [position, epoch]
        case Chunk(items):
            return [[key, value] for key, value in items]
        case SnapshotEnd(position):
            return [position]
        case Ack(applied, synced):
            return [applied, synced]
        case _:
            return []


def encode(message: Message) -> bytes:
    body = bytes(msgpack.packb(_body(message), use_bin_type=True))
    return HEADER.pack(len(body) + 1, TYPES[type(message)]) + body


def frame_length(header: bytes) -> tuple[int, int]:
    """(body length, type) from a frame's first HEADER.size bytes."""
    length, kind = HEADER.unpack(header)
    if not 1 <= length <= MAX_FRAME:
        raise ProtocolError(f"a frame of {length} bytes (at most {MAX_FRAME})")
    return length - 1, kind


def _uint(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ProtocolError(f"{value!r} is not an unsigned integer")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{value!r} is not a string")
    return value


def _bytes(value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise ProtocolError(f"{value!r:.40} is not bytes")
    return value


def _pairs(value: Any, deletes: bool) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError("changes are not a list")
    pairs = []
    for pair in value:
        if not isinstance(pair, list) or len(pair) != 2:
            raise ProtocolError("a change is not a [key, value] pair")
        key, item = pair
        pairs.append((_bytes(key), None if item is None and deletes else _bytes(item)))
    return pairs


def _fields(body: Any, count: int, name: str) -> list[Any]:
    if not isinstance(body, list) or len(body) != count:
        raise ProtocolError(f"a {name} frame is not a list of {count}")
    return body


def decode(kind: int, body: bytes) -> Message:
    """The message of a frame of type ``kind`` with msgpack ``body``."""
    try:
        value = msgpack.unpackb(body, raw=False)
    except Exception as exc:  # msgpack fails in several ways on bytes that are not its own
        raise ProtocolError(f"a body that is not msgpack ({type(exc).__name__})") from None
    match kind:
        case 1:
            version, node_id, epoch, position = _fields(value, 4, "HELLO")
            return Hello(_uint(version), _str(node_id), _uint(epoch), _uint(position))
        case 2:
            version, node_id, epoch, position, mode = _fields(value, 5, "WELCOME")
            if mode not in MODES:
                raise ProtocolError(f"WELCOME with mode {mode!r}")
            return Welcome(_uint(version), _str(node_id), _uint(epoch), _uint(position), mode)
        case 3:
            (reason,) = _fields(value, 1, "REFUSE")
            return Refuse(_str(reason))
        case 4:
            position, epoch, disk, changes = _fields(value, 4, "RECORD")
            if not isinstance(disk, bool):
                raise ProtocolError("RECORD's disk flag is not a boolean")
            return Record(_uint(position), _uint(epoch), disk, _pairs(changes, True))
        case 5:
            position, epoch = _fields(value, 2, "SNAPSHOT")
            return Snapshot(_uint(position), _uint(epoch))
        case 6:
            return Chunk(_pairs(value, False))
        case 7:
            (position,) = _fields(value, 1, "SNAPSHOT_END")
            return SnapshotEnd(_uint(position))
        case 8:
            applied, synced = _fields(value, 2, "ACK")
            return Ack(_uint(applied), _uint(synced))
        case 9:
            _fields(value, 0, "HEARTBEAT")
            return Heartbeat()
    raise ProtocolError(f"an unknown frame type {kind}")


def decode_frame(frame: bytes) -> Message:
    """One whole frame (header included) as its message."""
    if len(frame) < HEADER.size:
        raise ProtocolError("a frame shorter than its header")
    length, kind = frame_length(frame[: HEADER.size])
    if len(frame) - HEADER.size != length:
        raise ProtocolError(f"a frame of {len(frame) - HEADER.size} body bytes, not {length}")
    return decode(kind, frame[HEADER.size :])
