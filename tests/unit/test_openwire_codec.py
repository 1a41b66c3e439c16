"""The OpenWire codec driven with bytes: modified UTF-8, primitive maps and bodies, every
v12 structure round-tripped from its field table, byte layouts checked against the
reference, negotiation, and malformed input."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dovecote.core.errors import FrameTooLargeError, RemoteProtocolError
from dovecote.protocol.openwire import (
    NEED_DATA,
    FrameReader,
    Marshaller,
    Structure,
    Throwable,
    broker_wire_format,
    negotiate,
)
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.mutf8 import decode_mutf8, encode_mutf8
from dovecote.protocol.openwire.primitives import (
    JavaByte,
    JavaChar,
    JavaFloat,
    JavaInt,
    JavaShort,
    decode_map,
    decode_stream_body,
    decode_text_body,
    encode_map,
    encode_stream_body,
    encode_text_body,
)
from dovecote.protocol.openwire.schema import COMMANDS, SCHEMAS

MUTF8 = [
    ("", b""),
    ("abc", b"abc"),
    ("\x00", b"\xc0\x80"),
    ("\u00e9", b"\xc3\xa9"),
    ("\u20ac", b"\xe2\x82\xac"),
    ("\U0001f600", b"\xed\xa0\xbd\xed\xb8\x80"),  # two 3-byte surrogates, not 4 bytes
]


@pytest.mark.parametrize(("text", "data"), MUTF8)
def test_modified_utf8(text: str, data: bytes) -> None:
    assert encode_mutf8(text) == data
    assert decode_mutf8(data) == text


def test_primitive_map_bytes_and_types_round_trip() -> None:
    assert encode_map({"a": True}) == b"\x00\x00\x00\x01\x00\x01a\x01\x01"
    values: dict[str, object] = {
        "bool": False, "byte": JavaByte(-3), "short": JavaShort(300), "int": JavaInt(70000),
        "long": 2**40, "float": JavaFloat(1.5), "double": 2.25, "char": JavaChar("x"),
        "str": "hello", "big": "y" * 9000, "bytes": b"\x00\x01", "null": None,
        "map": {"k": JavaInt(1)}, "list": [JavaInt(1), "two", None],
    }  # fmt: skip
    decoded = decode_map(encode_map(values))
    assert decoded == values
    assert all(type(decoded[k]) is type(v) for k, v in values.items())


def test_text_and_stream_bodies() -> None:
    assert encode_text_body("hi") == b"\x00\x00\x00\x02hi"
    assert decode_text_body(b"\x00\x00\x00\x02hi") == "hi"
    assert decode_text_body(b"\xff\xff\xff\xff") == ""
    values: list[object] = [True, JavaInt(5), "s", b"\x07", 1.5]
    assert decode_stream_body(encode_stream_body(values)) == values


def sample(kind: str, depth: int = 0) -> Any:
    match kind:
        case "bool":
            return True
        case "byte":
            return 7
        case "short":
            return 300
        case "int":
            return 123456
        case "long":
            return 2**40 + 5
        case "string":
            return "s\u00e9"
        case "bytes":
            return b"\x00\x01\x02"
        case "magic":
            return b"ActiveMQ"
        case "nested" | "cached":
            return Structure(120, {"value": "ID:conn-1"}) if depth < 2 else None
        case "array":
            return [Structure(124, {"value": "broker-1"})]
        case "throwable":
            return Throwable("javax.jms.JMSException", "boom")
    raise AssertionError(kind)


@pytest.mark.parametrize("type_code", sorted(SCHEMAS))
def test_every_structure_round_trips(type_code: int) -> None:
    fields = {f[0]: sample(f[1]) for f in SCHEMAS[type_code]}
    if type_code in COMMANDS:
        fields |= {"commandId": 42, "responseRequired": True}
    structure = Structure(type_code, fields)
    frame = Marshaller().frame(structure)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    reader = FrameReader()
    reader.receive_data(frame)
    body = reader.next_frame()
    assert isinstance(body, bytes)
    assert Marshaller().parse_body(body) == structure


def test_response_bytes_match_the_reference_layout() -> None:
    frame = Marshaller().frame(Structure(30, {"commandId": 5, "correlationId": 3}))
    assert frame == bytes.fromhex("0000000a1e000000050000000003")


def test_consumer_and_producer_id_field_orders_differ() -> None:
    m = Marshaller()
    consumer = m.frame(Structure(122, {"connectionId": "c", "sessionId": 1, "value": 2}))
    producer = m.frame(Structure(123, {"connectionId": "c", "value": 2, "sessionId": 1}))
    tail = bytes.fromhex("01000163")  # notNull, length 1, "c"
    assert consumer[5:] == tail + (1).to_bytes(8, "big") + (2).to_bytes(8, "big")
    assert producer[5:] == tail + (2).to_bytes(8, "big") + (1).to_bytes(8, "big")


def test_throwable_with_stack_traces_when_negotiated() -> None:
    t = Throwable("java.lang.Exception", "x", [("A", "m", "A.java", 3)], Throwable("B", "c"))
    structure = Structure(
        31, {"commandId": 1, "responseRequired": False, "correlationId": 9, "exception": t}
    )
    with_traces = Marshaller(stack_traces=True)
    assert with_traces.parse_body(with_traces.frame(structure)[4:]) == structure
    plain = Marshaller()
    assert plain.parse_body(plain.frame(structure)[4:])["exception"] == Throwable(
        "java.lang.Exception", "x"
    )


def test_broker_wire_format_info_layout() -> None:
    frame = Marshaller().frame(broker_wire_format(30000, 10000, 1 << 20))
    assert frame[4:5] == b"\x01" and frame[5:13] == b"ActiveMQ"
    assert frame[13:17] == (12).to_bytes(4, "big") and frame[17:18] == b"\x01"
    options = decode_map(frame[22:])
    assert options["TightEncodingEnabled"] is False
    assert type(options["MaxInactivityDuration"]) is int  # a Java long (tag 6)
    assert type(options["CacheSize"]) is JavaInt


def client_wfi(version: int = 12, **options: object) -> Structure:
    props: dict[str, object] = {
        "TightEncodingEnabled": True, "CacheEnabled": True, "StackTraceEnabled": True,
        "SizePrefixDisabled": False, "MaxInactivityDuration": 30000,
        "MaxInactivityDurationInitalDelay": 10000, "CacheSize": JavaInt(1024),
    }  # fmt: skip
    props |= options
    return Structure(1, {"magic": b"ActiveMQ", "version": version,
                         "marshalledProperties": encode_map(props)})  # fmt: skip


def test_negotiation_turns_tight_encoding_and_cache_off() -> None:
    result = negotiate(broker_wire_format(5000, 1000, 1 << 20), client_wfi())
    assert (result.version, result.tight, result.cache, result.stack_traces) == (
        12,
        False,
        False,
        False,
    )
    assert (result.max_inactivity_ms, result.initial_delay_ms) == (5000, 1000)
    assert not result.size_prefix_disabled


def test_negotiation_refuses_versions_before_9() -> None:
    with pytest.raises(RemoteProtocolError, match="version 8"):
        negotiate(broker_wire_format(0, 0, 0), client_wfi(version=8))


def test_older_clients_get_their_version_and_layouts() -> None:
    assert negotiate(broker_wire_format(0, 0, 0), client_wfi(version=9)).version == 9
    fields = {"textView": "ID:x:1:1:1", "producerSequenceId": 5, "brokerSequenceId": 0}
    v9, v12 = Marshaller(version=9), Marshaller(version=12)
    message_id = Structure(110, fields)
    # v9 has no textView: one string field less on the wire.
    assert len(v12.frame(message_id)) - len(v9.frame(message_id)) == len(b"\x01\x00\x0aID:x:1:1:1")
    decoded = v9.parse_body(v9.frame(message_id)[4:])
    assert "textView" not in decoded.fields and decoded["producerSequenceId"] == 5
    text = Structure(28, {"commandId": 1, "destination": Structure(100, {"physicalName": "q"})})
    assert v9.parse_body(v9.frame(text)[4:])["destination"]["physicalName"] == "q"


BAD_FRAMES = [
    (bytes.fromhex("00000000"), "size"),
    (bytes.fromhex("00000001") + b"\x63", "unknown"),
    (bytes.fromhex("00000002") + b"\x1e\x00", "past the end"),
    (bytes.fromhex("0000000b") + b"\x1e" + bytes(9) + b"\x00", "past its fields"),
    (bytes.fromhex("0000000d") + b"\x01" + b"NotMagic" + bytes(4), "magic"),
]


@pytest.mark.parametrize(("data", "words"), BAD_FRAMES)
def test_malformed_frames_are_protocol_errors(data: bytes, words: str) -> None:
    reader = FrameReader()
    reader.receive_data(data)
    with pytest.raises(RemoteProtocolError, match=words):
        body = reader.next_frame()
        assert isinstance(body, bytes)
        Marshaller().parse_body(body)


def test_frame_reader_caps_size_and_waits_for_whole_frames() -> None:
    reader = FrameReader(max_frame_size=100)
    reader.receive_data(bytes.fromhex("00000005") + b"\x1e")
    assert reader.next_frame() is NEED_DATA
    big = FrameReader(max_frame_size=100)
    big.receive_data(bytes.fromhex("00001000"))
    with pytest.raises(FrameTooLargeError):
        big.next_frame()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=12),
    st.lists(st.integers(min_value=1, max_value=90), min_size=1, max_size=40),
)
def test_frame_reader_gives_the_frames_however_the_stream_is_cut(
    bodies: list[bytes], cuts: list[int]
) -> None:
    """Frames come out whole and in order, whatever the chunks the bytes arrive in (frames
    that end inside a chunk, a chunk that ends inside a size prefix, one byte at a time, a
    frame over many chunks)."""
    stream = b"".join(len(body).to_bytes(4, "big") + body for body in bodies)
    reader = FrameReader()
    got: list[bytes] = []
    pos = 0
    for cut in cuts * (len(stream) // sum(cuts) + 1):
        reader.receive_data(stream[pos : pos + cut])
        pos += cut
        while (frame := reader.next_frame()) is not NEED_DATA:
            assert isinstance(frame, bytes)
            got.append(frame)
        if pos >= len(stream):
            break
    assert got == bodies
    assert reader.next_frame() is NEED_DATA


def test_a_large_frame_over_many_chunks_comes_out_whole_with_the_frames_around_it() -> None:
    big = bytes(range(256)) * 4096  # 1 MiB
    stream = b"".join(len(b).to_bytes(4, "big") + b for b in (b"\x1ebefore", big, b"\x1eafter"))
    reader = FrameReader()
    got: list[bytes] = []
    for pos in range(0, len(stream), 1000):
        reader.receive_data(stream[pos : pos + 1000])
        while (frame := reader.next_frame()) is not NEED_DATA:
            assert isinstance(frame, bytes)
            got.append(frame)
    assert got == [b"\x1ebefore", big, b"\x1eafter"]


def test_the_reader_says_how_much_of_a_large_frame_is_still_to_come() -> None:
    """What the client's reader asks the socket for (the rest of a large frame in one call,
    not 8 KiB at a time): the bytes the frame in progress lacks, none between frames."""
    big = bytes(range(256)) * 4096  # 1 MiB
    stream = len(big).to_bytes(4, "big") + big + (6).to_bytes(4, "big") + b"\x1eafter"
    reader = FrameReader()
    assert reader.wanted == 0
    reader.receive_data(stream[:8192])
    assert reader.next_frame() is NEED_DATA
    assert reader.wanted == 4 + len(big) - 8192
    reader.receive_data(stream[8192:100_000])
    assert reader.next_frame() is NEED_DATA
    assert reader.wanted == 4 + len(big) - 100_000
    reader.receive_data(stream[100_000 : 4 + len(big)])
    assert reader.wanted == 0
    assert reader.next_frame() == big
    reader.receive_data(stream[4 + len(big) :])
    assert (reader.next_frame(), reader.wanted) == (b"\x1eafter", 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=300))
def test_random_bodies_give_structures_or_protocol_errors(body: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        Marshaller().parse_body(body)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(SCHEMAS)), st.data())
def test_mutated_valid_frames_give_structures_or_protocol_errors(
    code: int, data: st.DataObject
) -> None:
    fields = {f[0]: sample(f[1]) for f in SCHEMAS[code]}
    body = bytearray(Marshaller().frame(Structure(code, fields))[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(RemoteProtocolError):
        Marshaller().parse_body(bytes(body))


def test_ids_read_from_the_cache_are_fresh_copies() -> None:
    """Ids and destinations are read once and then found by their bytes: whoever gets one
    may change it without changing the next message's."""
    marshaller = Marshaller()
    producer = Structure(t.PRODUCER_ID, {"connectionId": "ID:c-1", "value": 1, "sessionId": 2})
    frame = marshaller.frame(Structure(t.PRODUCER_INFO, {"commandId": 1, "producerId": producer}))
    first = marshaller.parse_body(frame[4:])
    first["producerId"].fields["value"] = 99
    second = marshaller.parse_body(frame[4:])
    assert second["producerId"].fields == {"connectionId": "ID:c-1", "value": 1, "sessionId": 2}


def test_ids_written_from_the_cache_keep_their_field_names() -> None:
    """The same numbers under other names (or in another order) are another id."""
    marshaller = Marshaller()
    written = [
        {"connectionId": "ID:c-1", "value": 1, "sessionId": 2},
        {"connectionId": "ID:c-1", "sessionId": 1, "value": 2},
        {"sessionId": 2, "value": 1, "connectionId": "ID:c-1"},
    ]
    for fields in written:
        producer = Structure(t.PRODUCER_ID, fields)
        info = Structure(t.PRODUCER_INFO, {"commandId": 1, "producerId": producer})
        read = marshaller.parse_body(marshaller.frame(info)[4:])["producerId"]
        assert read.fields == fields
