"""Fuzzing the OpenWire codec and converter with hypothesis, sans I/O: valid frames of every
command type the schema knows, made by the Marshaller, then mutated (sizes, type bytes,
booleans, strings of bad modified UTF-8, nested structures of the wrong type, fields out of
range, truncation). Whatever the bytes, the frame reader, ``Marshaller.parse_body``, the
straight readers and ``OpenWireConverter.on_structure`` give a result or raise a
DovecoteError (RemoteProtocolError for bytes that cannot be read): never another exception,
which the transport would take for a bug of the broker's. ``DOVECOTE_LONG=1`` runs the long
form (more examples)."""

from __future__ import annotations

import contextlib
import os
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dovecote.core.errors import DovecoteError, MalformedCommandError, RemoteProtocolError
from dovecote.core.ids import ConnectionId
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
from dovecote.protocol.openwire.ack_frames import AckFrames
from dovecote.protocol.openwire.codec import MAGIC
from dovecote.protocol.openwire.converter import OpenWireConverter
from dovecote.protocol.openwire.primitives import encode_map
from dovecote.protocol.openwire.send_frames import SendFrames

LONG = bool(os.environ.get("DOVECOTE_LONG"))
EXAMPLES = 2000 if LONG else 120
COMMANDS = sorted(t.COMMANDS | {t.WIRE_FORMAT_INFO})
OURS = broker_wire_format(30_000, 10_000, 100 * 1024 * 1024)
MARK = "Mk"  # a string whose bytes are found again in the frame and spoiled

CONN = "ID:fuzz-1"
IDS: dict[str, Structure] = {
    "connection": Structure(t.CONNECTION_ID, {"value": CONN}),
    "session": Structure(t.SESSION_ID, {"connectionId": CONN, "value": 1}),
    "consumer": Structure(t.CONSUMER_ID, {"connectionId": CONN, "sessionId": 1, "value": 1}),
    "producer": Structure(t.PRODUCER_ID, {"connectionId": CONN, "sessionId": 1, "value": 1}),
    "broker": Structure(t.BROKER_ID, {"value": "ID:broker"}),
    "queue": Structure(t.QUEUE, {"physicalName": "fuzz." + MARK}),
    "topic": Structure(t.TOPIC, {"physicalName": "fuzz.topic"}),
    "tx": Structure(t.LOCAL_TRANSACTION_ID, {"value": 7, "connectionId": None}),
}
IDS["tx"].fields["connectionId"] = IDS["connection"]
IDS["message_id"] = Structure(
    t.MESSAGE_ID, {"producerId": IDS["producer"], "producerSequenceId": 3, "brokerSequenceId": 0}
)
NESTED_BY_NAME: dict[str, list[str]] = {
    "producerId": ["producer"],
    "destination": ["queue", "topic"],
    "originalDestination": ["queue"],
    "replyTo": ["queue", "topic"],
    "transactionId": ["tx"],
    "messageId": ["message_id"],
    "firstMessageId": ["message_id"],
    "lastMessageId": ["message_id"],
    "consumerId": ["consumer"],
    "targetConsumerId": ["consumer"],
    "connectionId": ["connection"],
    "sessionId": ["session"],
    "brokerId": ["broker"],
    "objectId": ["connection", "session", "consumer", "producer"],
}
FIXED_RANGES = {
    "bool": st.booleans(),
    "byte": st.integers(-128, 127),
    "short": st.integers(-(2**15), 2**15 - 1),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
}
# A value a field may hold when the frame is spoiled at the structure level: wrong kinds of
# structure where one is nested, and the numbers at the edges of their ranges.
ODD_NUMBERS: dict[str, list[Any]] = {
    "bool": [True],
    "byte": [-128, -80, -1, 0, 7, 127],
    "short": [-(2**15), -1, 2**15 - 1],
    "int": [-(2**31), -1, 0, 2**31 - 1],
    "long": [-(2**63), -1, 2**63 - 1],
}
ODD_STRUCTURES = [IDS[k] for k in ("connection", "consumer", "queue", "message_id", "tx", "broker")]


