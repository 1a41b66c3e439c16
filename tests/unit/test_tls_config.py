"""The TLS parts of the configuration ([tls], [ssl], [stomp_ssl], auto.tls, console.tls),
the server context made from PEM files, and a certificate's subject as RFC 4514 text."""

from __future__ import annotations

import logging
import re
import ssl
from pathlib import Path

import pytest

from dovecote.app import BrokerApp, tls_context
from dovecote.config import Config, ConfigError, load_config
from dovecote.transport.tls import (
    TlsFiles,
    TlsSetupError,
    certificate_subject,
    handshake_failure,
    handshake_failure_level,
    server_context,
)
from tlscerts import Pki, make_test_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


def load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "dovecote.toml"
    path.write_text(text)
    return load_config(path)


def test_tls_listeners_are_off_by_default_with_activemqs_ports() -> None:
    config = Config()
    assert (config.ssl.enabled, config.ssl.port) == (False, 61617)
    assert (config.stomp_ssl.enabled, config.stomp_ssl.port) == (False, 61614)
    assert not config.auto.tls and not config.console.tls
    assert config.tls.certificate_file is None and config.tls.client_auth == "none"


def test_tls_sections_parse_like_their_plain_siblings(tmp_path: Path) -> None:
    config = load(tmp_path, """
[tls]
certificate_file = "broker.pem"
key_file = "broker.key"
ca_file = "clients.pem"
client_auth = "need"

[ssl]
enabled = true
port = 1617
max_connections = 10
connect_attempt_timeout_ms = 2000
max_inactivity_ms = 0

[stomp_ssl]
enabled = true
host = "0.0.0.0"
heartbeat_ms = [0, 0]

[auto]
enabled = true
tls = true
""")  # fmt: skip
    assert config.tls.certificate_file == Path("broker.pem")
    assert config.tls.client_auth == "need"
    assert (config.ssl.port, config.ssl.max_connections) == (1617, 10)
    assert config.ssl.connect_attempt_timeout_ms == 2000
    assert (config.stomp_ssl.host, config.stomp_ssl.port) == ("0.0.0.0", 61614)
    assert config.auto.tls


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ("[ssl]\nenabled = true\n", "ssl"),
        ("[stomp_ssl]\nenabled = true\n", "stomp_ssl"),
        ("[auto]\nenabled = true\ntls = true\n", "auto.tls"),
        ("[console]\ntls = true\n", "console.tls"),
    ],
)  # fmt: skip
def test_a_tls_listener_without_a_certificate_is_a_config_error(
    tmp_path: Path, sections: str, named: str
) -> None:
    with pytest.raises(ConfigError, match=rf"{named}: TLS needs .* tls.certificate_file"):
        load(tmp_path, sections)


def test_a_disabled_tls_listener_needs_no_certificate(tmp_path: Path) -> None:
    load(tmp_path, "[ssl]\nenabled = false\n[auto]\ntls = true\n")


def test_client_certificates_need_the_ca_that_issues_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r'client_auth = "want" needs tls\.ca_file'):
        load(tmp_path, '[tls]\ncertificate_file = "b.pem"\nclient_auth = "want"\n')


def test_an_unknown_client_auth_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tls\.client_auth"):
        load(tmp_path, '[tls]\nclient_auth = "maybe"\n')


def test_the_app_refuses_a_tls_listener_without_a_certificate_too() -> None:
    """A Config made in code, not read from a file, is checked when the app is made."""
    from dovecote.config import SslSection

    with pytest.raises(ConfigError, match="ssl: TLS needs"):
        BrokerApp(Config(ssl=SslSection(enabled=True)))


