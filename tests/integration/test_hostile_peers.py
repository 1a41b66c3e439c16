"""Hostile peers on real sockets never stall the broker: malformed OpenWire commands are
answered (an ExceptionResponse, the connection goes on), frames that cannot be read close
their connection, thousands of fuzzed frames leave a well-behaved client's round trips fast
and the log small, and sockets that never finish their handshake (OpenWire without a
WireFormatInfo, STOMP without a CONNECT) are closed after the configured timeout, so that a
thousand of them cannot lock good clients out. ``DOVECOTE_LONG=1`` runs the long form."""

from __future__ import annotations

import os
import random
import resource
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.protocol.openwire import Structure, Throwable
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.primitives import encode_map
from rawopenwire import MARSHALLER, Peer, bad_ack, ids, message, queue
from silentpeers import closed_by_broker, silent_sockets

LONG = bool(os.environ.get("DOVECOTE_LONG"))


def log_since(broker: BrokerProcess, mark: int) -> str:
    return "".join(broker.log_lines[mark:])


# -- malformed commands ----------------------------------------------------------------------


def test_malformed_ack_gets_an_exception_response_and_the_connection_goes_on(
    tmp_path: Path,
) -> None:
    """The MessageAck with ackType -80: each one answered by an ExceptionResponse naming the
    command, the connection still serving after 300 of them, and the log a few lines with
    no traceback (each was a traceback longer than the last: the 300th 4,799 lines)."""
    with running_broker(workdir=tmp_path) as broker:
        mark = len(broker.log_lines)
        peer = Peer(broker.openwire_port)
        my = peer.handshake("ID:hostile-1")
        for i in range(300):
            peer.send(bad_ack(my, 100 + i))
        for i in range(300):
            answer = peer.until(t.EXCEPTION_RESPONSE)
            assert answer["correlationId"] == 100 + i
            thrown = answer["exception"]
            assert isinstance(thrown, Throwable)
            assert "MessageAck" in (thrown.message or "")
        # Still in step: a command after them gets its Response.
        peer.send(Structure(t.PRODUCER_INFO, {"commandId": 999, "responseRequired": True,
                                              "producerId": my["producer"]}))  # fmt: skip
        assert peer.until(t.RESPONSE)["correlationId"] == 999
        peer.close()
        time.sleep(0.2)  # (what the broker logs about the connection's end, if anything)
        text = log_since(broker, mark)
        assert "Traceback" not in text
        assert len(text) < 4000, text


def test_unreadable_frame_is_answered_and_closes_its_connection_only(tmp_path: Path) -> None:
    """A frame whose string is not modified UTF-8 cannot be trusted: an ExceptionResponse
    for its command id, then the connection is closed; another connection goes on."""
    with running_broker(workdir=tmp_path) as broker:
        good, bad = Peer(broker.openwire_port), Peer(broker.openwire_port)
        good.handshake("ID:good-1")
        my = bad.handshake("ID:bad-1")
        frame = bytearray(MARSHALLER.frame(Structure(t.CONSUMER_INFO, {
            "commandId": 7, "responseRequired": True, "consumerId": my["consumer"],
            "destination": queue("hostile"), "selector": "a = 'XX'",
        })))  # fmt: skip
        at = frame.index(b"XX")
        frame[at : at + 2] = b"\xff\xfe"
        bad.sock.sendall(bytes(frame))
        answer = bad.until(t.EXCEPTION_RESPONSE)
        assert answer["correlationId"] == 7 and "ConsumerInfo" in answer["exception"].message
        with pytest.raises(EOFError):
            bad.next(timeout=5)
        good.send(
            Structure(
                t.PRODUCER_INFO,
                {
                    "commandId": 3,
                    "responseRequired": True,
                    "producerId": ids("ID:good-1")["producer"],
                },
            )
        )
        assert good.until(t.RESPONSE)["correlationId"] == 3
        good.close()
        bad.close()
        assert "Traceback" not in broker.log_text()


