"""The URL options dovecote's client acts on do what the Java client's do, on a real socket to
a real broker: TcpTransport's socket settings, connect and negotiation timeouts, soTimeout's
harmless read timeouts, the inactivity monitor switched off, trace. (Which options are
accepted at all: test_client_options_parity; ssl://: test_client_options_ssl.)"""

from __future__ import annotations

import logging
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.client import ConnectionFactory, options, parse_broker_url
from dovecote.client.connection import Connection
from dovecote.protocol.openwire import schema as t


@pytest.fixture(scope="module")
def broker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_broker(workdir=tmp_path_factory.mktemp("options")) as broker:
        yield f"tcp://127.0.0.1:{broker.openwire_port}"


def sock_of(conn: Connection) -> socket.socket:
    sock = conn.transport._sock
    assert sock is not None
    return sock


def test_socket_options_reach_the_socket(broker_url: str) -> None:
    url = broker_url + "?keepAlive=true&soLinger=5&socketBufferSize=262144&soTimeout=1500"
    with ConnectionFactory(url).create_connection() as conn:
        sock = sock_of(conn)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        linger = struct.unpack("ii", sock.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))
        assert linger == (1, 5)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= 262144
        seconds, micros = struct.unpack(
            "ll", sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)
        )
        assert (seconds, micros) == (1, 500_000)
    with ConnectionFactory(broker_url + "?socket.keepAlive=true").create_connection() as conn:
        assert sock_of(conn).getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1


@pytest.mark.parametrize(
    ("options", "nodelay"),
    [
        ("", 1),
        # As WireFormatNegotiator: once negotiated, TCP_NODELAY is what both sides' wire
        # formats say, whatever tcpNoDelay set on the bare socket.
        ("?tcpNoDelay=false", 1),
        ("?wireFormat.tcpNoDelayEnabled=false", 0),
    ],
)
def test_tcp_no_delay_as_the_java_client_leaves_it(
    broker_url: str, options: str, nodelay: int
) -> None:
    with ConnectionFactory(broker_url + options).create_connection() as conn:
        assert sock_of(conn).getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == nodelay


def test_a_read_timing_out_under_so_timeout_is_no_error(broker_url: str) -> None:
    """soTimeout bounds each read; in Java a read that times out is ignored and the next
    begins: the connection lives on across many of them."""
    with ConnectionFactory(broker_url + "?soTimeout=100").create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue("options.so_timeout")
        consumer = session.create_consumer(queue)
        assert consumer.receive(0.6) is None  # six read timeouts, at least, go by
        session.create_producer(queue).send("still here")
        got = consumer.receive(5)
        assert got is not None and got.body == "still here"
        assert conn.failure is None


@pytest.fixture
def full_listener() -> Iterator[int]:
    """A port whose accept queue is full: a connect to it waits for its SYN to be answered."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port))
    try:
        yield port
    finally:
        filler.close()
        server.close()


def test_connection_timeout_bounds_the_connect(full_listener: int) -> None:
    started = time.monotonic()
    with pytest.raises(OSError):
        ConnectionFactory(
            f"tcp://127.0.0.1:{full_listener}?connectionTimeout=300"
        ).create_connection()
    assert time.monotonic() - started < 5  # the default would wait 30 s


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A peer that accepts and never says a word (no WireFormatInfo)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def test_negotiate_timeout_bounds_the_wait_for_the_brokers_wire_format(
    silent_listener: int,
) -> None:
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="negotiateTimeout=300"):
        ConnectionFactory(
            f"tcp://127.0.0.1:{silent_listener}?negotiateTimeout=300"
        ).create_connection()
    assert time.monotonic() - started < 5  # before: connectionTimeout, 30 s


def keep_alives_sent_within(conn: Connection, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not conn.transport.sent[t.KEEP_ALIVE_INFO]:
        time.sleep(0.05)
    return conn.transport.sent[t.KEEP_ALIVE_INFO]


def test_use_inactivity_monitor_false_sends_no_keep_alives(broker_url: str) -> None:
    quick = "wireFormat.maxInactivityDuration=600"  # keep-alives every 200 ms when monitored
    with ConnectionFactory(f"{broker_url}?{quick}").create_connection() as conn:
        assert keep_alives_sent_within(conn, 5) > 0
    url = f"{broker_url}?{quick}&useInactivityMonitor=false"
    with ConnectionFactory(url).create_connection() as conn:
        assert keep_alives_sent_within(conn, 1.0) == 0


def test_trace_logs_every_command(broker_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.DEBUG, logger="dovecote.client.trace"),
        ConnectionFactory(broker_url + "?trace=true").create_connection(),
    ):
        pass
    sent = [r.getMessage() for r in caplog.records if r.getMessage().startswith("SEND")]
    received = [r.getMessage() for r in caplog.records if r.getMessage().startswith("RECV")]
    assert sent and received


def test_an_ssl_member_is_spoken_in_tls_and_only_it() -> None:
    url = parse_broker_url("failover:(tcp://a:61616,ssl://b:61617?verifyHostName=false)")
    assert [m.transport.tls for m in url.members] == [False, True]
    assert [m.transport.verifyHostName for m in url.members] == [True, False]


def test_every_accepted_option_is_written_down() -> None:
    """docs/client-options.md says of each option the client accepts whether it acts on it,
    and why not when it does not."""
    doc = (Path(__file__).parents[2] / "docs" / "client-options.md").read_text()
    tokens = set(re.findall(r"`([^`]+)`", doc))
    groups = {
        "jms.": options.CONNECTION_FACTORY, "jms.prefetchPolicy.": options.PREFETCH_POLICY,
        "jms.redeliveryPolicy.": options.REDELIVERY_POLICY,
        "jms.blobTransferPolicy.": options.BLOB_TRANSFER_POLICY,
        "wireFormat.": options.WIRE_FORMAT, "socket.": options.SSL_SOCKET,
        "": {**options.SSL_TRANSPORT, **options.INACTIVITY_MONITOR,
             **options.WIRE_FORMAT_NEGOTIATOR, **options.FAILOVER},
    }  # fmt: skip
    missing = [
        prefix + name
        for prefix, table in groups.items()
        for name, kind in table.items()
        if kind is not None  # refused whatever its value: nothing to act on
        and not {prefix + name, name, f"{prefix}*"} & tokens
        and not any(token.endswith(f".{name}") for token in tokens)
    ]
    assert missing == []
