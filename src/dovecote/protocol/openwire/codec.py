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
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from dovecote.core.errors import FrameTooLargeError, RemoteProtocolError
from dovecote.protocol.openwire.primitives import Reader, Writer
from dovecote.protocol.openwire.schema import COMMANDS, SCHEMAS, WIRE_FORMAT_INFO, fields_for

MAGIC: Final = b"ActiveMQ"
DEFAULT_MAX_FRAME_SIZE: Final = 100 * 1024 * 1024  # ActiveMQ's default maxFrameSize (100 MB)
_SIZE: Final = struct.Struct(">i")


class _Event(Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = _Event.NEED_DATA


@dataclass(slots=True)
class Structure:
    """One OpenWire data structure: its type code and its fields by their Java names.
    Missing fields read as None and are written as their kind's default."""

    type: int
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.fields.get(name)

    def get(self, name: str, default: Any = None) -> Any:
        value = self.fields.get(name)
        return default if value is None else value


@dataclass(slots=True)
class Throwable:
    class_name: str
    message: str | None
    stack: list[tuple[str, str, str, int]] = field(default_factory=list)
    cause: Throwable | None = None


_DEFAULTS: Final[dict[str, Any]] = {
    "bool": False, "byte": 0, "short": 0, "int": 0, "long": 0, "string": None, "bytes": None,
    "nested": None, "cached": None, "array": None, "throwable": None, "magic": MAGIC,
}  # fmt: skip


class Marshaller:
    """Loose encoding of structures in one protocol version (9 to 12); ``stack_traces``
    follows the negotiated option."""

    def __init__(self, stack_traces: bool = False, version: int = 12) -> None:
        self.stack_traces = stack_traces
        self.version = version

    # -- writing ---------------------------------------------------------------------------

    def frame(self, structure: Structure) -> bytes:
        w = Writer()
        w.i8(structure.type)
        self._write_body(w, structure)
        body = w.getvalue()
        return _SIZE.pack(len(body)) + body

    def _write_body(self, w: Writer, s: Structure) -> None:
        if s.type not in SCHEMAS:
            raise ValueError(f"no OpenWire schema for type {s.type}")
        schema = fields_for(s.type, self.version)
        if s.type in COMMANDS:
            w.i32(s.get("commandId", 0))
            w.boolean(s.get("responseRequired", False))
        for name, kind in schema:
            value = s.fields.get(name, _DEFAULTS[kind])
            self._write_field(w, kind, value)

    def _write_field(self, w: Writer, kind: str, value: Any) -> None:
        match kind:
            case "bool":
                w.boolean(bool(value))
            case "byte":
                w.i8(value)
            case "short":
                w.i16(value)
            case "int":
                w.i32(value)
            case "long":
                w.i64(value)
            case "string":
                w.boolean(value is not None)
                if value is not None:
                    w.utf(value)
            case "bytes":
                w.boolean(value is not None)
                if value is not None:
                    w.i32(len(value))
                    w.raw(bytes(value))
            case "magic":
                w.raw(value)
            case "nested" | "cached":
                w.boolean(value is not None)
                if value is not None:
                    w.i8(value.type)
                    self._write_body(w, value)
            case "array":
                w.boolean(value is not None)
                if value is not None:
                    w.i16(len(value))
                    for item in value:
                        self._write_field(w, "nested", item)
            case "throwable":
                self._write_throwable(w, value)

    def _write_throwable(self, w: Writer, t: Throwable | None) -> None:
        w.boolean(t is not None)
        if t is None:
            return
        self._write_field(w, "string", t.class_name)
        self._write_field(w, "string", t.message)
        if self.stack_traces:
            w.i16(len(t.stack))
            for declaring, method, file, line in t.stack:
                for text in (declaring, method, file):
                    self._write_field(w, "string", text)
                w.i32(line)
            self._write_throwable(w, t.cause)

    # -- reading ---------------------------------------------------------------------------

    def parse_body(self, body: bytes) -> Structure:
        """Parse one frame's type byte and body; all of it must be used."""
        r = Reader(body)
        structure = self._read_structure(r, r.i8())
        if r.remaining:
            raise RemoteProtocolError(
                f"OpenWire type {structure.type} frame has {r.remaining} bytes past its fields"
            )
        return structure

    def _read_structure(self, r: Reader, type_code: int, depth: int = 0) -> Structure:
        if type_code not in SCHEMAS:
            raise RemoteProtocolError(f"unknown OpenWire data structure type {type_code}")
        schema = fields_for(type_code, self.version)
        if depth > 16:
            raise RemoteProtocolError("OpenWire structures nested too deeply")
        fields: dict[str, Any] = {}
        if type_code in COMMANDS:
            fields["commandId"] = r.i32()
            fields["responseRequired"] = r.boolean()
        for name, kind in schema:
            fields[name] = self._read_field(r, kind, depth)
        return Structure(type_code, fields)

    def _read_field(self, r: Reader, kind: str, depth: int) -> Any:
        match kind:
            case "bool":
                return r.boolean()
            case "byte":
                return r.i8()
            case "short":
                return r.i16()
            case "int":
                return r.i32()
            case "long":
                return r.i64()
            case "string":
                return r.utf() if r.boolean() else None
            case "bytes":
                if not r.boolean():
                    return None
                return r.take(r.i32())
            case "magic":
                magic = r.take(8)
                if magic != MAGIC:
                    raise RemoteProtocolError(f"bad OpenWire magic {magic!r}")
                return magic
            case "nested" | "cached":
                return self._read_structure(r, r.i8(), depth + 1) if r.boolean() else None
            case "array":
                if not r.boolean():
                    return None
                count = r.i16()
                if count < 0 or count > r.remaining:
                    raise RemoteProtocolError(f"bad OpenWire array length {count}")
                return [self._read_field(r, "nested", depth + 1) for _ in range(count)]
            case "throwable":
                return self._read_throwable(r, depth)
        raise AssertionError(kind)

    def _read_throwable(self, r: Reader, depth: int) -> Throwable | None:
        if not r.boolean() or depth > 16:
            return None
        class_name = r.utf() if r.boolean() else ""
        message = r.utf() if r.boolean() else None
        t = Throwable(class_name, message)
        if self.stack_traces:
            frames = r.i16()
            if frames < 0 or frames > r.remaining:
                raise RemoteProtocolError(f"bad stack trace length {frames}")
            for _ in range(frames):
                declaring, method, file = (r.utf() if r.boolean() else "" for _ in range(3))
                t.stack.append((declaring, method, file, r.i32()))
            t.cause = self._read_throwable(r, depth + 1)
        return t


class FrameReader:
    """Splits the byte stream into frames by their size prefix, with a cap on size."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._failed: RemoteProtocolError | None = None

    def receive_data(self, data: bytes) -> None:
        self._buffer += data

    def next_frame(self) -> bytes | _Event:
        """The next frame's type byte and body, or NEED_DATA."""
        if self._failed is not None:
            raise RemoteProtocolError(f"connection already failed: {self._failed}")
        buf = self._buffer
        if len(buf) < 4:
            return NEED_DATA
        (size,) = _SIZE.unpack_from(buf)
        if size < 1:
            self._failed = RemoteProtocolError(f"invalid OpenWire frame size {size}")
            raise self._failed
        if size > self.max_frame_size:
            self._failed = FrameTooLargeError(size, self.max_frame_size)
            raise self._failed
        if len(buf) < 4 + size:
            return NEED_DATA
        frame = bytes(buf[4 : 4 + size])
        del buf[: 4 + size]
        return frame


def is_wire_format_info(structure: Structure) -> bool:
    return structure.type == WIRE_FORMAT_INFO