@st.composite
def valid_structure(draw: st.DrawFn, code: int, version: int = 12) -> Structure:
    """A command of type ``code`` with plausible fields (ids, destinations, properties)."""
    fields: dict[str, Any] = {"commandId": draw(st.integers(0, 2**31 - 1)),
                              "responseRequired": draw(st.booleans())}  # fmt: skip
    for name, kind in t.fields_for(code, version):
        if kind in FIXED_RANGES:
            fields[name] = draw(FIXED_RANGES[kind])
        elif kind == "string":
            fields[name] = draw(st.one_of(st.none(), st.just(MARK), st.text(max_size=12)))
        elif kind == "bytes":
            if code == t.WIRE_FORMAT_INFO:
                fields[name] = encode_map(
                    {"TightEncodingEnabled": draw(st.booleans()), "CacheSize": 0,
                     "MaxInactivityDuration": draw(FIXED_RANGES["long"]), "Name": MARK}
                )  # fmt: skip
            elif name == "marshalledProperties":
                fields[name] = draw(st.sampled_from([None, encode_map({"k": MARK, "n": 3})]))
            else:
                fields[name] = draw(st.one_of(st.none(), st.binary(max_size=40)))
        elif kind == "magic":
            fields[name] = MAGIC
        elif kind in ("nested", "cached"):
            choices = NESTED_BY_NAME.get(name)
            fields[name] = IDS[draw(st.sampled_from(choices))] if choices else None
        elif kind == "array":
            fields[name] = draw(st.sampled_from([None, [], [IDS["broker"], None]]))
        elif kind == "throwable":
            fields[name] = draw(st.sampled_from([None, Throwable("java.lang.Exception", MARK)]))
    if code in t.MESSAGE_TYPES:
        fields["compressed"] = False  # (a compressed body of random bytes is its own case)
    return Structure(code, fields)


def command_frames(version: int = 12) -> st.SearchStrategy[tuple[Structure, bytes]]:
    """(structure, frame body) for every command type, as the Marshaller writes them."""

    def frame(s: Structure) -> tuple[Structure, bytes]:
        return s, Marshaller(version=version).frame(s)[4:]

    return st.sampled_from(COMMANDS).flatmap(lambda c: valid_structure(c, version)).map(frame)


def converter() -> OpenWireConverter:
    return OpenWireConverter(ConnectionId(CONN), "fuzz-broker")


def check(body: bytes, version: int = 12) -> None:
    """What the broker does with one frame's body: read straight, read in full, convert.
    Only DovecoteErrors may come out; bytes the codec cannot read are RemoteProtocolErrors."""
    conv = converter()
    for straight in (AckFrames(conv, version), SendFrames(conv, version)):
        straight.read(body, version)  # a command or None, never an exception
    try:
        structure = Marshaller(version=version).parse_body(body)
    except RemoteProtocolError:
        return
    with contextlib.suppress(DovecoteError):
        if structure.type == t.WIRE_FORMAT_INFO:
            negotiate(OURS, structure)
        else:
            conv.on_structure(structure)


fuzz_settings = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck)
)


@pytest.mark.parametrize("code", COMMANDS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_every_command_type_round_trips(code: int, data: st.DataObject) -> None:
    """The starting point: every command, written by the Marshaller, reads back."""
    s = data.draw(valid_structure(code))
    body = Marshaller().frame(s)[4:]
    assert Marshaller().parse_body(body).type == code


@fuzz_settings
@given(command_frames(), st.data())
def test_mutated_bytes(made: tuple[Structure, bytes], data: st.DataObject) -> None:
    _, body = made
    wire = bytearray(body)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(wire) - 1))
        wire[i] = data.draw(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xC0, 0xFF])) ^ (
            data.draw(st.integers(0, 255)) if data.draw(st.booleans()) else 0
        )
    check(bytes(wire))


@fuzz_settings
@given(command_frames(), st.data())
def test_mutated_sizes(made: tuple[Structure, bytes], data: st.DataObject) -> None:
    """A length (string: 2 bytes, bytes and arrays: 4 or 2) made too long, negative or 0."""
    _, body = made
    wire = bytearray(body)
    width = data.draw(st.sampled_from([2, 4]))
    if len(wire) <= width + 1:
        return
    i = data.draw(st.integers(1, len(wire) - width))
    value = data.draw(st.sampled_from([0, 1, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]))
    wire[i : i + width] = (value & (0xFFFF if width == 2 else 0xFFFFFFFF)).to_bytes(width, "big")
    check(bytes(wire))


@fuzz_settings
@given(st.sampled_from(COMMANDS).flatmap(valid_structure), st.data())
def test_mutated_booleans(structure: Structure, data: st.DataObject) -> None:
    """A boolean field's byte set to something other than 0 or 1 (found by writing the
    frame with the field false and true and comparing)."""
    names = [n for n, kind in t.fields_for(structure.type, 12) if kind == "bool"]
    if structure.type in t.COMMANDS:
        names.append("responseRequired")
    if not names:
        return
    name = data.draw(st.sampled_from(names))
    structure.fields[name] = False
    off = Marshaller().frame(structure)[4:]
    structure.fields[name] = True
    on = bytearray(Marshaller().frame(structure)[4:])
    (at,) = [i for i, (a, b) in enumerate(zip(off, on, strict=True)) if a != b]
    on[at] = data.draw(st.integers(2, 255))
    check(bytes(on))


