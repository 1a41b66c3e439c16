"""Client certificates on the TLS listeners, with the broker in the test's own event loop
(asyncio's TLS, where the CLI's broker runs uvloop's) so that the test sees what the broker
was told of each connection: client_auth = "need" refuses a client without a certificate,
and a verified certificate's subject reaches the broker as the connection's Peer
(what an authentication plugin names the user by), from stomp.py and dovecote.client; and,
end to end on a broker process with [security], the subject naming a user who has no
password."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import stomp

from brokers import running_broker
from dovecote.app import BrokerApp
from dovecote.broker.connection import Peer
from dovecote.client import Connection, JMSError
from dovecote.client.tls import SslConnectionFactory
from dovecote.config import Config, SslSection, StompSslSection, TlsSection
from tlscerts import Pki, make_test_pki, tls_config

ALICE = "CN=alice,O=dovecote"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


def app_config(pki: Pki, client_auth: str) -> Config:
    replace = msgspec.structs.replace
    config = Config()
    return replace(
        config,
        broker=replace(config.broker, persistent=False),
        stomp=replace(config.stomp, port=0),
        openwire=replace(config.openwire, port=0),
        console=replace(config.console, enabled=False),
        tls=TlsSection(certificate_file=pki.broker_cert, key_file=pki.broker_key,
                       ca_file=pki.ca, client_auth=client_auth),  # type: ignore[arg-type]
        ssl=SslSection(enabled=True, port=0),
        stomp_ssl=StompSslSection(enabled=True, port=0),
    )  # fmt: skip


@pytest.fixture(params=["need", "want"])
async def app(request: pytest.FixtureRequest, pki: Pki) -> AsyncIterator[BrokerApp]:
    broker_app = BrokerApp(app_config(pki, request.param))
    await broker_app.start()
    try:
        yield broker_app
    finally:
        await broker_app.stop()


def peers(app: BrokerApp) -> list[Peer]:
    return [state.peer for state in app.broker.connections()]


def stomp_connect(pki: Pki, port: int, certificate: bool) -> stomp.Connection:
    """A STOMP connection over TLS, connected (raises when it cannot be)."""
    conn = stomp.Connection([("localhost", port)], heartbeats=(0, 0), timeout=5,
                            reconnect_attempts_max=1)  # fmt: skip
    files = {"cert_file": str(pki.alice_cert), "key_file": str(pki.alice_key)}
    conn.set_ssl(for_hosts=[("localhost", port)], ca_certs=str(pki.ca),
                 **(files if certificate else {}))  # fmt: skip
    conn.connect(wait=True)
    return conn


def stomp_refused_without_certificate(pki: Pki, port: int) -> bytes:
    """What a STOMP client without a certificate reads after its CONNECT: the broker's
    refusal comes as a TLS alert or the end of the stream (b""), never a frame. A plain TLS
    socket with a deadline: stomp.py 9 can wait forever when a TLS connection it has not yet
    seen CONNECTED on fails (its I/O thread stops with the waiter still waiting)."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    raw = socket.create_connection(("localhost", port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as sock:
        # TLS 1.3: the handshake is over for the client before the broker has looked at its
        # (missing) certificate.
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
        try:
            return sock.recv(65536)
        except ssl.SSLError as alert:
            return alert.reason.encode() if alert.reason else b"alert"


async def test_stomp_client_certificate(app: BrokerApp, pki: Pki) -> None:
    assert app.stomp_ssl is not None
    port = app.stomp_ssl.port
    conn = await asyncio.to_thread(stomp_connect, pki, port, True)
    try:
        assert peers(app) == [Peer(peers(app)[0].address, "stomp", True, ALICE)]
    finally:
        await asyncio.to_thread(conn.disconnect)
    if app.config.tls.client_auth == "need":
        refusal = await asyncio.to_thread(stomp_refused_without_certificate, pki, port)
        assert refusal in (b"", b"TLSV13_ALERT_CERTIFICATE_REQUIRED")
        assert peers(app) == []
    else:  # "want": a client without a certificate is let in, with no subject
        conn = await asyncio.to_thread(stomp_connect, pki, port, False)
        try:
            assert [(p.tls, p.certificate_subject) for p in peers(app)] == [(True, None)]
        finally:
            await asyncio.to_thread(conn.disconnect)


def openwire_connect(pki: Pki, port: int, key_store: Path | None) -> Connection:
    factory = SslConnectionFactory(
        f"ssl://localhost:{port}", trust_store=str(pki.ca),
        key_store=str(key_store) if key_store else None,
    )  # fmt: skip
    return factory.create_connection()


async def test_openwire_client_certificate(app: BrokerApp, pki: Pki) -> None:
    assert app.ssl is not None
    port = app.ssl.port
    conn = await asyncio.to_thread(openwire_connect, pki, port, pki.alice)
    try:
        assert [(p.protocol, p.tls, p.certificate_subject) for p in peers(app)] == [
            ("openwire", True, ALICE)
        ]
        assert peers(app)[0].address.startswith("127.0.0.1:")
    finally:
        await asyncio.to_thread(conn.close)
    if app.config.tls.client_auth == "need":
        # TLS 1.3: the client's handshake is over before the broker has looked at its
        # (missing) certificate; the refusal comes as the connection's first read fails.
        with pytest.raises((ssl.SSLError, OSError)):
            await asyncio.to_thread(openwire_connect, pki, port, None)
        assert peers(app) == []


async def test_plain_listeners_tell_the_broker_no_tls(app: BrokerApp) -> None:
    """The plain STOMP port's connections are not TLS and have no subject."""
    assert app.stomp is not None
    port = app.stomp.port

    def connect() -> stomp.Connection:
        conn = stomp.Connection([("127.0.0.1", port)], heartbeats=(0, 0))
        conn.connect(wait=True)
        return conn

    conn = await asyncio.to_thread(connect)
    try:
        assert [(p.protocol, p.tls, p.certificate_subject) for p in peers(app)] == [
            ("stomp", False, None)
        ]
    finally:
        await asyncio.to_thread(conn.disconnect)


CERTIFICATE_USERS = """
[ssl]
enabled = true
port = 0

[stomp_ssl]
enabled = true
port = 0

[[security.users]]
name = "alice"
groups = ["apps"]

[[security.certificate_users]]
subject = "CN=alice,O=dovecote"
user = "alice"
"""


def test_a_client_certificate_names_the_user_end_to_end(pki: Pki, tmp_path: Path) -> None:
    """A broker process with [security]: alice has no password, only her certificate's
    subject names her. With the certificate (client_auth = "want") stomp.py and
    dovecote.client get in without a login and work; without it, and without a login,
    both are refused."""
    with running_broker(tls_config(pki, "want", CERTIFICATE_USERS), workdir=tmp_path) as broker:
        stomp_port, ssl_port = broker.ports["stomp_ssl"], broker.ports["ssl"]
        conn = stomp_connect(pki, stomp_port, True)
        conn.send("/queue/tls.alice", "sent as alice", receipt="r1")
        conn.disconnect()
        with pytest.raises(stomp.exception.ConnectFailedException):
            stomp_connect(pki, stomp_port, False)
        client = openwire_connect(pki, ssl_port, pki.alice)
        try:
            session = client.create_session()
            client.start()
            got = session.create_consumer(session.queue("tls.alice")).receive(10)
            assert got is not None and got.body == b"sent as alice"  # no content-type: bytes
        finally:
            client.close()
        with pytest.raises(JMSError, match="User name \\[null\\] or password is invalid"):
            openwire_connect(pki, ssl_port, None)
        assert "Traceback" not in broker.log_text()
