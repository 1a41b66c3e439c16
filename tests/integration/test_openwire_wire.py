"""OpenWire over a real socket without the Java client: what the broker says first, the
keep-alives it sends, and the silent peer it drops (compatibility P3)."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from brokers import running_broker
from dovecote.protocol.openwire import FrameReader, Marshaller, Structure, negotiate
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.schema import BROKER_INFO, KEEP_ALIVE_INFO, WIRE_FORMAT_INFO
from rawopenwire import client_wfi, message, read_structures
from rawopenwire import ids as raw_ids


def test_broker_speaks_first_negotiates_loose_keeps_alive_and_drops_the_silent(
    tmp_path: Path,
) -> None:
    with running_broker(workdir=tmp_path) as broker:
        sock = socket.create_connection(("127.0.0.1", broker.openwire_port), timeout=10)
        reader = FrameReader()
        first = read_structures(sock, reader, time.monotonic() + 1)
        assert [s.type for s in first] == [WIRE_FORMAT_INFO]  # BrokerInfo after ours
        # The broker offers loose encoding: whatever a client offers, the AND is loose.
        ours = first[0]
        assert not negotiate(ours, client_wfi(30000, tight=True)).tight
        sock.sendall(Marshaller().frame(client_wfi(600, tight=True)))
        started = time.monotonic()
        later = read_structures(sock, reader, started + 10)
        assert later[0].type == BROKER_INFO
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


def test_async_sends_and_acks_read_together_keep_order_and_report_their_errors(
    tmp_path: Path,
) -> None:
    """Asynchronous sends read in one chunk are routed as a batch and asynchronous acks as
    one settlement: the order holds across synchronous (persistent) sends between them, a
    bad ack in the middle is reported as a ConnectionError while the acks around it still
    settle, and the room they make is filled."""
    marshaller = Marshaller()
    ids = raw_ids("ID:raw-1")
    queue = Structure(t.QUEUE, {"physicalName": "batched"})
    with running_broker(workdir=tmp_path) as broker:
        sock = socket.create_connection(("127.0.0.1", broker.openwire_port), timeout=10)
        reader = FrameReader()
        setup = [
            client_wfi(0, tight=True),
            Structure(t.CONNECTION_INFO, {"commandId": 1, "connectionId": ids["connection"]}),
            Structure(t.SESSION_INFO, {"commandId": 2, "sessionId": ids["session"]}),
            Structure(t.PRODUCER_INFO, {"commandId": 3, "producerId": ids["producer"]}),
        ]
        sends = [
            message(ids, queue, i, 10 + i, response=i % 7 == 3, persistent=i % 7 == 3)
            for i in range(60)
        ]
        sock.sendall(b"".join(marshaller.frame(s) for s in setup + sends))
        consumer = Structure(t.CONSUMER_INFO, {
            "commandId": 100, "responseRequired": True, "consumerId": ids["consumer"],
            "destination": queue, "prefetchSize": 10, "dispatchAsync": True,
        })  # fmt: skip
        sock.sendall(marshaller.frame(consumer))

        def dispatched(n: int) -> list[Structure]:
            got: list[Structure] = []
            deadline = time.monotonic() + 10
            while len(got) < n and time.monotonic() < deadline:
                got += [
                    s for s in read_structures(sock, reader, time.monotonic() + 0.2)
                    if s.type in (t.MESSAGE_DISPATCH, t.CONNECTION_ERROR)
                ]  # fmt: skip
            return got

        first = dispatched(10)
        assert [d["message"]["content"] for d in first] == [f"m{i}".encode() for i in range(10)]
        acks = [
            Structure(
                t.MESSAGE_ACK,
                {
                    "commandId": 200 + i,
                    "destination": queue,
                    "consumerId": ids["consumer"],
                    "ackType": 4,
                    "lastMessageId": d["message"]["messageId"],
                    "messageCount": 1,
                },
            )
            for i, d in enumerate(first)
        ]
        bogus = message(ids, queue, 999, 0, response=False)["messageId"]
        # A delivered ack of a message never dispatched (an individual one is ignored).
        acks.insert(5, Structure(t.MESSAGE_ACK, {
            "commandId": 300, "destination": queue, "consumerId": ids["consumer"],
            "ackType": 0, "lastMessageId": bogus, "messageCount": 1,
        }))  # fmt: skip
        sock.sendall(b"".join(marshaller.frame(a) for a in acks))
        after = dispatched(11)
        errors = [s for s in after if s.type == t.CONNECTION_ERROR]
        assert len(errors) == 1 and "999" in errors[0]["exception"].message
        refill = [s["message"]["content"] for s in after if s.type == t.MESSAGE_DISPATCH]
        assert refill == [f"m{i}".encode() for i in range(10, 20)]
        sock.close()
