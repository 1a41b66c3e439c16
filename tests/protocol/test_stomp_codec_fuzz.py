"""Fuzzing the STOMP parser with hypothesis: random, truncated, mutated and oversized input
in random chunk sizes yields frames, heart-beats or NEED_DATA, or raises the project's
RemoteProtocolError; never another exception, never a hang, never unbounded buffering."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dovecote.core.errors import RemoteProtocolError
from dovecote.protocol.stomp import HEARTBEAT, NEED_DATA, Frame, FrameParser, encode_frame

MAX_FRAME = 4096
MAX_HEADER = 1024
# CONNECT is left out: its headers are never escaped, so not every text can travel in it.
COMMANDS = ["SEND", "SUBSCRIBE", "ACK", "MESSAGE", "BEGIN", "ERROR"]

header_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
frames = st.builds(
    Frame,
    command=st.sampled_from(COMMANDS),
    headers=st.lists(
        st.tuples(header_text.filter(lambda n: n and n != "content-length"), header_text),
        max_size=6,
    ).map(tuple),
    body=st.binary(max_size=300),
)


def feed(data: bytes, chunks: list[int]) -> list[object]:
    """Feed ``data`` in the given chunk sizes; return the events; errors propagate."""
    parser = FrameParser(max_frame_size=MAX_FRAME, max_header_size=MAX_HEADER, version="1.2")
    events: list[object] = []
    pos = 0
    sizes = iter(chunks)
    while pos < len(data):
        size = max(1, next(sizes, 64))
        parser.receive_data(data[pos : pos + size])
        pos += size
        # Each event consumes input, so the number of events is bounded by the bytes fed.
        for _ in range(size + 2):
            event = parser.next_event()
            if event is NEED_DATA:
                break
            events.append(event)
        else:
            raise AssertionError("parser produced more events than bytes: a loop")
        assert parser.buffered <= MAX_FRAME + size
    return events


def fuzz(data: bytes, chunks: list[int]) -> None:
    try:
        events = feed(data, chunks)
    except RemoteProtocolError:
        return
    assert all(e is HEARTBEAT or isinstance(e, Frame) for e in events)


chunk_sizes = st.lists(st.integers(1, 200), max_size=50)
fuzz_settings = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@fuzz_settings
@given(st.binary(max_size=2000), chunk_sizes)
def test_random_bytes(data: bytes, chunks: list[int]) -> None:
    fuzz(data, chunks)


@fuzz_settings
@given(st.lists(frames, min_size=1, max_size=4), st.data(), chunk_sizes)
def test_truncated_frames(batch: list[Frame], data: st.DataObject, chunks: list[int]) -> None:
    wire = b"".join(encode_frame(f) for f in batch)
    cut = data.draw(st.integers(0, len(wire)))
    fuzz(wire[:cut], chunks)


@fuzz_settings
@given(st.lists(frames, min_size=1, max_size=4), st.data(), chunk_sizes)
def test_mutated_frames(batch: list[Frame], data: st.DataObject, chunks: list[int]) -> None:
    wire = bytearray(b"".join(encode_frame(f) for f in batch))
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(wire) - 1))
        wire[i] = data.draw(
            st.sampled_from([0, 10, 13, 58, 92, 255, data.draw(st.integers(0, 255))])
        )
    fuzz(bytes(wire), chunks)


@fuzz_settings
@given(st.integers(MAX_FRAME, 4 * MAX_FRAME), st.booleans(), chunk_sizes)
def test_oversized_frames_are_refused(size: int, with_length: bool, chunks: list[int]) -> None:
    headers = (("content-length", str(size)),) if with_length else ()
    wire = encode_frame(Frame("SEND", headers, b"x" * size))
    try:
        feed(wire, chunks)
    except RemoteProtocolError:
        return
    raise AssertionError("an oversized frame was accepted")


@fuzz_settings
@given(st.lists(frames, min_size=1, max_size=5), chunk_sizes)
def test_encode_then_parse_is_identity(batch: list[Frame], chunks: list[int]) -> None:
    wire = b"".join(encode_frame(f) for f in batch)
    parsed = [e for e in feed(wire, chunks) if e is not HEARTBEAT]
    expected = []
    for f in batch:
        # The encoder adds a content-length to every body (a MESSAGE's, where it holds a NUL).
        headers = f.headers
        if f.body and (f.command != "MESSAGE" or b"\x00" in f.body):
            headers = (*headers, ("content-length", str(len(f.body))))
        expected.append(Frame(f.command, headers, f.body))
    assert parsed == expected
