"""OpenWire's primitive encodings (ActiveMQ's MarshallingSupport): Java's modified UTF-8,
tagged primitive values, primitive maps (message properties, MapMessage bodies, the
WireFormatInfo options) and StreamMessage bodies. All integers are big-endian.

Python values map to Java types so that a round trip keeps the type: ``bool`` BOOLEAN, ``int``
LONG unless wrapped (``JavaInt``, ``JavaShort``, ``JavaByte``), ``float`` DOUBLE unless
``JavaFloat``, ``str`` STRING (BIG_STRING when long), ``bytes`` BYTE_ARRAY, ``JavaChar`` CHAR,
``dict`` MAP, ``list`` LIST, ``None`` NULL.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from dovecote.core.errors import RemoteProtocolError
from dovecote.protocol.openwire.mutf8 import decode_mutf8, encode_mutf8

NULL, BOOLEAN, BYTE, CHAR, SHORT, INTEGER, LONG, DOUBLE, FLOAT = range(9)
STRING, BYTE_ARRAY, MAP, LIST, BIG_STRING = range(9, 14)
MAX_STRING_CHARS: Final = 8191  # Java writes longer strings as BIG_STRING (Short.MAX_VALUE / 4)


class JavaInt(int):
    """An int that travels as a Java int (4 bytes), not a long."""


class JavaShort(int):
    pass


class JavaByte(int):
    pass


class JavaFloat(float):
    pass


class JavaChar(str):
    pass


class Reader:
    """Reads big-endian primitives from a buffer; running short is a protocol error."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        pos = self.pos
        end = pos + n
        if n < 0 or end > len(self.data):
            raise RemoteProtocolError("OpenWire structure runs past the end of its frame")
        self.pos = end
        return self.data[pos:end]

    # The readers below are the decoder's innermost loop (tens per message): they unpack in
    # place instead of slicing, and check the bounds once.
    def _unpack(self, fmt: struct.Struct) -> Any:
        pos = self.pos
        end = pos + fmt.size
        if end > len(self.data):
            raise RemoteProtocolError("OpenWire structure runs past the end of its frame")
        self.pos = end
        return fmt.unpack_from(self.data, pos)[0]

    def boolean(self) -> bool:
        pos = self.pos
        if pos >= len(self.data):
            raise RemoteProtocolError("OpenWire structure runs past the end of its frame")
        self.pos = pos + 1
        return self.data[pos] != 0

    def i8(self) -> int:
        value: int = self._unpack(_B)
        return value

    def i16(self) -> int:
        value: int = self._unpack(_H)
        return value

    def u16(self) -> int:
        value: int = self._unpack(_UH)
        return value

    def i32(self) -> int:
        value: int = self._unpack(_I)
        return value

    def i64(self) -> int:
        value: int = self._unpack(_Q)
        return value

    def f32(self) -> float:
        value: float = self._unpack(_F)
        return value

    def f64(self) -> float:
        value: float = self._unpack(_D)
        return value

    def utf(self) -> str:
        """Java's readUTF: uint16 length, then modified UTF-8."""
        return decode_mutf8(self.take(self.u16()))

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos


_B = struct.Struct(">b")
_H = struct.Struct(">h")
_UH = struct.Struct(">H")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_F = struct.Struct(">f")
_D = struct.Struct(">d")


class Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def boolean(self, value: bool) -> None:
        self.parts.append(b"\x01" if value else b"\x00")

    def i8(self, value: int) -> None:
        self.parts.append(_B.pack(value))

    def i16(self, value: int) -> None:
        self.parts.append(_H.pack(value))

    def i32(self, value: int) -> None:
        self.parts.append(_I.pack(value))

    def i64(self, value: int) -> None:
        self.parts.append(_Q.pack(value))

    def utf(self, text: str) -> None:
        data = encode_mutf8(text)
        if len(data) > 0xFFFF:
            raise ValueError(f"string of {len(data)} bytes is too long for a Java UTF field")
        self.parts.append(_UH.pack(len(data)) + data)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


# -- tagged values and maps ----------------------------------------------------------------


