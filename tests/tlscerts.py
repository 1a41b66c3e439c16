"""Certificates for TLS tests, made at test time with the openssl command: a test CA, the
broker's certificate for localhost and 127.0.0.1, a client certificate for alice
(subject /O=dovecote/CN=alice), and a second CA with a broker certificate of its own that
nobody trusts. Java's stores (PKCS#12, password "secret") come along: the trust store with
the CA, alice's key store, and the broker's key store for an ActiveMQ side by side."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "secret"


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Path
    """PEM: the test CA's certificate."""
    broker_cert: Path
    broker_key: Path
    broker_p12: Path
    """The broker's key and certificate as ActiveMQ's sslContext takes them."""
    alice: Path
    """PEM: alice's certificate, then its key (what dovecote.client's key_store takes)."""
    alice_cert: Path
    alice_key: Path
    alice_p12: Path
    java_trust_store: Path
    """PKCS#12: the test CA, for javax.net.ssl.trustStore."""
    rogue_cert: Path
    rogue_key: Path
    """A broker certificate for localhost from a CA nobody here trusts."""


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)


def _ca(directory: Path, name: str, subject: str) -> None:
    _openssl(directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
             f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", subject)  # fmt: skip


def _issue(directory: Path, ca: str, name: str, subject: str, extensions: str) -> None:
    _openssl(directory, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", subject)  # fmt: skip
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey",
             f"{ca}.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile",
             f"{name}.ext")  # fmt: skip


def _p12(directory: Path, name: str) -> None:
    _openssl(directory, "pkcs12", "-export", "-in", f"{name}.pem", "-inkey", f"{name}.key",
             "-out", f"{name}.p12", "-passout", f"pass:{PASSWORD}", "-name", name)  # fmt: skip


def make_test_pki(directory: Path) -> Pki:
    _ca(directory, "ca", "/CN=dovecote test CA")
    _issue(directory, "ca", "broker", "/CN=localhost",
           "subjectAltName=DNS:localhost,IP:127.0.0.1\n")  # fmt: skip
    _issue(directory, "ca", "alice", "/O=dovecote/CN=alice", "extendedKeyUsage=clientAuth\n")
    _ca(directory, "rogue-ca", "/CN=somebody else's CA")
    _issue(directory, "rogue-ca", "rogue", "/CN=localhost",
           "subjectAltName=DNS:localhost,IP:127.0.0.1\n")  # fmt: skip
    _p12(directory, "broker")
    _p12(directory, "alice")
    (directory / "alice-both.pem").write_text(
        (directory / "alice.pem").read_text() + (directory / "alice.key").read_text()
    )
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
                    "-keystore", "trust.p12", "-storetype", "pkcs12", "-storepass", PASSWORD],
                   cwd=directory, check=True, capture_output=True)  # fmt: skip
    return Pki(
        directory=directory,
        ca=directory / "ca.pem",
        broker_cert=directory / "broker.pem",
        broker_key=directory / "broker.key",
        broker_p12=directory / "broker.p12",
        alice=directory / "alice-both.pem",
        alice_cert=directory / "alice.pem",
        alice_key=directory / "alice.key",
        alice_p12=directory / "alice.p12",
        java_trust_store=directory / "trust.p12",
        rogue_cert=directory / "rogue.pem",
        rogue_key=directory / "rogue.key",
    )


def tls_config(pki: Pki, client_auth: str = "none", listeners: str = "") -> str:
    """A [tls] section with the test broker's certificate, then ``listeners``' sections."""
    return f"""
[tls]
certificate_file = "{pki.broker_cert}"
key_file = "{pki.broker_key}"
ca_file = "{pki.ca}"
client_auth = "{client_auth}"
{listeners}
"""
