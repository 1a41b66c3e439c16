"""The STOMP frame codec driven with bytes (h11 style): a table of frames checked in both
directions, then tables of bad input and of limits."""

from __future__ import annotations

import itertools

import pytest

from dovecote.core.errors import FrameTooLargeError, LocalProtocolError, RemoteProtocolError
from dovecote.protocol.stomp import HEARTBEAT, NEED_DATA, Frame, FrameParser, encode_frame
from dovecote.protocol.stomp.frames import COLLECT_FROM

SIMPLE_CASES = [
    ("1.2", Frame("CONNECT", (("accept-version", "1.2"), ("host", "h"))),
     b"CONNECT\naccept-version:1.2\nhost:h\n\n\x00"),
    ("1.2", Frame("DISCONNECT"), b"DISCONNECT\n\n\x00"),
    ("1.2", Frame("SEND", (("destination", "/queue/a"), ("content-length", "2")), b"hi"),
     b"SEND\ndestination:/queue/a\ncontent-length:2\n\nhi\x00"),
    ("1.2", Frame("SEND", (("destination", "/queue/a"), ("content-length", "3")), b"a\x00b"),
     b"SEND\ndestination:/queue/a\ncontent-length:3\n\na\x00b\x00"),
    ("1.2", Frame("MESSAGE", (("k", "a:b\nc\\d\re"),)),
     b"MESSAGE\nk:a\\cb\\nc\\\\d\\re\n\n\x00"),
    ("1.1", Frame("MESSAGE", (("k", "a:b\nc\\d"),)), b"MESSAGE\nk:a\\cb\\nc\\\\d\n\n\x00"),
    ("1.0", Frame("MESSAGE", (("k", "a:b\\c"),)), b"MESSAGE\nk:a:b\\c\n\n\x00"),
    # Colons and nothing else to escape (as in every message id), and a CR kept by 1.1.
    ("1.2", Frame("MESSAGE", (("message-id", "ID:h-1:2:3"),)),
     b"MESSAGE\nmessage-id:ID\\ch-1\\c2\\c3\n\n\x00"),
    ("1.1", Frame("MESSAGE", (("k", "a:b\rc"),)), b"MESSAGE\nk:a\\cb\rc\n\n\x00"),
    # CONNECT and CONNECTED are never escaped, whatever the version.
    ("1.2", Frame("CONNECTED", (("server", "x:y\\z"),)), b"CONNECTED\nserver:x:y\\z\n\n\x00"),
    # Repeated headers keep their order on the wire.
    ("1.2", Frame("MESSAGE", (("k", "1"), ("k", "2"))), b"MESSAGE\nk:1\nk:2\n\n\x00"),
]  # fmt: skip


@pytest.mark.parametrize(("version", "frame", "wire"), SIMPLE_CASES)
def test_encode_gives_the_wire_bytes(version: str, frame: Frame, wire: bytes) -> None:
    assert encode_frame(frame, version) == wire


@pytest.mark.parametrize(("version", "frame", "wire"), SIMPLE_CASES)
def test_parse_gives_the_frame(version: str, frame: Frame, wire: bytes) -> None:
    parser = FrameParser(version=version)
    parser.receive_data(wire)
    assert parser.next_event() == frame
    assert parser.next_event() is NEED_DATA


@pytest.mark.parametrize(("version", "frame", "wire"), SIMPLE_CASES)
def test_parse_one_byte_at_a_time(version: str, frame: Frame, wire: bytes) -> None:
    parser = FrameParser(version=version)
    events = []
    for i in range(len(wire)):
        parser.receive_data(wire[i : i + 1])
        while (event := parser.next_event()) is not NEED_DATA:
            events.append(event)
    assert events == [frame]


