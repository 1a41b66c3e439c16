"""STOMP 1.0/1.1/1.2 frames: a sans-I/O parser and an encoder (h11's shape).

Grammar (STOMP 1.2)::

    frame   = command EOL *(header EOL) EOL *OCTET NUL *(EOL)
    EOL     = [CR] LF
    header  = name ":" value

Feed bytes with ``receive_data`` and pull events with ``next_event``: a ``Frame``,
``HEARTBEAT`` (one per bare EOL between frames: the peer is alive), or ``NEED_DATA``. The body
is ``content-length`` bytes when that header is present (it may then contain NULs), else
everything up to the first NUL. Header escaping (``\\\\ \\n \\c`` and in 1.2 ``\\r``) applies in
1.1 and 1.2 but never to CONNECT/CONNECTED. Repeated headers keep their order; the first one
counts.

The buffer is capped: a header section over ``max_header_size``, more than ``max_headers``
headers, or a frame over ``max_frame_size`` raise ``FrameTooLargeError`` as soon as the
buffered bytes prove it, so a peer cannot make us buffer without bound. After any error the
parser stays broken: the connection is to be closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from dovecote.core.errors import (
    FrameTooLargeError,
    LocalProtocolError,
    RemoteProtocolError,
    UnknownCommandError,
)
from dovecote.core.records import pickle_by_fields

DEFAULT_MAX_FRAME_SIZE: Final = 64 * 1024 * 1024
"""ActiveMQ's default maxFrameSize for STOMP is larger still; 64 MiB bounds memory per frame."""
DEFAULT_MAX_HEADER_SIZE: Final = 64 * 1024
"""Command plus headers; ActiveMQ allows 10 KiB per header line, a few of them in practice."""
DEFAULT_MAX_HEADERS: Final = 1000
"""ActiveMQ's maxHeaders default."""
COLLECT_FROM: Final = 32 * 1024
"""A body of at least this content-length that is not all in yet is collected as its chunks
come and joined once (one copy), instead of appended to the buffer and taken out of it
(two copies, and a third when the emptied buffer shrinks)."""

CLIENT_COMMANDS: Final = frozenset(
    {"CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT",
     "ABORT", "DISCONNECT"}
)  # fmt: skip
SERVER_COMMANDS: Final = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
COMMANDS: Final = CLIENT_COMMANDS | SERVER_COMMANDS
_UNESCAPED_COMMANDS: Final = frozenset({"CONNECT", "CONNECTED"})


class _Event(Enum):
    NEED_DATA = "NEED_DATA"
    HEARTBEAT = "HEARTBEAT"


NEED_DATA: Final = _Event.NEED_DATA
HEARTBEAT: Final = _Event.HEARTBEAT