def test_bad_stomp_frames_get_an_error_each_and_a_few_log_lines(tmp_path: Path) -> None:
    """300 connections each sending a frame the broker cannot take: an ERROR each, and the
    log a few lines and summaries, no traceback (it was a line at INFO per connection)."""
    bad_frames = [
        b"SEND\ndestination:/queue/a\ncontent-length:abc\n\nx\x00",
        b"\xff\xfe\xfd garbage\n\n\x00",
        b"CONNECT\naccept-version:9.9\nhost:x\n\n\x00",
        b"CONNECT\naccept-version:1.2\nhost:x\nheart-beat:1,2,3\n\n\x00",
    ]
    with running_broker(workdir=tmp_path) as broker:
        mark = len(broker.log_lines)
        started = time.monotonic()
        for i in range(300):
            with socket.create_connection(broker.stomp_address, timeout=10) as sock:
                sock.sendall(bad_frames[i % len(bad_frames)])
                reply = b""
                while data := sock.recv(4096):
                    reply += data
                assert reply.startswith(b"ERROR"), reply
        deadline = time.monotonic() + 3  # (the summary of what was left out: once a second)
        while "suppressed" not in log_since(broker, mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        text = log_since(broker, mark)
        assert "Traceback" not in text
        # A burst of 20, then 2 lines a second and a summary each second at most.
        assert len(text.splitlines()) <= 22 + 3 * (time.monotonic() - started), text
        assert "more peer errors suppressed" in text


# -- fuzzed frames against a real broker ------------------------------------------------------


def valid_frames(my: dict[str, Structure]) -> list[Structure]:
    """One valid command of most types a client sends, for the fuzzer to spoil."""
    q = queue("fuzz.q")
    msg_id = Structure(t.MESSAGE_ID, {"producerId": my["producer"], "producerSequenceId": 1})
    frames = [
        Structure(t.CONSUMER_INFO, {"consumerId": my["consumer"], "destination": q,
                                    "prefetchSize": 10, "selector": "a = 'b'"}),
        Structure(t.PRODUCER_INFO, {"producerId": my["producer"], "destination": q}),
        Structure(t.SESSION_INFO, {"sessionId": my["session"]}),
        Structure(t.TRANSACTION_INFO, {"connectionId": my["connection"], "type": 0,
                                       "transactionId": Structure(t.LOCAL_TRANSACTION_ID, {
                                           "value": 1, "connectionId": my["connection"]})}),
        Structure(t.DESTINATION_INFO, {"connectionId": my["connection"], "destination": q}),
        Structure(t.REMOVE_INFO, {"objectId": my["consumer"]}),
        Structure(t.MESSAGE_PULL, {"consumerId": my["consumer"], "destination": q}),
        Structure(t.MESSAGE_ACK, {"destination": q, "consumerId": my["consumer"],
                                  "ackType": 2, "lastMessageId": msg_id, "messageCount": 1}),
        Structure(t.TEXT_MESSAGE, {**message(my, q, 1, 0).fields,
                                   "marshalledProperties": encode_map({"k": "v", "n": 1})}),
        message(my, q, 2, 0),
        Structure(t.CONTROL_COMMAND, {"command": "x"}),
        Structure(t.KEEP_ALIVE_INFO, {}),
        Structure(t.REMOVE_SUBSCRIPTION_INFO, {"connectionId": my["connection"],
                                               "subcriptionName": "s", "clientId": "c"}),
    ]  # fmt: skip
    return frames


def mutate(rng: random.Random, structure: Structure, command_id: int) -> bytes:
    """A frame spoiled one of the ways the sans-I/O fuzz suite spoils them (its size prefix
    kept right, so that most spoiled frames are read as frames)."""
    structure = Structure(structure.type, dict(structure.fields))
    structure.fields["commandId"] = command_id
    structure.fields["responseRequired"] = rng.random() < 0.5
    how = rng.randrange(6)
    if how == 0:  # a field out of range or of the wrong kind
        name = rng.choice([n for n, _ in t.fields_for(structure.type, 12)] or ["commandId"])
        structure.fields[name] = rng.choice([None, -80, -1, 2**31 - 1, queue("x"), "x"])
        try:
            body = MARSHALLER.frame(structure)[4:]
        except (TypeError, ValueError, struct.error, AttributeError):
            body = MARSHALLER.frame(Structure(t.MESSAGE_ACK, {"ackType": -80}))[4:]
    else:
        spoiled = bytearray(MARSHALLER.frame(structure)[4:])
        if how == 1:  # bytes
            for _ in range(rng.randint(1, 4)):
                spoiled[rng.randrange(1, len(spoiled))] = rng.choice([0, 1, 2, 0x80, 0xC0, 0xFF])
        elif how == 2 and len(spoiled) > 8:  # a length field
            at = rng.randrange(6, len(spoiled) - 2)
            spoiled[at : at + 2] = rng.choice([b"\xff\xff", b"\x7f\xff", b"\x00\x00"])
        elif how == 3:  # the type byte
            spoiled[0] = rng.choice([0, 2, 13, 30, 31, 99, 110, 200, 255])
        elif how == 4:  # truncated
            del spoiled[rng.randint(1, len(spoiled) - 1) :]
        else:  # bad modified UTF-8 where a string was
            for text in (b"fuzz.q", b"a = 'b'", b"ID:"):
                at = spoiled.find(text)
                if at >= 0:
                    spoiled[at : at + 2] = b"\xc3("
        body = bytes(spoiled)
    return struct.pack(">i", len(body)) + body


class Fuzzer(threading.Thread):
    """Sends ``count`` spoiled frames over connections of its own, reconnecting whenever
    the broker closes one, and reads (and drops) what the broker answers."""

    def __init__(self, port: int, n: int, count: int) -> None:
        super().__init__(daemon=True)
        self.port, self.n, self.count = port, n, count
        self.sent = 0
        self.connections = 0
        self.error: BaseException | None = None

        # Made first: the test's threads share one interpreter, and making them while the
        # good client runs would slow its side of the round trips, not the broker's.
        rng = random.Random(n)
        frames = valid_frames(ids(f"ID:fuzz-{n}"))
        self.frames = [mutate(rng, rng.choice(frames), 10 + i) for i in range(count)]

    def run(self) -> None:
        try:
            while self.sent < self.count:
                self._one_connection()
        except BaseException as exc:
            self.error = exc

    def _one_connection(self) -> None:
        peer = Peer(self.port)
        self.connections += 1
        try:
            peer.handshake(f"ID:fuzz-{self.n}-{self.connections}")
            while self.sent < self.count:
                # Each spoiled frame, then a command whose Response says the broker is past
                # it (or the connection ends: the frame could not be read).
                probe = 1_000_000 + self.sent
                peer.sock.sendall(self.frames[self.sent] + MARSHALLER.frame(Structure(
                    t.FLUSH_COMMAND, {"commandId": probe, "responseRequired": True})))  # fmt: skip
                self.sent += 1
                while True:
                    answer = peer.next()
                    if answer.type == t.RESPONSE and answer["correlationId"] == probe:
                        break
        except (OSError, EOFError):
            return  # closed by the broker: a frame it could not read
        finally:
            peer.close()


class GoodClient(threading.Thread):
    """Sends a message that wants a Response and receives it from its own consumer, again
    and again: the time from the send to both arriving is one round trip."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.peer = Peer(port)
        self.my = self.peer.handshake("ID:good-client")
        self.q = queue("good.q")
        self.peer.send(Structure(t.CONSUMER_INFO, {
            "commandId": 3, "responseRequired": True, "consumerId": self.my["consumer"],
            "destination": self.q, "prefetchSize": 100,
        }))  # fmt: skip
        self.peer.until(t.RESPONSE)
        self.stop = threading.Event()
        self.round_trips: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            seq = 0
            while not self.stop.is_set():
                seq += 1
                started = time.perf_counter()
                self.peer.send(message(self.my, self.q, seq, 1000 + seq))
                got = {t.RESPONSE: False, t.MESSAGE_DISPATCH: False}
                while not all(got.values()):
                    s = self.peer.next(timeout=10)
                    assert s.type in got, s
                    got[s.type] = True
                    if s.type == t.MESSAGE_DISPATCH:
                        m = s["message"]
                        assert m["content"] == f"m{seq}".encode()
                        self.peer.send(Structure(t.MESSAGE_ACK, {
                            "destination": self.q, "consumerId": self.my["consumer"],
                            "ackType": 2, "lastMessageId": m["messageId"], "messageCount": 1,
                        }))  # fmt: skip
                self.round_trips.append(time.perf_counter() - started)
        except BaseException as exc:
            self.error = exc
        finally:
            self.peer.close()


def fuzz_while_a_good_client_works(tmp_path: Path, fuzzers: int, frames_each: int) -> None:
    with running_broker(workdir=tmp_path) as broker:
        good = GoodClient(broker.openwire_port)
        good.start()
        mark = len(broker.log_lines)
        attackers = [Fuzzer(broker.openwire_port, n, frames_each) for n in range(fuzzers)]
        for a in attackers:
            a.start()
        for a in attackers:
            a.join(timeout=300)
        good.stop.set()
        good.join(timeout=30)
        sent = sum(a.sent for a in attackers)
        assert sent == fuzzers * frames_each, [a.error for a in attackers]
        assert good.error is None, good.error
        trips = sorted(good.round_trips)
        assert len(trips) >= 20, len(trips)
        p99 = trips[int(len(trips) * 0.99) - 1]
        deadline = time.monotonic() + 3  # (the summary of what was left out: once a second)
        while "suppressed" not in log_since(broker, mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        text = log_since(broker, mark)
        print(f"{sent} frames on {sum(a.connections for a in attackers)} connections; "
              f"{len(trips)} round trips, p50 {trips[len(trips) // 2] * 1000:.1f} ms, "
              f"p99 {p99 * 1000:.1f} ms; {len(text)} bytes of log")  # fmt: skip
        assert p99 < 0.2, f"p99 {p99 * 1000:.0f} ms"
        assert "Traceback" not in text, text[:5000]
        assert "more peer errors suppressed" in text
        assert len(text) / sent < 40, f"{len(text)} bytes of log for {sent} frames"
        # And the broker still serves.
        after = Peer(broker.openwire_port)
        after.handshake("ID:after")
        after.close()


def test_fuzzed_frames_do_not_slow_a_good_client_nor_fill_the_log(tmp_path: Path) -> None:
    fuzz_while_a_good_client_works(tmp_path, fuzzers=4, frames_each=600)


@pytest.mark.slow
@pytest.mark.skipif(not LONG, reason="long form: DOVECOTE_LONG=1")
def test_fuzzed_frames_long(tmp_path: Path) -> None:
    fuzz_while_a_good_client_works(tmp_path, fuzzers=6, frames_each=5000)


# -- sockets that never finish their handshake -----------------------------------------------


def silent_count() -> int:
    """1,000 sockets, or as many as the file descriptor limit leaves room for."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return min(1000, soft - 200)


def first_success(attempt: object, within: float) -> float:
    """Seconds until ``attempt()`` first succeeds (retried on a refused connection)."""
    started = time.monotonic()
    while True:
        try:
            attempt()  # type: ignore[operator]
            return time.monotonic() - started
        except (OSError, EOFError, AssertionError):
            if time.monotonic() - started > within:
                raise
            time.sleep(0.05)


def test_silent_openwire_sockets_are_closed_and_cannot_lock_clients_out(tmp_path: Path) -> None:
    """1,000 sockets that never send a WireFormatInfo fill the connection limit; each is
    closed after connect_attempt_timeout_ms, and a good client gets in and works (before,
    they were never closed: every OpenWire client was locked out)."""
    n = silent_count()
    config = f"[openwire]\nconnect_attempt_timeout_ms = 1000\nmax_connections = {n}\n"
    with running_broker(config, workdir=tmp_path) as broker:
        mark = len(broker.log_lines)
        started = time.monotonic()
        with silent_sockets(broker.openwire_port, n) as socks:
            # A burst of connects fits the listen backlog (it was asyncio's 100: the rest
            # waited out SYN retransmits, 7 s for 1,000).
            assert time.monotonic() - started < 3

            def good() -> None:
                peer = Peer(broker.openwire_port, timeout=5)
                try:
                    my = peer.handshake("ID:good")
                    peer.send(message(my, queue("good.q"), 1, 5))
                    assert peer.until(t.RESPONSE)["correlationId"] == 5
                finally:
                    peer.close()

            waited = first_success(good, within=15)
            assert waited < 10, waited
            assert closed_by_broker(socks[0], 5) and closed_by_broker(socks[-1], 5)
        text = log_since(broker, mark)
        assert "Traceback" not in text
        assert len(text.splitlines()) < 100, text[:3000]


def test_never_connected_stomp_sockets_are_closed_and_cannot_lock_clients_out(
    tmp_path: Path,
) -> None:
    """As for OpenWire: a flood of STOMP sockets that never send CONNECT is closed after
    connect_attempt_timeout_ms (it was 30 s, fixed), and a good client gets in."""
    n = silent_count()
    config = f"[stomp]\nconnect_attempt_timeout_ms = 1000\nmax_connections = {n}\n"
    with running_broker(config, workdir=tmp_path) as broker:
        with silent_sockets(broker.stomp_port, n) as socks:

            def good() -> None:
                with socket.create_connection(broker.stomp_address, timeout=5) as sock:
                    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
                    reply = b""
                    while b"\x00" not in reply:
                        data = sock.recv(4096)
                        if not data:
                            raise EOFError
                        reply += data
                    assert reply.startswith(b"CONNECTED"), reply

            waited = first_success(good, within=15)
            assert waited < 10, waited
            assert closed_by_broker(socks[0], 5)
        assert "Traceback" not in broker.log_text()


def test_connect_attempt_timeouts_are_configurable(tmp_path: Path) -> None:
    """A silent socket on the OpenWire, STOMP and auto listeners is closed in about the
    configured time (not the 30 s default)."""
    config = """
[openwire]
connect_attempt_timeout_ms = 500
[stomp]
connect_attempt_timeout_ms = 500
[auto]
enabled = true
port = 0
protocol_detection_timeout_ms = 500
"""
    with running_broker(config, workdir=tmp_path) as broker:
        for port in (broker.openwire_port, broker.stomp_port, broker.auto_port):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                started = time.monotonic()
                assert closed_by_broker(sock, 10)
                assert 0.3 < time.monotonic() - started < 5


@pytest.mark.parametrize("listener", ["openwire", "stomp", "auto"])
def test_a_newcomer_at_the_limit_takes_the_place_of_a_silent_socket(
    tmp_path: Path, listener: str
) -> None:
    """With the default 30 s handshake timeout, sockets held open without a word fill the
    connection limit: the listener closes the oldest of them for a newcomer, so good clients
    get in at once (ActiveMQ refuses the newcomer until a timeout frees a place)."""
    n = min(200, silent_count())
    config = f"[{listener}]\nmax_connections = {n}\n"
    if listener == "auto":
        config += "enabled = true\nport = 0\n"
    with running_broker(config, workdir=tmp_path) as broker:
        port = {
            "openwire": broker.openwire_port, "stomp": broker.stomp_port,
            "auto": broker.auto_port,
        }[listener]  # fmt: skip
        with silent_sockets(port, n) as socks:
            for attempt in range(3):  # each newcomer takes a silent socket's place
                if listener == "openwire":
                    peer = Peer(port, timeout=5)
                    try:
                        my = peer.handshake(f"ID:newcomer{attempt}")
                        peer.send(message(my, queue("newcomer.q"), 1, 5))
                        assert peer.until(t.RESPONSE)["correlationId"] == 5
                    finally:
                        peer.close()
                    continue
                with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
                    reply = sock.recv(4096)
                    assert reply.startswith(b"CONNECTED"), (attempt, reply)
            assert closed_by_broker(socks[0], 5)
            assert not closed_by_broker(socks[-1], 0.2)
        assert "has not finished its handshake" in broker.log_text()