def test_files_that_cannot_be_used_name_themselves(pki: Pki, tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(TlsSetupError, match=f"{missing}.*No such file"):
        server_context(TlsFiles(missing))
    # The rogue broker's key does not go with the broker's certificate.
    with pytest.raises(TlsSetupError, match=f"{pki.broker_cert} with key {pki.rogue_key}"):
        server_context(TlsFiles(pki.broker_cert, pki.rogue_key))
    with pytest.raises(TlsSetupError, match="CA file"):
        server_context(TlsFiles(pki.broker_cert, pki.broker_key, ca_file=pki.broker_key,
                                client_auth="need"))  # fmt: skip
    assert isinstance(TlsSetupError("x"), OSError)  # the CLI's "cannot start the broker"


def test_the_server_context(pki: Pki) -> None:
    files = TlsFiles(pki.broker_cert, pki.broker_key, ca_file=pki.ca, client_auth="want")
    context = server_context(files)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_OPTIONAL
    need = TlsFiles(pki.broker_cert, pki.broker_key, ca_file=pki.ca, client_auth="need")
    assert server_context(need).verify_mode == ssl.CERT_REQUIRED
    assert server_context(need, client_auth=False).verify_mode == ssl.CERT_NONE
    # The certificate and key in one file.
    both = pki.directory / "broker-both.pem"
    both.write_text(pki.broker_cert.read_text() + pki.broker_key.read_text())
    server_context(TlsFiles(both))


def test_the_console_context_asks_no_client_certificate(pki: Pki) -> None:
    from dovecote.config import TlsSection

    config = Config(tls=TlsSection(certificate_file=pki.broker_cert, key_file=pki.broker_key,
                                   ca_file=pki.ca, client_auth="need"))  # fmt: skip
    assert tls_context(config).verify_mode == ssl.CERT_REQUIRED
    assert tls_context(config, client_auth=False).verify_mode == ssl.CERT_NONE


ROOT = Path(__file__).parent.parent.parent


@pytest.mark.parametrize(
    ("document", "fence"), [("README.md", "toml tls"), ("docs/tls.md", "toml")]
)
def test_the_documented_examples_load(tmp_path: Path, document: str, fence: str) -> None:
    found = re.search(rf"```{fence}\n(.*?)```", (ROOT / document).read_text(), re.DOTALL)
    assert found is not None
    config = load(tmp_path, found[1])
    assert config.ssl.enabled and config.stomp_ssl.enabled and config.auto.tls
    assert config.console.tls and config.tls.certificate_file is not None


def subject(*rdns: tuple[tuple[str, str], ...]) -> dict[str, object]:
    return {"subject": rdns}


def test_certificate_subject_is_rfc_4514_most_specific_first() -> None:
    """getpeercert() lists the subject as the certificate holds it (/O=dovecote/CN=alice);
    RFC 4514 and Java's X500Principal write it the other way round."""
    alice = subject((("organizationName", "dovecote"),), (("commonName", "alice"),))
    assert certificate_subject(alice) == "CN=alice,O=dovecote"
    full = subject((("countryName", "NZ"),), (("stateOrProvinceName", "Otago"),),
                   (("localityName", "Dunedin"),), (("organizationalUnitName", "ops"),),
                   (("domainComponent", "example"),), (("userId", "a1"),),
                   (("emailAddress", "a@example.com"),))  # fmt: skip
    assert certificate_subject(full) == (
        "emailAddress=a@example.com,UID=a1,DC=example,OU=ops,L=Dunedin,ST=Otago,C=NZ"
    )


def test_certificate_subject_escapes_what_would_change_its_meaning() -> None:
    tricky = subject((("commonName", "Smith, John+x"),), (("organizationName", ' #"a;b<c>\\ '),))
    assert certificate_subject(tricky) == 'O=\\ #\\"a\\;b\\<c\\>\\\\\\ ,CN=Smith\\, John\\+x'
    assert certificate_subject(subject((("commonName", "#1=2"),))) == "CN=\\#1=2"
    multi = subject((("commonName", "alice"), ("userId", "7")))
    assert certificate_subject(multi) == "CN=alice+UID=7"


def test_no_certificate_no_subject() -> None:
    assert certificate_subject(None) is None
    assert certificate_subject({}) is None  # what getpeercert() gives for an unverified one


def test_handshake_failures_in_a_few_words() -> None:
    plain = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    plain.reason = "WRONG_VERSION_NUMBER"
    assert handshake_failure(plain) == "not TLS (WRONG_VERSION_NUMBER)"
    unknown_ca = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca")
    unknown_ca.reason = "TLSV1_ALERT_UNKNOWN_CA"
    assert handshake_failure(unknown_ca) == "TLSV1_ALERT_UNKNOWN_CA"
    timeout = ConnectionAbortedError("SSL handshake is taking longer than 1.0 seconds")
    assert handshake_failure(timeout) == "no handshake within the timeout"
    assert handshake_failure(ConnectionResetError()) == "closed by the client"
    eof = ssl.SSLEOFError(8, "EOF occurred in violation of protocol")
    assert handshake_failure(eof) == "closed by the client"
    assert [handshake_failure_level(e) for e in (plain, unknown_ca, timeout, eof)] == [
        logging.WARNING, logging.WARNING, logging.INFO, logging.INFO,
    ]  # fmt: skip
