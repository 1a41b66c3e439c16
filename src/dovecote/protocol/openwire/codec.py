"""OpenWire frames, sans-I/O: bytes in, ``Structure`` values out, and back.

A frame is ``int32 size | byte type | body`` (size counts type and body). Bodies are read and
written in *loose* encoding from the field tables in schema.py. dovecote's WireFormatInfo
asks for loose encoding, no marshal cache and a size prefix; every one of those options is
the AND of both sides, so the Java client (which offers tight encoding and the cache) ends up
speaking exactly that: tight encoding never has to be read or written. The first frame of each
side is always loose by definition, so nothing is read before negotiation that we could not
parse.

Limits: a frame larger than ``max_frame_size`` is refused as soon as its size field is read;
a count or length that runs past the frame is a RemoteProtocolError, never an allocation.
"""

from __future__ import annotations

import struct
from enum import Enum
from typing import Final

from dovecote.core.errors import (
    DovecoteError,
    FrameTooLargeError,
    RemoteProtocolError,
    peer_error,
)
from dovecote.protocol.openwire.bigendian import i32
from dovecote.protocol.openwire.compiled import MAGIC, Structure, Throwable, layouts
from dovecote.protocol.openwire.schema import WIRE_FORMAT_INFO, type_name

__all__ = ["MAGIC", "NEED_DATA", "FrameReader", "Marshaller", "Structure", "Throwable"]

DEFAULT_MAX_FRAME_SIZE: Final = 100 * 1024 * 1024  # ActiveMQ's default maxFrameSize (100 MB)
_SIZE: Final = struct.Struct(">i")


class _Event(Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = _Event.NEED_DATA


class Marshaller:
    """Loose encoding of structures in one protocol version (9 to 12); ``stack_traces``
    follows the negotiated option. The work is done by the functions compiled.py generates
    from the field tables."""

    def __init__(self, stack_traces: bool = False, version: int = 12) -> None:
        self.stack_traces = stack_traces
        self.version = version

    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, version: int) -> None:
        self._version = version
        found = layouts(version)
        self._readers = found.readers
        self._writers = found.writers

    def frame(self, structure: Structure) -> bytes:
        try:
            writer = self._writers[structure.type]
        except KeyError:
            raise ValueError(f"no OpenWire schema for type {structure.type}") from None
        out = bytearray(5)  # the size, written last, and the type
        out[4] = structure.type
        writer(out, structure.fields, self.stack_traces)
        _SIZE.pack_into(out, 0, len(out) - 4)
        return bytes(out)

    def parse_body(self, body: bytes) -> Structure:
        """Parse one frame's type byte and body; all of it must be used."""
        if not body:
            raise RemoteProtocolError("empty OpenWire frame")
        try:
            reader = self._readers[body[0]]
        except KeyError:
            raise RemoteProtocolError(f"unknown OpenWire data structure type {body[0]}") from None
        try:
            structure, end = reader(body, 1, 0, self.stack_traces)
        except (IndexError, struct.error):
            raise RemoteProtocolError(
                f"OpenWire {type_name(body[0])} runs past the end of its frame"
            ) from None
        except DovecoteError as exc:
            raise RemoteProtocolError(f"OpenWire {type_name(body[0])}: {exc}") from None
        except Exception as exc:
            # Bad modified UTF-8, a bad magic, ...: the peer's bytes, not our bug.
            raise peer_error(exc, f"OpenWire {type_name(body[0])}") from None
        if end != len(body):
            raise RemoteProtocolError(
                f"OpenWire type {structure.type} frame has {len(body) - end} bytes past its fields"
            )
        return structure


class FrameReader:
    """Splits the byte stream into frames by their size prefix, with a cap on size."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        # The bytes read and not yet framed are ``_data[_start:]`` and then ``_pending``.
        # Frames are sliced out of ``_data``, an immutable bytes (a slice is one copy, and
        # compiled, reading its size is native where a bytearray's bytes are not); the
        # chunks of a frame larger than what has come wait in ``_pending`` until it is all
        # there, and are then joined once into the frame itself (``_ready``): a large frame
        # is copied once, not once per chunk, nor joined and then sliced.
        self._data = b""
        self._start = 0
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._wanted = 0  # bytes still to come before the next frame is whole
        self._ready: bytes | None = None
        self._failed: RemoteProtocolError | None = None

    def receive_data(self, data: bytes) -> None:
        if not data:
            return
        if self._pending_size + len(data) < self._wanted:
            self._pending.append(data)
            self._pending_size += len(data)
            return
        if self._wanted:
            # The frame in progress is whole: its bytes after the size, then what follows.
            rest = self._wanted - self._pending_size
            head = memoryview(self._data)[self._start + 4 :]
            self._ready = b"".join([head, *self._pending, memoryview(data)[:rest]])
            self._data = data
            self._start = rest
        elif self._start >= len(self._data):
            self._data = bytes(data)
            self._start = 0
        else:
            self._data = self._data[self._start :] + data
            self._start = 0
        self._pending = []
        self._pending_size = 0
        self._wanted = 0

    @property
    def wanted(self) -> int:
        """How many bytes the frame in progress still lacks (0: none is in progress, or
        its size has not come yet)."""
        return self._wanted - self._pending_size if self._wanted else 0

    def next_frame(self) -> bytes | _Event:
        """The next frame's type byte and body, or NEED_DATA."""
        if self._failed is not None:
            raise RemoteProtocolError(f"connection already failed: {self._failed}")
        ready = self._ready
        if ready is not None:
            self._ready = None
            return ready
        if self._pending:
            return NEED_DATA  # (still short of ``_wanted``)
        data = self._data
        start = self._start
        if len(data) - start < 4:
            return NEED_DATA
        size = i32(data, start)
        if size < 1:
            self._failed = RemoteProtocolError(f"invalid OpenWire frame size {size}")
            raise self._failed
        if size > self.max_frame_size:
            self._failed = FrameTooLargeError(size, self.max_frame_size)
            raise self._failed
        end = start + 4 + size
        if len(data) < end:
            self._wanted = end - len(data)
            return NEED_DATA
        self._start = end
        return data[start + 4 : end]


def is_wire_format_info(structure: Structure) -> bool:
    return structure.type == WIRE_FORMAT_INFO
