"""What the readers that go straight from a frame's bytes to core commands share
(ack_frames.py, send_frames.py): they read the common shape of a frame and give up on
anything else (``Unusual``), leaving it to the general path; ids and destinations are
found by their bytes (null, or 1, a type, a string and fixed-size numbers after it)."""

from __future__ import annotations

import struct
from typing import Final, TypeVar

from dovecote.protocol.openwire.primitives import decode_mutf8

V = TypeVar("V")
CACHE_SIZE: Final = 1024
UH: Final = struct.Struct(">H").unpack_from
I32: Final = struct.Struct(">i").unpack_from


class Unusual(Exception):
    """The frame is not in the common shape: the general path reads it."""


def value_end(body: bytes, pos: int, tails: dict[int, int]) -> int:
    """Where the id or destination at ``pos`` ends; ``tails`` gives, by type, the size of
    the numbers after its string (compiled.value_tails)."""
    if not body[pos]:
        return pos + 1
    tail = tails.get(body[pos + 1])
    if tail is None:
        raise Unusual
    pos += 2
    pos = pos + 3 + UH(body, pos + 1)[0] if body[pos] else pos + 1
    end = pos + tail
    if end > len(body):
        raise Unusual
    return end


def string(body: bytes, pos: int) -> tuple[str | None, int]:
    """A nullable string at ``pos`` (modified UTF-8) and where it ends."""
    if not body[pos]:
        return None, pos + 1
    (n,) = UH(body, pos + 1)
    end = pos + 3 + n
    if end > len(body):
        raise Unusual
    return decode_mutf8(body[pos + 3 : end]), end


def remember(cache: dict[bytes, V], key: bytes, value: V) -> V:
    """Keep ``value`` under ``key`` in a cache that starts again when full."""
    if len(cache) >= CACHE_SIZE:
        cache.clear()
    cache[key] = value
    return value
