"""A raw OpenWire load: a pipelined producer and a consumer on bare sockets, so that an
OpenWire row measures the brokers and not the client (ActiveMQ's Java tools spend more CPU
per message than either broker). Both speak OpenWire 12, loose encoding, no marshal cache:
what a client offering no more gets from either broker.

Frames are encoded once with dovecote's marshaller. The producer patches each copy of its
message frame where the producer sequence (unique message ids: ActiveMQ drops a repeated
one as a duplicate) and the timestamp sit, found by encoding two messages that differ in
those only. The consumer counts MessageDispatch frames as they come and parses only the
first and last of each range it acknowledges (a standard ack every ACK_EVERY messages).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dovecote.client.options import WireFormatOptions
from dovecote.client.transport import client_wire_format
from dovecote.protocol.openwire import FrameReader, Marshaller, Structure
from dovecote.protocol.openwire import schema as t

PIPELINE = 200
"""Message frames written with one sendall."""
PREFETCH = 1000
ACK_EVERY = PREFETCH // 4
"""A standard ack per this many messages. ActiveMQ stopped dispatching (prefetch 1000,
61-79k messages in) when they came every 500; the Java client acks well inside its window
too."""
STANDARD_ACK = 2
_LONG = struct.Struct(">q")


@dataclass
class _Ids:
    connection: Structure
    session: Structure
    producer: Structure
    consumer: Structure

    @classmethod
    def of(cls, name: str) -> _Ids:
        return cls(
            Structure(t.CONNECTION_ID, {"value": name}),
            Structure(t.SESSION_ID, {"connectionId": name, "value": 1}),
            Structure(t.PRODUCER_ID, {"connectionId": name, "value": 1, "sessionId": 1}),
            Structure(t.CONSUMER_ID, {"connectionId": name, "sessionId": 1, "value": 1}),
        )


class _Peer:
    """One connection: the handshake, and requests answered by a Response."""

    def __init__(self, port: int, name: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.marshaller = Marshaller()
        self.reader = FrameReader()
        self.ids = _Ids.of(name)
        self.command_id = 0
        # Loose, no cache, no inactivity checks: the client's own offer, without keep-alives.
        quiet = WireFormatOptions(maxInactivityDuration=0, maxInactivityDurationInitalDelay=0)
        self.sock.sendall(self.marshaller.frame(client_wire_format(quiet)))
        self.request(t.CONNECTION_INFO, {"connectionId": self.ids.connection, "clientId": name})
        self.request(t.SESSION_INFO, {"sessionId": self.ids.session})

    def next_id(self) -> int:
        self.command_id += 1
        return self.command_id

    def request(self, kind: int, fields: dict[str, Any]) -> None:
        command_id = self.next_id()
        fields = {**fields, "commandId": command_id, "responseRequired": True}
        self.sock.sendall(self.marshaller.frame(Structure(kind, fields)))
        while True:
            for frame in self.frames():
                reply = self.marshaller.parse_body(frame)
                if reply.type == t.EXCEPTION_RESPONSE and reply["correlationId"] == command_id:
                    raise ConnectionError(f"refused: {reply['exception']}")
                if reply.type == t.RESPONSE and reply["correlationId"] == command_id:
                    return

    def frames(self) -> list[bytes]:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError(
                f"the broker closed the connection ({self.command_id} commands sent)"
            )
        self.reader.receive_data(data)
        got = []
        while isinstance(frame := self.reader.next_frame(), bytes):
            got.append(frame)
        return got


def message_frames(
    marshaller: Marshaller, ids: _Ids, destination: Structure, size: int, sync: bool = False
) -> Callable[[int, int], bytes]:
    """A function of (sequence, timestamp ms) to the frame of one message, made by patching
    one encoded frame: non-persistent, or with ``sync`` persistent and asking for a response
    (to command id 1: a synchronous sender has one request out at a time)."""

    def encoded(sequence: int, timestamp: int) -> bytes:
        message_id = Structure(
            t.MESSAGE_ID, {"producerId": ids.producer, "producerSequenceId": sequence}
        )
        return marshaller.frame(Structure(t.BYTES_MESSAGE, {
            "commandId": 1, "responseRequired": sync, "producerId": ids.producer,
            "destination": destination, "messageId": message_id, "persistent": sync,
            "priority": 4, "timestamp": timestamp, "content": b"x" * size,
        }))  # fmt: skip

    # Markers with no repeated byte: one of 0x01s matched a byte early, after a 0x01 flag.
    base = encoded(0x1122334455667788, 0x2132435465768798)
    where_sequence = base.index(_LONG.pack(0x1122334455667788))
    where_time = base.index(_LONG.pack(0x2132435465768798))
    template = bytearray(base)

    def frame(sequence: int, timestamp: int) -> bytes:
        _LONG.pack_into(template, where_sequence, sequence)
        _LONG.pack_into(template, where_time, timestamp)
        return bytes(template)

    assert frame(7, 9) == encoded(7, 9)  # the two offsets are all that differ
    return frame


def produce(port: int, queue: str, count: int, size: int, start: Any) -> float:
    """Send ``count`` non-persistent messages pipelined; the time the broker confirmed it
    had them all (a last request answered after them)."""
    peer = _Peer(port, f"ID:owload-p-{time.monotonic_ns()}")
    destination = Structure(t.QUEUE, {"physicalName": queue})
    peer.request(t.PRODUCER_INFO, {"producerId": peer.ids.producer, "destination": destination})
    frame = message_frames(peer.marshaller, peer.ids, destination, size)
    start.wait()
    sent = 0
    while sent < count:
        n = min(PIPELINE, count - sent)
        now = time.time_ns() // 1_000_000
        peer.sock.sendall(b"".join([frame(sent + i + 1, now) for i in range(n)]))
        sent += n
    peer.request(t.REMOVE_INFO, {"objectId": peer.ids.producer})
    finished = time.monotonic()
    peer.sock.close()
    return finished


def produce_sync(port: int, queue: str, count: int, size: int, start: Any) -> SyncResult:
    """Send ``count`` persistent messages one at a time, each waiting for its Response (a
    JMS producer's synchronous persistent send): when the last was answered, and each
    round trip."""
    peer = _Peer(port, f"ID:owload-s-{time.monotonic_ns()}")
    destination = Structure(t.QUEUE, {"physicalName": queue})
    peer.request(t.PRODUCER_INFO, {"producerId": peer.ids.producer, "destination": destination})
    frame = message_frames(peer.marshaller, peer.ids, destination, size, sync=True)
    latencies: list[int] = []
    start.wait()
    for sequence in range(1, count + 1):
        sent_ns = time.monotonic_ns()
        peer.sock.sendall(frame(sequence, time.time_ns() // 1_000_000))
        while not _answered(peer):
            pass
        latencies.append(time.monotonic_ns() - sent_ns)
    finished = time.monotonic()
    peer.sock.close()
    return SyncResult(count, finished, latencies)


@dataclass
class SyncResult:
    """As loadgen's producer result: what the sync_send.py measure reads."""

    sent: int
    finished: float
    latencies_ns: list[int]


def _answered(peer: _Peer) -> bool:
    """Whether the frames read now hold the Response to the one request out."""
    for reply in peer.frames():
        if reply[0] == t.EXCEPTION_RESPONSE:
            raise ConnectionError("a synchronous send was refused")
        if reply[0] == t.RESPONSE:
            return True
    return False


def consume(port: int, queue: str, count: int, ready: Any) -> tuple[int, float, list[int]]:
    """Receive ``count`` messages (a standard ack every ACK_EVERY); the count
    received, when the last came, and latencies in ns (ms resolution: the message's own
    timestamp) of the last message of each read."""
    peer = _Peer(port, f"ID:owload-c-{time.monotonic_ns()}")
    destination = Structure(t.QUEUE, {"physicalName": queue})
    peer.request(t.CONSUMER_INFO, {
        "consumerId": peer.ids.consumer, "destination": destination, "prefetchSize": PREFETCH,
        "dispatchAsync": True,
    })  # fmt: skip
    ready.set()
    received = 0
    latencies: list[int] = []
    first: bytes | None = None
    unacked = 0
    last = time.monotonic()
    while received < count:
        frames = []
        try:
            got = peer.frames()
        except ConnectionError as exc:
            raise ConnectionError(f"{exc} after {received} messages") from None
        for frame in got:
            if frame[0] == t.MESSAGE_DISPATCH:
                frames.append(frame)
            elif frame[0] == t.CONNECTION_ERROR:
                raise ConnectionError(f"the broker: {peer.marshaller.parse_body(frame)}")
        if not frames:
            continue
        last = time.monotonic()
        received += len(frames)
        stamp = peer.marshaller.parse_body(frames[-1])["message"]["timestamp"]
        latencies.append(time.time_ns() - stamp * 1_000_000)
        for frame in frames:
            if first is None:
                first = frame
            unacked += 1
            if unacked >= ACK_EVERY or (received == count and frame is frames[-1]):
                _ack(peer, destination, first, frame, unacked)
                first, unacked = None, 0
    peer.sock.close()
    return received, last, latencies


def _ack(peer: _Peer, destination: Structure, first: bytes, last: bytes, count: int) -> None:
    parse = peer.marshaller.parse_body
    ack = Structure(t.MESSAGE_ACK, {
        "commandId": peer.next_id(), "destination": destination,
        "consumerId": peer.ids.consumer, "ackType": STANDARD_ACK,
        "firstMessageId": parse(first)["message"]["messageId"],
        "lastMessageId": parse(last)["message"]["messageId"], "messageCount": count,
    })  # fmt: skip
    peer.sock.sendall(peer.marshaller.frame(ack))