@fuzz_settings
@given(command_frames(), st.integers(0, 255))
def test_mutated_type_byte(made: tuple[Structure, bytes], code: int) -> None:
    _, body = made
    check(bytes([code]) + body[1:])


@fuzz_settings
@given(command_frames(), st.data())
def test_truncated(made: tuple[Structure, bytes], data: st.DataObject) -> None:
    _, body = made
    check(body[: data.draw(st.integers(1, len(body)))])


BAD_MUTF8 = [b"\xff", b"\xc3(", b"\xe2\x28\xa1", b"\xc0", b"\xed\xa0", b"\x80"]


@fuzz_settings
@given(command_frames(), st.sampled_from(BAD_MUTF8))
def test_bad_modified_utf8_in_strings(made: tuple[Structure, bytes], bad: bytes) -> None:
    """Every string the frame holds as MARK spoiled in place (its length kept)."""
    _, body = made
    mark = MARK.encode()
    spoiled = (bad + b"\xff")[: len(mark)]
    check(body.replace(mark, spoiled))


@fuzz_settings
@given(st.sampled_from(COMMANDS).flatmap(valid_structure), st.data())
def test_wrong_fields(structure: Structure, data: st.DataObject) -> None:
    """Fields holding what they must not (a queue where a message id belongs, a consumer id
    for a destination, an ack type of -80, nulls where ids belong): framed and parsed as
    valid, refused by the converter with a DovecoteError."""
    fields = t.fields_for(structure.type, 12)
    if not fields:
        return
    for _ in range(data.draw(st.integers(1, 3))):
        name, kind = data.draw(st.sampled_from(fields))
        if kind in ODD_NUMBERS:
            structure.fields[name] = data.draw(st.sampled_from(ODD_NUMBERS[kind]))
        elif kind in ("nested", "cached"):
            structure.fields[name] = data.draw(st.sampled_from([None, *ODD_STRUCTURES]))
        else:
            structure.fields[name] = None
    check(Marshaller().frame(structure)[4:])


def test_ack_type_minus_80_is_a_malformed_command() -> None:
    """The case found on a running broker: read whole, then refused by name."""
    ack = Structure(t.MESSAGE_ACK, {
        "commandId": 5, "responseRequired": True, "destination": IDS["queue"],
        "consumerId": IDS["consumer"], "ackType": -80, "lastMessageId": IDS["message_id"],
        "messageCount": 1,
    })  # fmt: skip
    body = Marshaller().frame(ack)[4:]
    assert AckFrames(converter()).read(body, 12) is None
    with pytest.raises(MalformedCommandError, match="MessageAck"):
        converter().on_structure(Marshaller().parse_body(body))


@fuzz_settings
@given(st.lists(command_frames(), min_size=1, max_size=4), st.data())
def test_frame_stream_with_mutated_size_prefixes(
    made: list[tuple[Structure, bytes]], data: st.DataObject
) -> None:
    """The size prefix itself spoiled, the stream fed in random chunks: frames, NEED_DATA
    or a RemoteProtocolError, and never more buffered than the cap allows."""
    limit = 4096
    wire = bytearray()
    for _, body in made:
        wire += struct.pack(">i", len(body)) + body
    i = data.draw(st.sampled_from([0, *range(0, len(wire), 4)]))
    wire[i : i + 4] = struct.pack(
        ">i", data.draw(st.sampled_from([-1, 0, 1, 5, limit + 1, 2**31 - 1]))
    )
    reader = FrameReader(limit)
    pos = 0
    try:
        while pos < len(wire):
            size = data.draw(st.integers(1, 300))
            reader.receive_data(bytes(wire[pos : pos + size]))
            pos += size
            while (frame := reader.next_frame()) is not NEED_DATA:
                assert isinstance(frame, bytes)
                check(frame)
    except RemoteProtocolError:
        return


@pytest.mark.slow
@pytest.mark.skipif(not LONG, reason="long form: DOVECOTE_LONG=1")
@settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(9, 12).flatmap(lambda v: st.tuples(st.just(v), command_frames(v))), st.data())
def test_mutated_bytes_every_version(made: tuple[int, tuple[Structure, bytes]],
                                     data: st.DataObject) -> None:  # fmt: skip
    version, (_, body) = made
    wire = bytearray(body)
    for _ in range(data.draw(st.integers(1, 8))):
        wire[data.draw(st.integers(0, len(wire) - 1))] = data.draw(st.integers(0, 255))
    check(bytes(wire[: data.draw(st.integers(1, len(wire)))]), version)
