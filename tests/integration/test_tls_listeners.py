"""TLS on every listener of a real broker process (under uvloop, as the CLI runs it), with
certificates made here (tests/tlscerts.py): ssl:// with dovecote.client (encrypted on the
wire, the broker's certificate verified by default), stomp+ssl:// with stomp.py,
auto+ssl:// carrying OpenWire and STOMP, and HTTPS on the console port."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory
from dovecote.client.tls import SslConnectionFactory
from tlscerts import Pki, make_test_pki, tls_config

LISTENERS = """
[ssl]
enabled = true
port = 0

[stomp_ssl]
enabled = true
port = 0

[auto]
enabled = true
port = 0
tls = true

[console]
tls = true
"""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    config = tls_config(pki, "want", LISTENERS)
    with running_broker(config, workdir=tmp_path_factory.mktemp("broker")) as proc:
        yield proc


def factory(pki: Pki, port: int, key_store: Path | None = None) -> SslConnectionFactory:
    return SslConnectionFactory(
        f"ssl://localhost:{port}", trust_store=str(pki.ca),
        key_store=str(key_store) if key_store else None,
    )  # fmt: skip


def round_trip(connection_factory: ConnectionFactory, queue_name: str, text: str) -> str:
    with connection_factory.create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(queue_name)
        session.create_producer(queue).send(text)
        got = session.create_consumer(queue).receive(10)
        assert got is not None
        return str(got.body)


class Relay:
    """A TCP relay on 127.0.0.1 that keeps every byte it passes on, both ways."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.seen = bytearray()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:
                    self.seen += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._server.close()


def test_ssl_carries_openwire_encrypted(broker: BrokerProcess, pki: Pki) -> None:
    """Through a relay that sees every byte: over ssl:// neither the message nor OpenWire's
    magic crosses in clear (and through the same relay to the plain port both do)."""
    secret = "the payload nobody on the wire may read " * 20
    for port, encrypted in ((broker.ports["ssl"], True), (broker.openwire_port, False)):
        relay = Relay(port)
        try:
            scheme = "ssl" if encrypted else "tcp"
            url = f"{scheme}://127.0.0.1:{relay.port}"
            connection_factory = (
                SslConnectionFactory(url, trust_store=str(pki.ca))
                if encrypted
                else ConnectionFactory(url)
            )
            assert round_trip(connection_factory, "tls.wire", secret) == secret
        finally:
            relay.close()
        seen = bytes(relay.seen)
        assert (secret.encode() in seen) is not encrypted
        assert (b"ActiveMQ" in seen) is not encrypted
        if encrypted:
            assert seen[0] == 0x16  # a TLS handshake record: the ClientHello


def test_a_plain_openwire_client_on_the_ssl_port_hears_no_wire_format(
    broker: BrokerProcess,
) -> None:
    """The plain port greets a connect with its WireFormatInfo ("ActiveMQ" magic); the ssl
    port says nothing in clear: it waits for a ClientHello, and a plain client's bytes end
    the connection."""
    with socket.create_connection(("127.0.0.1", broker.openwire_port), timeout=5) as plain:
        assert b"ActiveMQ" in plain.recv(4096)
    with socket.create_connection(("127.0.0.1", broker.ports["ssl"]), timeout=5) as sock:
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(4096)
        sock.sendall(b"\x00\x00\x00\x80\x01ActiveMQ" + bytes(120))  # a WireFormatInfo's start
        sock.settimeout(5)
        answer = b""
        while data := sock.recv(4096):
            answer += data
        assert b"ActiveMQ" not in answer