def write_value(w: Writer, value: object) -> None:
    match value:
        case None:
            w.i8(NULL)
        case bool():
            w.i8(BOOLEAN)
            w.boolean(value)
        case JavaByte():
            w.i8(BYTE)
            w.i8(value)
        case JavaShort():
            w.i8(SHORT)
            w.i16(value)
        case JavaInt():
            w.i8(INTEGER)
            w.i32(value)
        case int():
            w.i8(LONG)
            w.i64(value)
        case JavaFloat():
            w.i8(FLOAT)
            w.raw(_F.pack(value))
        case float():
            w.i8(DOUBLE)
            w.raw(_D.pack(value))
        case JavaChar():
            w.i8(CHAR)
            w.raw(value.encode("utf-16-be")[:2])
        case str():
            if len(value) < MAX_STRING_CHARS:
                w.i8(STRING)
                w.utf(value)
            else:
                data = encode_mutf8(value)
                w.i8(BIG_STRING)
                w.i32(len(data))
                w.raw(data)
        case bytes() | bytearray():
            w.i8(BYTE_ARRAY)
            w.i32(len(value))
            w.raw(bytes(value))
        case dict():
            w.i8(MAP)
            write_map(w, value)
        case list() | tuple():
            w.i8(LIST)
            w.i32(len(value))
            for item in value:
                write_value(w, item)
        case _:
            raise ValueError(f"{type(value).__name__} is not an OpenWire primitive")


def read_value(r: Reader) -> object:
    tag = r.i8()
    match tag:
        case 0:
            return None
        case 1:
            return r.boolean()
        case 2:
            return JavaByte(r.i8())
        case 3:
            return JavaChar(r.take(2).decode("utf-16-be", "replace"))
        case 4:
            return JavaShort(r.i16())
        case 5:
            return JavaInt(r.i32())
        case 6:
            return r.i64()
        case 7:
            return r.f64()
        case 8:
            return JavaFloat(r.f32())
        case 9:
            return r.utf()
        case 10:
            return r.take(r.i32())
        case 11:
            return read_map(r)
        case 12:
            return [read_value(r) for _ in range(_count(r, r.i32()))]
        case 13:
            return decode_mutf8(r.take(r.i32()))
    raise RemoteProtocolError(f"unknown OpenWire primitive type {tag}")


def _count(r: Reader, n: int) -> int:
    # Every element takes at least one byte: a larger count cannot be honest.
    if n > r.remaining:
        raise RemoteProtocolError(f"count {n} exceeds the {r.remaining} bytes left")
    return n


def write_map(w: Writer, mapping: dict[str, object] | None) -> None:
    if mapping is None:
        w.i32(-1)
        return
    w.i32(len(mapping))
    for key, value in mapping.items():
        w.utf(key)
        write_value(w, value)


def read_map(r: Reader, limit: int | None = None) -> dict[str, object]:
    n = r.i32()
    if n < 0:
        return {}
    if limit is not None and n > limit:
        raise RemoteProtocolError(f"map of {n} entries exceeds the limit of {limit}")
    result: dict[str, object] = {}
    for _ in range(_count(r, n)):
        key = r.utf()
        result[key] = read_value(r)
    return result


def encode_map(mapping: dict[str, object]) -> bytes:
    w = Writer()
    write_map(w, mapping)
    return w.getvalue()


def decode_map(data: bytes, limit: int | None = None) -> dict[str, object]:
    return read_map(Reader(data), limit)


# -- message bodies ------------------------------------------------------------------------


def encode_text_body(text: str) -> bytes:
    data = encode_mutf8(text)
    return _I.pack(len(data)) + data


def decode_text_body(content: bytes) -> str:
    r = Reader(content)
    n = r.i32()
    return "" if n < 0 else decode_mutf8(r.take(n))


def encode_stream_body(values: list[object]) -> bytes:
    w = Writer()
    for value in values:
        write_value(w, value)
    return w.getvalue()


def decode_stream_body(content: bytes) -> list[object]:
    r = Reader(content)
    values = []
    while r.remaining:
        values.append(read_value(r))
    return values