@dataclass(slots=True, unsafe_hash=True, init=False)
class Frame:
    """One frame. Built for every frame read, so made as core/records.py says (a
    written-out ``__init__``), and as immutable."""

    command: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def __init__(
        self, command: str, headers: tuple[tuple[str, str], ...] = (), body: bytes = b""
    ) -> None:
        self.command = command
        self.headers = headers
        self.body = body

    def get(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def header_dict(self) -> dict[str, str]:
        result: dict[str, str] = {}
        for key, value in self.headers:
            result.setdefault(key, value)
        return result


_ESCAPES_11: Final = {"\\\\": "\\", "\\n": "\n", "\\c": ":"}
_ESCAPES_12: Final = {**_ESCAPES_11, "\\r": "\r"}


def _unescape(text: str, version: str) -> str:
    if "\\" not in text:
        return text
    table = _ESCAPES_12 if version == "1.2" else _ESCAPES_11
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            pair = text[i : i + 2]
            replacement = table.get(pair)
            if replacement is None:
                raise RemoteProtocolError(f"undefined escape sequence {pair!r} in header")
            out.append(replacement)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def escape_header(text: str, version: str) -> str:
    """A header name or value as STOMP 1.1/1.2 write it."""
    # Most values need nothing, or only their colons escaped (a message id: ID:host-1:1:1):
    # scans in C beat copies.
    if "\\" not in text and "\n" not in text and "\r" not in text:
        return text.replace(":", "\\c") if ":" in text else text
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
    if version == "1.2":
        text = text.replace("\r", "\\r")
    return text


class FrameParser:
    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_headers: int = DEFAULT_MAX_HEADERS,
        version: str = "1.0",
    ) -> None:
        self.max_frame_size = max_frame_size
        self.max_header_size = max_header_size
        self.max_headers = max_headers
        self.version = version
        self._buffer = bytearray()
        self._scan_from = 0  # where the search for the end of headers resumes
        # The rest of a large body of known length, as its chunks came (see _collect).
        self._parts: list[bytes] | None = None
        self._parts_size = 0
        self._pending: tuple[str, tuple[tuple[str, str], ...], int, int | None] | None = None
        self._error: RemoteProtocolError | None = None
        self._eof = False

    def receive_data(self, data: bytes) -> None:
        if not data:
            self._eof = True
        elif self._parts is not None:
            self._parts.append(data)
            self._parts_size += len(data)
        else:
            self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer) + self._parts_size

    def next_event(self) -> Frame | _Event:
        if self._error is not None:
            raise RemoteProtocolError(f"connection already failed: {self._error}")
        try:
            return self._next()
        except RemoteProtocolError as exc:
            self._error = exc
            raise

    def _next(self) -> Frame | _Event:
        buf = self._buffer
        if self._pending is None:
            if not buf:
                return self._need_data()
            # Bare EOLs between frames are heart-beats.
            first = buf[0]
            if first == 0x0A:
                del buf[:1]
                return HEARTBEAT
            if first == 0x0D:
                if len(buf) == 1:
                    return self._need_data()
                if buf[1] == 0x0A:
                    del buf[:2]
                    return HEARTBEAT
            if not self._parse_head():
                return self._need_data()
        return self._parse_body()

    def _need_data(self) -> _Event:
        if self._eof and (self._parts_size or self._buffer.strip(b"\r\n")):
            raise RemoteProtocolError("connection closed in the middle of a frame")
        return NEED_DATA

    def _parse_head(self) -> bool:
        """Read a frame's command and headers into ``_pending``; False when they are not
        all in the buffer yet."""
        buf = self._buffer
        start = max(self._scan_from - 3, 0)
        end = buf.find(b"\n\n", start)
        head: str | None = None
        if end < 0:
            # Only a CRLF blank line can end the head then. (Searched for only up to an LF
            # LF end otherwise: past it, it would scan every frame behind this one in the
            # buffer again, quadratic for pipelined frames.)
            end = buf.find(b"\n\r\n", start)
            if end < 0:
                # A NUL before any blank line: a frame with no headers and no blank line is
                # malformed, but "COMMAND\n\0" style frames appear from sloppy clients.
                if len(buf) > self.max_header_size:
                    raise FrameTooLargeError(len(buf), self.max_header_size)
                self._scan_from = len(buf)
                return False
            head_end, body_start = end, end + 3
        else:
            head_end, body_start = end, end + 2
            if head_end <= self.max_header_size:
                head = _decoded(buf, head_end)
            if head is None or "\r" in head:
                # CRs (rare): a CRLF blank line may end the head before this LF LF, which
                # then lies in the body (where it may follow bytes that are not UTF-8). It
                # may end on this LF LF's first byte: "\r\n\r\n\n..." (a body that starts
                # with an LF).
                crlf = buf.find(b"\n\r\n", start, head_end + 1)
                if crlf >= 0:
                    head_end, body_start = crlf, crlf + 3
                    head = None
        if head_end > self.max_header_size:
            raise FrameTooLargeError(head_end, self.max_header_size)
        if head is None:
            head = _decoded(buf, head_end)
            if head is None:
                raise RemoteProtocolError("frame command or headers are not valid UTF-8")
        self._scan_from = 0
        escaped = self.version != "1.0"
        newline = head.find("\n")
        command = head if newline < 0 else head[:newline]
        if command not in COMMANDS:
            command = command.rstrip("\r")
            if command not in COMMANDS:
                raise UnknownCommandError(
                    f"unknown STOMP command {command[:40]!r}", _receipt_of(head)
                )
        if command in _UNESCAPED_COMMANDS:
            escaped = False
        if "\r" in head or (escaped and "\\" in head):
            headers = self._headers_slowly(head.split("\n"), escaped)
        else:
            headers = self._headers(head, newline)
        length: int | None = None
        for name, value in headers:
            if name == "content-length":
                length = _content_length(value)
                if body_start + length + 1 > self.max_frame_size:
                    raise FrameTooLargeError(body_start + length + 1, self.max_frame_size)
                break
        del buf[:body_start]
        self._pending = (command, tuple(headers), body_start, length)
        return True

    def _headers(self, head: str, newline: int) -> list[tuple[str, str]]:
        """Most frames' headers: no CR and nothing to unescape. Walked with str.find and
        slices (compiled: native calls, one new string per name and value), where a split
        into lines and a partition of each made twice the objects."""
        headers: list[tuple[str, str]] = []
        if newline < 0:
            return headers
        size = len(head)
        at = newline + 1
        while at <= size:
            eol = head.find("\n", at)
            if eol < 0:
                eol = size
            colon = head.find(":", at, eol)
            if colon < 0:
                return self._headers_slowly(head.split("\n"), False)  # names the bad line
            headers.append((head[at:colon], head[colon + 1 : eol]))
            if len(headers) > self.max_headers:
                raise FrameTooLargeError(len(headers), self.max_headers)
            at = eol + 1
        return headers

    def _headers_slowly(self, lines: list[str], escaped: bool) -> list[tuple[str, str]]:
        if len(lines) - 1 > self.max_headers:
            raise FrameTooLargeError(len(lines) - 1, self.max_headers)
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if line.endswith("\r"):
                line = line[:-1]
            name, sep, value = line.partition(":")
            if not sep:
                raise RemoteProtocolError(f"header line without a colon: {line[:60]!r}")
            if escaped:
                name, value = _unescape(name, self.version), _unescape(value, self.version)
            headers.append((name, value))
        return headers

    def _parse_body(self) -> Frame | _Event:
        assert self._pending is not None
        command, headers, head_size, length = self._pending
        buf = self._buffer
        if length is not None:
            if self._parts is not None:
                if len(buf) + self._parts_size < length + 1:
                    return self._need_data()
                body = self._join_body(length)
            elif len(buf) < length + 1:
                if length >= COLLECT_FROM:
                    self._parts = []
                return self._need_data()
            else:
                if buf[length] != 0:
                    raise _no_nul(length)
                body = _take(buf, length)
                del buf[: length + 1]
        else:
            nul = buf.find(b"\x00", self._scan_from)
            size = head_size + (len(buf) if nul < 0 else nul + 1)
            if size > self.max_frame_size:
                raise FrameTooLargeError(size, self.max_frame_size)
            if nul < 0:
                self._scan_from = len(buf)
                return self._need_data()
            body = _take(buf, nul)
            del buf[: nul + 1]
        self._scan_from = 0
        self._pending = None
        return Frame(command, headers, body)

    def _join_body(self, length: int) -> bytes:
        """The body from what the buffer holds of it and the chunks collected since, joined
        in one copy; what follows the body's NUL becomes the buffer."""
        assert self._parts is not None
        parts, self._parts, self._parts_size = self._parts, None, 0
        buf = self._buffer
        need = length - len(buf)  # of the body, still to come from the parts
        with memoryview(buf) as head:
            pieces: list[bytes | memoryview] = [head]
            for i, part in enumerate(parts):
                if need >= len(part):
                    pieces.append(part)
                    need -= len(part)
                    continue
                pieces.append(memoryview(part)[:need])
                body = b"".join(pieces)
                rest = bytearray(memoryview(part)[need:])
                for later in parts[i + 1 :]:
                    rest += later
                break
            else:  # unreachable: the parts hold the body's NUL at least
                raise AssertionError("collected parts end before the body's NUL")
        if rest[0] != 0:
            raise _no_nul(length)
        del rest[:1]
        self._buffer = rest
        return body


