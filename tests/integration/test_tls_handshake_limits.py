"""Clients that never finish a TLS handshake, on a real broker process: a silent socket is
dropped after the listener's handshake timeout (connect_attempt_timeout_ms, or
protocol_detection_timeout_ms on the auto port), sockets held open in their handshake count
against max_connections and the oldest gives its place to a newcomer (as plain listeners'
silent sockets do), and none of it leaks a file descriptor or logs a traceback."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import time
from collections.abc import Iterator

import pytest
import stomp

from brokers import BrokerProcess, running_broker
from dovecote.client.tls import SslConnectionFactory
from silentpeers import closed_by_broker, silent_sockets
from tlscerts import Pki, make_test_pki, tls_config

SILENT = 100


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """[ssl] and [auto]: the default 30 s timeouts, room for SILENT connections;
    [stomp_ssl]: a 1 s handshake timeout."""
    listeners = f"""
[ssl]
enabled = true
port = 0
max_connections = {SILENT}

[auto]
enabled = true
port = 0
tls = true
max_connections = {SILENT}

[stomp_ssl]
enabled = true
port = 0
connect_attempt_timeout_ms = 1000
"""
    config = tls_config(pki, "none", listeners)
    with running_broker(config, workdir=tmp_path_factory.mktemp("broker")) as proc:
        yield proc


def open_descriptors(broker: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{broker.process.pid}/fd"))


def settled_descriptors(broker: BrokerProcess, at_most: int) -> int:
    """The broker's open descriptors once they are down to ``at_most`` (or after 10 s)."""
    deadline = time.monotonic() + 10
    while (count := open_descriptors(broker)) > at_most and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def test_a_silent_socket_is_dropped_after_the_handshake_timeout(broker: BrokerProcess) -> None:
    mark = len(broker.log_lines)
    with socket.create_connection(("127.0.0.1", broker.ports["stomp_ssl"]), timeout=10) as sock:
        started = time.monotonic()
        assert closed_by_broker(sock, 10)
        assert 0.7 < time.monotonic() - started < 5
    # Said in a line, unless the lines of the tests before used up the log's budget.
    deadline = time.monotonic() + 5
    while not any(
        "no handshake within the timeout" in line or "peer errors suppressed" in line
        for line in broker.log_lines[mark:]
    ):
        assert time.monotonic() < deadline, broker.log_lines[mark:]
        time.sleep(0.05)
    assert "Traceback" not in broker.log_text()


def test_a_socket_that_stops_in_the_middle_of_its_handshake_is_dropped_too(
    broker: BrokerProcess,
) -> None:
    """Half a ClientHello, then nothing."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    session = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        session.do_handshake()
    hello = outgoing.read()
    with socket.create_connection(("127.0.0.1", broker.ports["stomp_ssl"]), timeout=10) as sock:
        sock.sendall(hello[: len(hello) // 2])
        started = time.monotonic()
        assert closed_by_broker(sock, 10)
        assert 0.7 < time.monotonic() - started < 5


def newcomer_over_ssl(pki: Pki, port: int, name: str) -> None:
    factory = SslConnectionFactory(f"ssl://localhost:{port}", trust_store=str(pki.ca))
    with factory.create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(name)
        session.create_producer(queue).send("got in")
        got = session.create_consumer(queue).receive(10)
        assert got is not None and got.body == "got in"


def newcomer_over_stomp(pki: Pki, port: int, name: str) -> None:
    conn = stomp.Connection([("localhost", port)], heartbeats=(0, 0), timeout=5)
    conn.set_ssl(for_hosts=[("localhost", port)], ca_certs=str(pki.ca))
    conn.connect(wait=True)
    conn.send(f"/queue/{name}", "got in", receipt="r")
    conn.disconnect()


@pytest.mark.parametrize("listener", ["ssl", "auto"])
def test_a_newcomer_at_the_limit_takes_the_place_of_a_socket_in_its_handshake(
    broker: BrokerProcess, pki: Pki, listener: str
) -> None:
    """SILENT sockets that never send a ClientHello fill the limit, their handshake timeout
    30 s away: each newcomer closes the oldest and gets in at once (OpenWire over ssl://;
    OpenWire and STOMP over auto+ssl://); the last silent socket is still open."""
    port = broker.ports[listener]
    before = open_descriptors(broker)
    with silent_sockets(port, SILENT) as socks:
        started = time.monotonic()
        newcomer_over_ssl(pki, port, f"tls.newcomer.{listener}")
        if listener == "auto":
            newcomer_over_stomp(pki, port, "tls.newcomer.stomp")
        newcomer_over_ssl(pki, port, f"tls.newcomer.{listener}")
        assert time.monotonic() - started < 10
        assert closed_by_broker(socks[0], 5)
        assert not closed_by_broker(socks[-1], 0.2)
    assert "has not finished its handshake" in broker.log_text()
    assert "Traceback" not in broker.log_text()
    # Closed by their clients, the rest end their handshakes; nothing is left open.
    assert settled_descriptors(broker, before) <= before


def test_connections_past_the_handshake_without_a_word_give_their_place_too(
    broker: BrokerProcess, pki: Pki
) -> None:
    """TLS done, no WireFormatInfo: these count as silent too."""
    port = broker.ports["ssl"]
    context = ssl.create_default_context(cafile=str(pki.ca))
    with silent_sockets(port, SILENT) as socks:
        wrapped = [context.wrap_socket(s, server_hostname="localhost") for s in socks]
        newcomer_over_ssl(pki, port, "tls.newcomer.past")
        assert closed_by_broker(wrapped[0], 5)
        assert not closed_by_broker(wrapped[-1], 0.2)
        for w in wrapped:
            w.close()


def test_a_flood_of_plain_text_clients_costs_a_few_lines(broker: BrokerProcess) -> None:
    """Plain STOMP to the TLS port, 200 times: each is dropped at its first bytes, the log
    holds a few lines (rate-limited: the first ones, then a count of the rest, which comes
    a second later), no traceback."""
    mark = len(broker.log_lines)
    for _ in range(200):
        with socket.create_connection(("127.0.0.1", broker.ports["stomp_ssl"]), timeout=5) as s:
            s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
            assert closed_by_broker(s, 5)
    deadline = time.monotonic() + 10
    while "peer errors suppressed" not in (text := "".join(broker.log_lines[mark:])):
        assert time.monotonic() < deadline, text[:3000]
        time.sleep(0.05)
    assert "Traceback" not in text
    assert text.count("not TLS") <= 60, text[:3000]
    assert len(text.splitlines()) < 70
