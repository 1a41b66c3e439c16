"""Big-endian numbers read byte by byte, for the codecs' hot paths (the frame splitter, the
straight readers). Compiled, this is native integer arithmetic, where a struct
``unpack_from`` is a call through a bound method that builds a tuple, about ten times per
message frame. Past the end they raise
IndexError, as indexing does."""

from __future__ import annotations


def u16(data: bytes, pos: int) -> int:
    return (data[pos] << 8) | data[pos + 1]


def i32(data: bytes, pos: int) -> int:
    n = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
    return n - 0x1_0000_0000 if n & 0x8000_0000 else n


def i64(data: bytes, pos: int) -> int:
    high = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
    low = (data[pos + 4] << 24) | (data[pos + 5] << 16) | (data[pos + 6] << 8) | data[pos + 7]
    if high & 0x8000_0000:
        return ((high - 0x1_0000_0000) << 32) | low
    return (high << 32) | low


def i8(data: bytes, pos: int) -> int:
    n = data[pos]
    return n - 0x100 if n & 0x80 else n
