"""Units of the replicated store: the wire codec (stream.py), the ``sync`` option, and the
history that says whether a returning store can take the stream or needs a copy."""

from __future__ import annotations

import struct

import msgpack
import pytest

from dovecote.store.replicated.history import can_stream, epoch_at, pack_history, read_history
from dovecote.store.replicated.settings import DISK, MEM, SyncPolicy, host_port, parse_sync
from dovecote.store.replicated.stream import (
    HEADER,
    MAX_FRAME,
    Ack,
    Chunk,
    Heartbeat,
    Hello,
    Message,
    ProtocolError,
    Record,
    Refuse,
    Snapshot,
    SnapshotEnd,
    Welcome,
    decode,
    decode_frame,
    encode,
    frame_length,
)

EVERY_MESSAGE: list[Message] = [
    Hello(1, "broker-a", 2**64 - 1, 42),
    Welcome(1, "broker-b", 7, 43, "stream"),
    Welcome(1, "broker-b", 7, 43, "snapshot"),
    Refuse("broker-b is not master"),
    Record(44, 7, True, [(b"q\x00\xff", b"value"), (b"i-gone", None)]),
    Record(45, 7, False, []),
    Snapshot(44, 7),
    Chunk([(b"k1", b"v1"), (b"k2", b"")]),
    Chunk([]),
    SnapshotEnd(44),
    Ack(44, 40),
    Heartbeat(),
]


@pytest.mark.parametrize("message", EVERY_MESSAGE, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: Message) -> None:
    frame = encode(message)
    length, _ = frame_length(frame[: HEADER.size])
    assert length == len(frame) - HEADER.size
    assert decode_frame(frame) == message


def test_frames_are_length_type_then_msgpack() -> None:
    frame = encode(Ack(5, 3))
    assert frame[:5] == struct.pack(">IB", len(frame) - 4, 8)
    assert msgpack.unpackb(frame[5:]) == [5, 3]


@pytest.mark.parametrize(
    ("kind", "body", "error"),
    [
        (99, [], "unknown frame type 99"),
        (1, [1, "n", 0], "HELLO frame is not a list of 4"),
        (1, [1, 5, 0, 0], "5 is not a string"),
        (1, [1, "n", -1, 0], "-1 is not an unsigned integer"),
        (1, [1, "n", True, 0], "True is not an unsigned integer"),
        (2, [1, "n", 0, 0, "sideways"], "mode 'sideways'"),
        (4, [1, 1, "yes", []], "disk flag is not a boolean"),
        (4, [1, 1, True, [["k"]]], "not a \\[key, value\\] pair"),
        (4, [1, 1, True, [["k", b"v"]]], "'k' is not bytes"),
        (4, [1, 1, True, {}], "changes are not a list"),
        (6, [[b"k", None]], "None is not bytes"),
        (9, [1], "HEARTBEAT frame is not a list of 0"),
    ],
)
def test_frames_that_are_not_the_protocol_are_errors(kind: int, body: object, error: str) -> None:
    with pytest.raises(ProtocolError, match=error):
        decode(kind, msgpack.packb(body, use_bin_type=True))


def test_bytes_that_are_not_msgpack_and_bad_lengths_are_errors() -> None:
    with pytest.raises(ProtocolError, match="not msgpack"):
        decode(8, b"\xc1")
    with pytest.raises(ProtocolError, match="at most"):
        frame_length(HEADER.pack(MAX_FRAME + 1, 4))
    with pytest.raises(ProtocolError, match="a frame of 0 bytes"):
        frame_length(HEADER.pack(0, 4))
    with pytest.raises(ProtocolError, match="body bytes"):
        decode_frame(encode(Ack(1, 1)) + b"x")


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        ("quorum_mem", SyncPolicy(MEM, MEM)),
        ("quorum_disk", SyncPolicy(DISK, DISK)),
        ("local_disk", SyncPolicy(DISK, 0)),
        ("local_mem", SyncPolicy(MEM, 0)),
        ("remote_mem", SyncPolicy(MEM, MEM)),
        ("local_disk, remote_mem", SyncPolicy(DISK, MEM)),
        ("local_mem,local_disk", SyncPolicy(DISK, 0)),
        ("quorum_mem,remote_disk", SyncPolicy(MEM, DISK)),
    ],
)
def test_sync_as_activemq_reads_it(text: str, policy: SyncPolicy) -> None:
    assert parse_sync(text) == policy


def test_an_unknown_sync_names_it() -> None:
    with pytest.raises(ValueError, match="sync 'quorum_memory' is not one of"):
        parse_sync("local_disk,quorum_memory")


def test_bind_addresses() -> None:
    assert host_port("tcp://127.0.0.1:61619") == ("127.0.0.1", 61619)
    assert host_port("localhost:0") == ("localhost", 0)
    assert host_port("tcp://[::1]:5") == ("::1", 5)
    with pytest.raises(ValueError, match="is not tcp://host:port"):
        host_port("tcp://nowhere")


def test_the_history_says_which_epoch_wrote_a_position() -> None:
    history = [(11, 1), (22, 101), (33, 151)]
    stored = {b"mhist": pack_history(history)}
    assert read_history(stored.get) == history
    assert [epoch_at(history, p) for p in (0, 1, 100, 101, 150, 151, 999)] == [
        0, 11, 11, 22, 22, 33, 33,
    ]  # fmt: skip
    # A store that holds the same (epoch, position) takes the stream after it...
    assert can_stream(history, 160, 22, 120)
    assert can_stream(history, 160, 33, 160)
    # ...one whose last group another epoch wrote (an old master's groups nobody got), one
    # ahead of the master, one with nothing, needs a copy.
    assert not can_stream(history, 160, 22, 155)
    assert not can_stream(history, 160, 33, 161)
    assert not can_stream(history, 160, 0, 0)
    # A master elected at 160 whose first group is not written yet: its slaves at 160 match.
    assert can_stream([*history, (44, 161)], 160, 33, 160)
