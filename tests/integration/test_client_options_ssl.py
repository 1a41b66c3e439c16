"""ssl:// speaks TLS, against a real ActiveMQ 5.17 with an ssl:// transport connector and a
certificate made here (openssl: a test CA, the broker's certificate for "localhost" in a
PKCS#12 keystore): the broker is trusted through the trust store given, its certificate must
name the URL's host unless verifyHostName=false (SslTransport's default is to check), and
an ssl:// URL to a plain listener fails rather than speaking plain text."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from activemq import classpath, java_classes, running_activemq
from dovecote.client import ConnectionFactory, OptionError
from dovecote.client.tls import SslConnectionFactory


@dataclass(frozen=True)
class TlsBroker:
    ssl_port: int
    plain_port: int
    ca: Path
    java_trust_store: Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    certs = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=dovecote test CA", cwd=certs)  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out",
            "broker.csr", "-subj", "/CN=localhost", cwd=certs)  # fmt: skip
    (certs / "san.ext").write_text("subjectAltName=DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "broker.pem", "-days", "2", "-extfile", "san.ext",
            cwd=certs)  # fmt: skip
    openssl("pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-out",
            "broker.p12", "-passout", "pass:secret", "-name", "broker", cwd=certs)  # fmt: skip
    # The Java client's trust store: the CA alone.
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
                    "-keystore", "trust.p12", "-storetype", "pkcs12", "-storepass", "secret"],
                   cwd=certs, check=True, capture_output=True)  # fmt: skip
    with running_activemq(ssl_keystore=(certs / "broker.p12", "secret")) as amq:
        yield TlsBroker(amq.ssl_port, amq.openwire_port, certs / "ca.pem", certs / "trust.p12")


def test_ssl_speaks_tls_to_a_trusted_broker(tls_broker: TlsBroker) -> None:
    factory = SslConnectionFactory(
        f"ssl://localhost:{tls_broker.ssl_port}", trust_store=str(tls_broker.ca)
    )
    with factory.create_connection() as conn:
        conn.start()
        assert conn.transport._tls is not None
        assert (conn.transport._tls.version or "").startswith("TLSv1.")
        session = conn.create_session()
        queue = session.queue("tls.roundtrip")
        session.create_producer(queue).send("over TLS" * 5000)  # several TLS records
        got = session.create_consumer(queue).receive(10)
        assert got is not None and got.body == "over TLS" * 5000


def test_failover_members_speak_tls_too(tls_broker: TlsBroker) -> None:
    url = f"failover:(ssl://localhost:{tls_broker.ssl_port})?maxReconnectAttempts=0"
    with SslConnectionFactory(url, trust_store=str(tls_broker.ca)).create_connection() as conn:
        assert conn.transport._tls is not None


def test_a_broker_the_trust_store_does_not_vouch_for_is_refused(tls_broker: TlsBroker) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        ConnectionFactory(f"ssl://localhost:{tls_broker.ssl_port}").create_connection()


@pytest.mark.parametrize(
    ("options", "accepted"),
    [("", False), ("?verifyHostName=false", True), ("?socket.verifyHostName=false", True)],
)  # fmt: skip
def test_the_certificate_must_name_the_host_unless_verify_host_name_is_false(
    tls_broker: TlsBroker, options: str, accepted: bool
) -> None:
    """The certificate names "localhost"; the URL says 127.0.0.1."""
    factory = SslConnectionFactory(
        f"ssl://127.0.0.1:{tls_broker.ssl_port}{options}", trust_store=str(tls_broker.ca)
    )
    if accepted:
        factory.create_connection().close()
    else:
        with pytest.raises(ssl.SSLCertVerificationError, match=r"Hostname mismatch|IP address"):
            factory.create_connection()


def test_ssl_to_a_plain_listener_fails_and_sends_nothing_in_plain_text(
    tls_broker: TlsBroker,
) -> None:
    url = f"ssl://localhost:{tls_broker.plain_port}?connectionTimeout=5000"
    with pytest.raises(OSError):
        SslConnectionFactory(url, trust_store=str(tls_broker.ca)).create_connection()


# ssl:// URLs side by side with the Java client, trusting the same CA (its trust store given
# as the JVM's javax.net.ssl.trustStore; ours as SslConnectionFactory's trust_store).
SSL_TABLE: list[tuple[str, bool]] = [
    ("ssl://localhost:{P}", True),
    ("ssl://127.0.0.1:{P}", False),  # the certificate names localhost only
    ("ssl://127.0.0.1:{P}?verifyHostName=false", True),
    ("ssl://127.0.0.1:{P}?socket.verifyHostName=false", True),
    # Java 17: IntrospectionSupport cannot reach the internal SSLSocketImpl's setters.
    ("ssl://localhost:{P}?socket.enabledProtocols=TLSv1.2", False),
    ("ssl://localhost:{P}?socket.needClientAuth=false", False),
    ("ssl://localhost:{P}?socket.tcpNoDelay=true", False),
    ("ssl://localhost:{P}?socket.keepAlive=true", False),
    ("ssl://localhost:{P}?tcpNoDelay=true&soTimeout=1000", True),
    ("ssl://localhost:{P}?bogus=1", False),
    ("ssl://localhost:{P}?socket.bogus=1", False),
    ("ssl://127.0.0.1:{P}?verifyHostName=false&socket.verifyHostName=false", False),
    ("failover:(ssl://localhost:{P})?nested.verifyHostName=false", True),
]


def test_ssl_urls_accepted_and_refused_as_by_the_java_client(
    tls_broker: TlsBroker,
) -> None:
    urls = [url.replace("{P}", str(tls_broker.ssl_port)) for url, _ in SSL_TABLE]
    result = subprocess.run(
        ["java", f"-Djavax.net.ssl.trustStore={tls_broker.java_trust_store}",
         "-Djavax.net.ssl.trustStorePassword=secret", "-Djavax.net.ssl.trustStoreType=pkcs12",
         "-cp", f"{classpath()}:{java_classes()}", "UrlOptions"],
        input="\n".join(urls) + "\n", capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    java = {line.split("\t")[1]: line.split("\t")[0] for line in result.stdout.splitlines()}
    assert len(java) == len(urls), result.stdout + result.stderr[-2000:]
    ours = {}
    for url in urls:
        try:
            SslConnectionFactory(url, trust_store=str(tls_broker.ca)).create_connection().close()
            ours[url] = "ACCEPTED"
        except (OSError, OptionError):
            ours[url] = "REFUSED"
    assert ours == java
    assert [java[url] == "ACCEPTED" for url in urls] == [accepted for _, accepted in SSL_TABLE]
