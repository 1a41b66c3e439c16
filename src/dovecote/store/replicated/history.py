"""Which group a store holds last, and which master wrote which groups (PROTOCOL.md): the
``m`` ``pos`` and ``m`` ``hist`` keys of the local LevelDB, kept in the groups' own
WriteBatches."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

import msgpack

POSITION_KEY: Final = b"mpos"
HISTORY_KEY: Final = b"mhist"
POSITION: Final = struct.Struct(">QQ")
"""position, epoch."""

History = list[tuple[int, int]]
"""(epoch, its first position), oldest first."""


def read_position(get: Callable[[bytes], bytes | None]) -> tuple[int, int]:
    """(position, epoch) of the last group a store holds; (0, 0) when none."""
    raw = get(POSITION_KEY)
    if raw is None:
        return 0, 0
    position, epoch = POSITION.unpack(raw)
    return position, epoch


def read_history(get: Callable[[bytes], bytes | None]) -> History:
    raw = get(HISTORY_KEY)
    if raw is None:
        return []
    return [(int(epoch), int(first)) for epoch, first in msgpack.unpackb(raw)]


def pack_history(history: History) -> bytes:
    return bytes(msgpack.packb([list(entry) for entry in history]))


def epoch_at(history: History, position: int) -> int:
    """The epoch that wrote ``position`` by this history (0: none)."""
    found = 0
    for epoch, first in history:
        if first <= position:
            found = epoch
    return found


def can_stream(history: History, last: int, epoch: int, position: int) -> bool:
    """Whether a store whose last group is (epoch, position) holds this history's groups up
    to it, so that the stream can go on after it (else it needs a copy)."""
    return 0 < position <= last and epoch != 0 and epoch_at(history, position) == epoch