def test_encode_adds_content_length_to_bodies() -> None:
    wire = encode_frame(Frame("ERROR", (("a", "b"),), b"xyz"))
    assert wire == b"ERROR\na:b\ncontent-length:3\n\nxyz\x00"
    # A MESSAGE's headers say it where ActiveMQ's do; a NUL in the body still needs one.
    assert encode_frame(Frame("MESSAGE", (("a", "b"),), b"xyz")) == b"MESSAGE\na:b\n\nxyz\x00"
    wire = encode_frame(Frame("MESSAGE", (("a", "b"),), b"x\x00z"))
    assert wire == b"MESSAGE\na:b\ncontent-length:3\n\nx\x00z\x00"


def test_first_repeated_header_wins() -> None:
    frame = Frame("MESSAGE", (("k", "1"), ("k", "2")))
    assert frame.get("k") == "1" and frame.header_dict() == {"k": "1"}


def test_crlf_lines_are_accepted() -> None:
    parser = FrameParser(version="1.2")
    parser.receive_data(b"SEND\r\ndestination:/queue/a\r\n\r\nbody\x00")
    assert parser.next_event() == Frame("SEND", (("destination", "/queue/a"),), b"body")


@pytest.mark.parametrize("body_head", [b"", b"\xff\xfe not UTF-8 ", b"x" * 300])
def test_a_crlf_head_ends_at_its_blank_line_whatever_the_body_holds(body_head: bytes) -> None:
    # The body holds an LF LF (found first by the search for the common end of a head),
    # after bytes that are not text, or past the header size limit: the head is the CRLF one.
    body = body_head + b"\n\nrest"
    parser = FrameParser(version="1.2", max_header_size=100)
    parser.receive_data(
        b"SEND\r\ndestination:/queue/a\r\ncontent-length:%d\r\n\r\n%s\x00" % (len(body), body)
    )
    assert parser.next_event() == Frame(
        "SEND", (("destination", "/queue/a"), ("content-length", str(len(body)))), body
    )


def test_a_lone_command_and_a_last_header_without_a_value() -> None:
    parser = FrameParser(version="1.2")
    parser.receive_data(b"DISCONNECT\n\n\x00SEND\ndestination:/queue/a\nempty:\n\nx\x00")
    assert parser.next_event() == Frame("DISCONNECT")
    assert parser.next_event() == Frame("SEND", (("destination", "/queue/a"), ("empty", "")), b"x")


def test_eols_between_frames_are_heartbeats() -> None:
    parser = FrameParser()
    parser.receive_data(b"\n\r\nSEND\ndestination:/q/a\n\n\x00\n\nBEGIN\ntransaction:t\n\n\x00")
    events = []
    while (event := parser.next_event()) is not NEED_DATA:
        events.append(event)
    assert [e if e is HEARTBEAT else e.command for e in events] == [  # type: ignore[union-attr]
        HEARTBEAT, HEARTBEAT, "SEND", HEARTBEAT, HEARTBEAT, "BEGIN",
    ]  # fmt: skip


def test_many_frames_in_one_chunk() -> None:
    wire = encode_frame(Frame("SEND", (("destination", "/queue/a"),), b"x")) * 1000
    parser = FrameParser()
    parser.receive_data(wire)
    count = 0
    while parser.next_event() is not NEED_DATA:
        count += 1
    assert count == 1000


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 100 * 1024])
@pytest.mark.parametrize("with_length", [True, False])
def test_bodies_of_every_size_come_whole_and_the_next_frame_after(
    size: int, with_length: bool
) -> None:
    # Bodies are taken out of the buffer one way below 4 KiB and another above: both must
    # give exactly the body and leave the next frame intact, whatever the chunking.
    body = bytes(i % 251 + 1 for i in range(size))  # no NUL: it may go without a length
    headers = (("destination", "/queue/a"),)
    first = encode_frame(Frame("SEND", headers, body))
    if not with_length:
        first = b"SEND\ndestination:/queue/a\n\n" + body + b"\x00"
    wire = first + encode_frame(Frame("SEND", headers, b"next"))
    parser = FrameParser()
    frames = []
    for start in range(0, len(wire), 7000):
        parser.receive_data(wire[start : start + 7000])
        while (event := parser.next_event()) is not NEED_DATA:
            frames.append(event)
    assert [f.body for f in frames] == [body, b"next"]  # type: ignore[union-attr]


