"""OpenWire over a real socket without the Java client: what the broker says first, the
keep-alives it sends, and the silent peer it drops (SPEC P3)."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from brokers import running_broker
from dovecote.protocol.openwire import FrameReader, Marshaller, Structure, negotiate
from dovecote.protocol.openwire.primitives import JavaInt, encode_map
from dovecote.protocol.openwire.schema import BROKER_INFO, KEEP_ALIVE_INFO, WIRE_FORMAT_INFO


def client_wfi(inactivity_ms: int) -> Structure:
    options = {
        "TightEncodingEnabled": True, "CacheEnabled": True, "SizePrefixDisabled": False,
        "StackTraceEnabled": True, "MaxInactivityDuration": inactivity_ms,
        "MaxInactivityDurationInitalDelay": 0, "CacheSize": JavaInt(1024),
    }  # fmt: skip
    return Structure(WIRE_FORMAT_INFO, {"magic": b"ActiveMQ", "version": 12,
                                        "marshalledProperties": encode_map(options)})  # fmt: skip


def read_structures(sock: socket.socket, reader: FrameReader, until: float) -> list[Structure]:
    got: list[Structure] = []
    sock.settimeout(0.1)
    while time.monotonic() < until:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if not data:
            break
        reader.receive_data(data)
        while isinstance(frame := reader.next_frame(), bytes):
            got.append(Marshaller().parse_body(frame))
    return got


def test_broker_speaks_first_negotiates_loose_keeps_alive_and_drops_the_silent(
    tmp_path: Path,
) -> None:
    with running_broker(workdir=tmp_path) as broker:
        sock = socket.create_connection(("127.0.0.1", broker.openwire_port), timeout=10)
        reader = FrameReader()
        first = read_structures(sock, reader, time.monotonic() + 1)
        assert [s.type for s in first[:2]] == [WIRE_FORMAT_INFO, BROKER_INFO]
        # The broker offers loose encoding: whatever a client offers, the AND is loose.
        ours = first[0]
        assert not negotiate(ours, client_wfi(30000)).tight
        sock.sendall(Marshaller().frame(client_wfi(600)))
        started = time.monotonic()
        later = read_structures(sock, reader, started + 10)
        dropped_after = time.monotonic() - started
        # KeepAliveInfo every third of the 600 ms agreed, then a drop for our silence.
        assert sum(1 for s in later if s.type == KEEP_ALIVE_INFO) >= 2
        assert 0.5 <= dropped_after < 5, dropped_after
        sock.close()


def test_size_prefix_is_exact(tmp_path: Path) -> None:
    with running_broker(workdir=tmp_path) as broker:
        sock = socket.create_connection(("127.0.0.1", broker.openwire_port), timeout=10)
        head = sock.recv(4)
        (size,) = struct.unpack(">i", head)
        body = b""
        while len(body) < size:
            body += sock.recv(size - len(body))
        assert body[0] == WIRE_FORMAT_INFO and body[1:9] == b"ActiveMQ"
        sock.close()
