"""What the codecs that go straight between a frame's bytes and core commands share
(ack_frames.py, send_frames.py, dispatch_frames.py): they handle the common shape of a frame
and give up on anything else (``Unusual``), leaving it to the general path; ids and
destinations, which repeat from frame to frame, are found by their bytes (null, or 1, a
type, a string and fixed-size numbers after it) in small caches."""

from __future__ import annotations

from typing import Final, Generic, TypeVar

from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.bigendian import i64, u16
from dovecote.protocol.openwire.codec import Structure
from dovecote.protocol.openwire.compiled import Reader, layouts, value_tails
from dovecote.protocol.openwire.converter import OpenWireConverter
from dovecote.protocol.openwire.mutf8 import decode_mutf8
from dovecote.protocol.openwire.structures import id_from_text, message_id_prefix

K = TypeVar("K")
V = TypeVar("V")
C = TypeVar("C")
CACHE_SIZE: Final = 1024
FIRST_VERSION: Final = 10
"""MessageId carries its text, and a message ends with jMSXGroupFirstForConsumer, from 10."""


class Unusual(Exception):
    """The frame is not in the common shape: the general path reads it."""


class StraightReader(Generic[C]):
    """Reads one connection's frames of some types straight into a core command ``C``;
    ``read`` gives None for anything the general path must read."""

    TYPES: frozenset[int] = frozenset()

    def __init__(self, converter: OpenWireConverter, version: int = 12) -> None:
        self.converter = converter
        self._version = 0
        self._use(version)

    def read(self, body: bytes, version: int) -> C | None:
        """The command a frame's type byte and body hold, or None for the general path."""
        if version < FIRST_VERSION or body[0] not in self.TYPES:
            return None
        if version != self._version:
            self._use(version)
        try:
            return self._read(body)
        except Exception:
            # Unusual, or malformed (struct.error, a bad ack type, bad UTF-8, a bad
            # destination...): the general path reads it again and answers for it.
            return None

    def _read(self, body: bytes) -> C:
        raise NotImplementedError

    def _use(self, version: int) -> None:
        """Read ``version``'s layouts from now on (the caches start again)."""
        self._version = version
        self._tails = tails_by_type(value_tails(version))
        self._readers: dict[int, Reader] = layouts(version).readers
        self._id_prefixes: ByBytes[str] = ByBytes()  # -> what precedes an id's sequence

    def _message_id(self, body: bytes, pos: int) -> tuple[str, int]:
        """A MessageId's text (as converter.message_id_text makes it) and where it ends: its
        textView, or without one (ActiveMQ's clients and brokers send none for the ids they
        make) its producer id's text and its sequence."""
        if body[pos] != 1 or body[pos + 1] != t.MESSAGE_ID:
            raise Unusual
        text, pos = string(body, pos + 2)
        end = value_end(body, pos, self._tails)
        sequence = i64(body, end)
        if text:
            return id_from_text(text), end + 16
        producer = body[pos:end]
        prefix = self._id_prefixes.get(producer)
        if prefix is None:
            if producer == b"\x00" or producer[1] != t.PRODUCER_ID:
                raise Unusual
            prefix = self._id_prefixes.keep(producer, message_id_prefix(self._value(producer)))
        return f"{prefix}:{sequence}", end + 16

    def _value(self, raw: bytes) -> Structure:
        """An id or destination from its bytes (flag and type included), read in full."""
        structure, end = self._readers[raw[1]](raw, 2, 1, False)
        if end != len(raw):
            raise Unusual
        return structure


def tails_by_type(tails: dict[int, int]) -> list[int]:
    """compiled.value_tails as a list indexed by type byte (-1: not a value)."""
    return [tails.get(code, -1) for code in range(256)]


def value_end(body: bytes, pos: int, tails: list[int]) -> int:
    """Where the id or destination at ``pos`` ends; ``tails`` gives, by type, the size of
    the numbers after its string (``tails_by_type``)."""
    if not body[pos]:
        return pos + 1
    tail = tails[body[pos + 1]]
    if tail < 0:
        raise Unusual
    pos += 2
    pos = pos + 3 + u16(body, pos + 1) if body[pos] else pos + 1
    end = pos + tail
    if end > len(body):
        raise Unusual
    return end


def string(body: bytes, pos: int) -> tuple[str | None, int]:
    """A nullable string at ``pos`` (modified UTF-8) and where it ends."""
    if not body[pos]:
        return None, pos + 1
    end = pos + 3 + u16(body, pos + 1)
    if end > len(body):
        raise Unusual
    return decode_mutf8(body[pos + 3 : end]), end


class ByBytes(Generic[V]):
    """Values read once and found again by their bytes (a dict that starts again when
    full). The last one found is found again by comparing bytes, without hashing: the key
    is a slice new with every frame, and most frames repeat the last frame's ids and
    destination (a hash of a new slice cost about as much as reading the value's bytes)."""

    def __init__(self) -> None:
        self._values: dict[bytes, V] = {}
        self._last_key = b""  # (no key is empty)
        self._last: V | None = None

    def get(self, key: bytes) -> V | None:
        if key == self._last_key:
            return self._last
        found = self._values.get(key)
        if found is not None:
            self._last_key = key
            self._last = found
        return found

    def keep(self, key: bytes, value: V) -> V:
        remember(self._values, key, value)
        self._last_key = key
        self._last = value
        return value


def remember(cache: dict[K, V], key: K, value: V) -> V:
    """Keep ``value`` under ``key`` in a cache that starts again when full."""
    if len(cache) >= CACHE_SIZE:
        cache.clear()
    cache[key] = value
    return value