LARGE_BODY = bytes(range(256)) * ((COLLECT_FROM + 1000) // 256)  # every byte value, NUL too
LARGE_HEAD = b"SEND\ndestination:/queue/a\ncontent-length:%d\n\n" % len(LARGE_BODY)
AFTER = encode_frame(Frame("SEND", (("destination", "/queue/b"),), b"next")) + b"\n"
LARGE_WIRE = LARGE_HEAD + LARGE_BODY + b"\x00" + AFTER
BODY_END = len(LARGE_HEAD) + len(LARGE_BODY)  # where the body's NUL is

# Where the chunks of LARGE_WIRE end: the large body is collected as its chunks come once
# it is known to be incomplete, and joined once it and its NUL are in.
LARGE_CUTS = {
    "head alone, then the rest": [len(LARGE_HEAD)],
    "head and some body, then the rest": [len(LARGE_HEAD) + 100],
    "the body ends a chunk, its NUL starts the next": [len(LARGE_HEAD) + 5, BODY_END],
    "the NUL alone": [len(LARGE_HEAD) + 5, BODY_END, BODY_END + 1],
    "the body's end, its NUL and part of the next frame": [len(LARGE_HEAD) + 5, BODY_END + 9],
    "many small chunks": list(range(len(LARGE_HEAD) - 10, len(LARGE_WIRE), 997)),
    "one byte at a time around the end": [len(LARGE_HEAD), *range(BODY_END - 3, BODY_END + 4)],
    "all in one chunk": [],
}


@pytest.mark.parametrize("cuts", LARGE_CUTS.values(), ids=LARGE_CUTS.keys())
def test_a_large_body_comes_whole_however_its_chunks_are_cut(cuts: list[int]) -> None:
    parser = FrameParser()
    events: list[object] = []
    bounds = [0, *cuts, len(LARGE_WIRE)]
    for start, end in itertools.pairwise(bounds):
        parser.receive_data(LARGE_WIRE[start:end])
        while (event := parser.next_event()) is not NEED_DATA:
            events.append(event)
        if not events and end > len(LARGE_HEAD):
            # The head is read; all that came of the body is counted, once.
            assert parser.buffered == end - len(LARGE_HEAD)
    assert parser.buffered == 0
    frames = [e for e in events if isinstance(e, Frame)]
    assert [f.body for f in frames] == [LARGE_BODY, b"next"]
    assert frames[0].get("content-length") == str(len(LARGE_BODY))
    assert events[-1] is HEARTBEAT


def test_a_collected_body_without_its_nul_is_an_error() -> None:
    parser = FrameParser()
    parser.receive_data(LARGE_HEAD)
    assert parser.next_event() is NEED_DATA
    parser.receive_data(LARGE_BODY[:1000])
    assert parser.next_event() is NEED_DATA
    parser.receive_data(LARGE_BODY[1000:] + b"X" + AFTER)
    with pytest.raises(RemoteProtocolError, match="NUL"):
        parser.next_event()


def test_eof_while_a_body_is_collected_is_an_error() -> None:
    parser = FrameParser()
    parser.receive_data(LARGE_HEAD)  # the buffer is empty once the head is read
    assert parser.next_event() is NEED_DATA
    parser.receive_data(LARGE_BODY[:5000])
    assert parser.buffered == 5000
    assert parser.next_event() is NEED_DATA
    parser.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="middle of a frame"):
        parser.next_event()


