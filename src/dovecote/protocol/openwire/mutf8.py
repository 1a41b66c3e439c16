"""Java's modified UTF-8 (DataOutput.writeUTF), which every OpenWire string uses: NUL as
C0 80, characters beyond the BMP as two 3-byte surrogates. Its own module so that it runs
compiled (build_native.py; primitives.py, with its int and str subclasses, cannot be), as it
does for every string of every frame.
"""

from __future__ import annotations

from typing import Final

from dovecote.core.errors import RemoteProtocolError

# (Built with chr: mypyc takes no surrogates in string literals.)
_SURROGATE_FIRST: Final = chr(0xD800)
_SURROGATE_LAST: Final = chr(0xDFFF)


def encode_mutf8(text: str) -> bytes:
    """Java's modified UTF-8: NUL as C0 80, astral characters as two 3-byte surrogates."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    utf16 = text.encode("utf-16-be", "surrogatepass")
    units = "".join(chr(int.from_bytes(utf16[i : i + 2], "big")) for i in range(0, len(utf16), 2))
    return units.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def decode_mutf8(data: bytes) -> str:
    if data.isascii():
        return data.decode("ascii")
    try:
        text = data.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"invalid modified UTF-8: {exc.reason}") from None
    if any(_SURROGATE_FIRST <= ch <= _SURROGATE_LAST for ch in text):
        # Re-join surrogate pairs into the characters they stand for.
        return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")
    return text