def _decoded(buf: bytearray, size: int) -> str | None:
    """The buffer's first ``size`` bytes as text; None when they are not UTF-8."""
    try:
        return bytes(buf[:size]).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _no_nul(length: int) -> RemoteProtocolError:
    return RemoteProtocolError(f"frame body is not followed by NUL after content-length {length}")


def _take(buf: bytearray, size: int) -> bytes:
    """The first ``size`` bytes of ``buf`` as bytes. A slice of a bytearray copies twice
    (into a bytearray, then into bytes); through a view, once, which pays for itself on large
    bodies, while under a few KiB the view costs more than the copy it saves."""
    if size < 4096:
        return bytes(buf[:size])
    with memoryview(buf) as view:
        return bytes(view[:size])


def _content_length(text: str) -> int:
    size = len(text)
    if 0 < size <= 18:
        # Digits only, the common case, read one by one (compiled: native, where the checks
        # below are four method calls).
        value = 0
        for i in range(size):
            digit = ord(text[i]) - 48
            if digit < 0 or digit > 9:
                break
            value = value * 10 + digit
        else:
            return value
    text = text.strip(" \t")
    # ASCII digits only ("²".isdigit() is true), and no more of them than a size can have.
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise RemoteProtocolError(f"invalid content-length {text[:40]!r}")
    return int(text)


def encode_frame(frame: Frame, version: str = "1.2") -> bytes:
    """Serialise a frame. A body gets a content-length, so it may hold NULs; a MESSAGE's
    only when it holds one (its headers name the length where ActiveMQ's do)."""
    escaped = version != "1.0" and frame.command not in _UNESCAPED_COMMANDS
    lines = [frame.command]
    has_length = False
    for name, value in frame.headers:
        if name == "content-length":
            has_length = True
        if escaped:
            name, value = escape_header(name, version), escape_header(value, version)
        elif "\n" in value or "\n" in name:
            raise LocalProtocolError(
                f"header {name!r} has a newline, which an unescaped header cannot carry"
            )
        lines.append(f"{name}:{value}")
    if frame.body and not has_length and (frame.command != "MESSAGE" or b"\x00" in frame.body):
        lines.append(f"content-length:{len(frame.body)}")
    # One join copies the body once; chained + would copy it twice.
    return b"".join(("\n".join(lines).encode("utf-8"), b"\n\n", frame.body, b"\x00"))


pickle_by_fields(__name__)


def _receipt_of(head: str) -> str | None:
    """The receipt header of a frame head, read plainly (for the ERROR of a frame refused
    before its headers were parsed)."""
    for line in head.split("\n")[1:]:
        name, _, value = line.rstrip("\r").partition(":")
        if name == "receipt":
            return value
    return None