def test_the_client_verifies_the_broker_certificate_by_default(
    broker: BrokerProcess, pki: Pki
) -> None:
    """The system's trust store does not vouch for the test CA: the handshake fails on the
    client's side. Trusting another CA fails the same way; trusting the test CA works."""
    port = broker.ports["ssl"]
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        ConnectionFactory(f"ssl://localhost:{port}").create_connection()
    rogue = SslConnectionFactory(
        f"ssl://localhost:{port}", trust_store=str(pki.directory / "rogue-ca.pem")
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        rogue.create_connection()
    assert round_trip(factory(pki, port), "tls.verified", "trusted") == "trusted"


def test_our_client_with_a_client_certificate(broker: BrokerProcess, pki: Pki) -> None:
    """client_auth = "want": a client certificate the CA issued is accepted."""
    port = broker.ports["ssl"]
    assert round_trip(factory(pki, port, pki.alice), "tls.alice", "from alice") == "from alice"


def stomp_connection(pki: Pki, port: int, with_certificate: bool = False) -> stomp.Connection:
    conn = stomp.Connection([("localhost", port)], heartbeats=(0, 0))
    if with_certificate:
        conn.set_ssl(for_hosts=[("localhost", port)], ca_certs=str(pki.ca),
                     cert_file=str(pki.alice_cert), key_file=str(pki.alice_key))  # fmt: skip
    else:
        conn.set_ssl(for_hosts=[("localhost", port)], ca_certs=str(pki.ca))
    return conn


class Collector(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.arrived = threading.Event()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.bodies.append(frame.body)
        self.arrived.set()


@pytest.mark.parametrize("with_certificate", [False, True])
def test_stomp_py_over_stomp_ssl(broker: BrokerProcess, pki: Pki, with_certificate: bool) -> None:
    port = broker.ports["stomp_ssl"]
    conn = stomp_connection(pki, port, with_certificate)
    collector = Collector()
    conn.set_listener("collector", collector)
    conn.connect(wait=True)
    try:
        queue = f"/queue/tls.stomp.{with_certificate}"
        conn.subscribe(queue, id="1", ack="auto")
        conn.send(queue, "over stomp+ssl", receipt="r1")
        assert collector.arrived.wait(10)
        assert collector.bodies == ["over stomp+ssl"]
    finally:
        conn.disconnect()


def test_auto_ssl_carries_openwire_and_stomp(broker: BrokerProcess, pki: Pki) -> None:
    """One TLS port, both protocols: a message sent by dovecote.client over OpenWire is
    received by stomp.py over STOMP, both through auto+ssl."""
    port = broker.ports["auto"]
    conn = stomp_connection(pki, port)
    collector = Collector()
    conn.set_listener("collector", collector)
    conn.connect(wait=True)
    try:
        conn.subscribe("/queue/tls.auto", id="1", ack="auto")
        with factory(pki, port).create_connection() as openwire:
            session = openwire.create_session()
            session.create_producer(session.queue("tls.auto")).send("openwire to stomp")
        assert collector.arrived.wait(10)
        assert collector.bodies == ["openwire to stomp"]
    finally:
        conn.disconnect()
    assert round_trip(factory(pki, port), "tls.auto.ow", "openwire both ways") == (
        "openwire both ways"
    )


def test_console_speaks_https(broker: BrokerProcess, pki: Pki) -> None:
    """With the CA, /api/broker answers 200 over HTTPS (urllib and curl); plain HTTP to the
    same port gets no answer."""
    port = broker.console_port
    context = ssl.create_default_context(cafile=str(pki.ca))
    with urllib.request.urlopen(f"https://localhost:{port}/api/broker", context=context) as r:
        assert r.status == 200
        assert isinstance(json.loads(r.read()), dict)
    curl = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(pki.ca),
         f"https://localhost:{port}/api/destinations"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert curl.stdout == "200", curl.stderr
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"http://localhost:{port}/api/broker", timeout=10)
    untrusting = ssl.create_default_context()
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"https://localhost:{port}/api/broker", context=untrusting)


def test_a_plain_stomp_client_on_the_tls_port_costs_one_line(broker: BrokerProcess) -> None:
    """A STOMP CONNECT in clear on stomp+ssl:// is dropped, with one log line saying the
    client did not speak TLS, and no traceback."""
    mark = len(broker.log_lines)
    with socket.create_connection(("127.0.0.1", broker.ports["stomp_ssl"]), timeout=5) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        sock.settimeout(5)
        while sock.recv(4096):
            pass
    lines = []
    for _ in range(100):  # the line is written as the broker closes the socket: poll for it
        lines = [line for line in broker.log_lines[mark:] if "TLS handshake" in line]
        if lines:
            break
        time.sleep(0.05)
    assert len(lines) == 1, broker.log_lines[mark:]
    assert "not TLS" in lines[0]
    assert "Traceback" not in "".join(broker.log_lines[mark:])