BAD_INPUT = [
    ("1.2", b"BOGUS\n\n\x00", "unknown"),
    ("1.2", b"SEND\nno colon here\n\n\x00", "colon"),
    ("1.2", b"SEND\nk:bad\\tescape\n\n\x00", "escape"),
    ("1.1", b"SEND\nk:\\r is 1.2 only\n\n\x00", "escape"),
    ("1.2", b"SEND\ncontent-length:abc\n\n\x00", "content-length"),
    ("1.2", b"SEND\ncontent-length:-1\n\n\x00", "content-length"),
    ("1.2", "SEND\ncontent-length:\u00b2\n\n\x00".encode(), "content-length"),
    ("1.2", b"SEND\ncontent-length:" + b"9" * 5000 + b"\n\n\x00", "content-length"),
    ("1.2", b"SEND\ncontent-length:2\n\nabc\x00", "NUL"),
    ("1.2", b"SEND\nk:\xff\xfe\n\n\x00", "UTF-8"),
    ("1.2", b"\xc3(\n\n\x00", "UTF-8"),
]


@pytest.mark.parametrize(("version", "wire", "words"), BAD_INPUT)
def test_bad_input_is_a_remote_protocol_error(version: str, wire: bytes, words: str) -> None:
    parser = FrameParser(version=version)
    parser.receive_data(wire)
    with pytest.raises(RemoteProtocolError, match=words):
        parser.next_event()
    # The parser stays failed: garbage after an error is not parsed.
    with pytest.raises(RemoteProtocolError):
        parser.next_event()


LIMITS = [
    (dict(max_header_size=100), b"SEND\nk:" + b"v" * 200),  # no end of headers yet
    (dict(max_header_size=100), b"SEND\nk:" + b"v" * 200 + b"\n\n\x00"),
    (dict(max_headers=3), b"SEND\na:1\nb:2\nc:3\nd:4\n\n\x00"),
    (dict(max_headers=3), b"SEND\r\na:1\r\nb:2\r\nc:3\r\nd:4\r\n\r\n\x00"),
    (dict(max_frame_size=100), b"SEND\ncontent-length:500\n\n"),  # announced, not sent yet
    (dict(max_frame_size=100), b"SEND\n\n" + b"x" * 200),  # no NUL yet
    (dict(max_frame_size=100), b"SEND\n\n" + b"x" * 200 + b"\x00"),
]


@pytest.mark.parametrize(("limits", "wire"), LIMITS)
def test_limits_raise_frame_too_large_as_soon_as_crossed(
    limits: dict[str, int], wire: bytes
) -> None:
    parser = FrameParser(**limits)
    parser.receive_data(wire)
    with pytest.raises(FrameTooLargeError):
        parser.next_event()


def test_eof_inside_a_frame_is_an_error() -> None:
    parser = FrameParser()
    parser.receive_data(b"SEND\ndestination:/queue/a\n\npartial")
    assert parser.next_event() is NEED_DATA
    parser.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="middle of a frame"):
        parser.next_event()


def test_stomp_1_0_cannot_carry_a_newline_in_a_header() -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(Frame("MESSAGE", (("k", "a\nb"),)), "1.0")


@pytest.mark.parametrize(
    ("text", "size"),
    [("0", 0), ("3", 3), ("003", 3), (" 12\t", 12), ("0" * 17 + "5", 5),
     ("", None), ("1a", None), ("+1", None), ("1 2", None), ("\u0661", None), ("9" * 19, None)],
)  # fmt: skip
def test_content_length_is_ascii_digits_of_a_sane_size(text: str, size: int | None) -> None:
    parser = FrameParser(version="1.2")
    wire = b"SEND\ncontent-length:" + text.encode() + b"\n\n"
    if size is None:
        parser.receive_data(wire + b"\x00")
        with pytest.raises(RemoteProtocolError, match="content-length"):
            parser.next_event()
        return
    parser.receive_data(wire + b"x" * size + b"\x00")
    frame = parser.next_event()
    assert isinstance(frame, Frame) and len(frame.body) == size
